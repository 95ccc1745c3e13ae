"""Head statistics: a sortable table of every head; the chosen one opens on Explore."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pandas as pd
import streamlit as st

from analysis.circuits import MODE_NAMES, MODES
from analysis.detectors import PATTERNS, detect
from analysis.induction import InductionReport
from analysis.record import Analysis
from inference.text import InputError
from model.names import sublayer_layer
from ui import cache, charts, errors, progress, sidebar, state
from ui.downloads import table_downloads
from ui.markdown import literal
from ui.says import figure_says
from ui.widgets import ATTENTION, HEAD, LAYER, data_table, head_chosen, show_chart
from viz.attribution import heads_heatmap
from viz.circuits import composition_table
from viz.labels import safe_filename
from viz.stats import column_grid, for_display, with_probe_scores
from viz.tables import heads_frame

FMT = st.column_config.NumberColumn
COLUMNS = {
    "attention": st.column_config.TextColumn("attention"),
    "entropy_bits": FMT("entropy (bits)", format="%.3f", help="0 = each query looks at one key only"),
    "mean_distance": FMT("mean distance", format="%.2f", help="average |query − key| in positions"),
    "previous_token": FMT("previous token", format="%.3f", help="weight on the token just before"),
    "first_token": FMT("first token (sink)", format="%.3f", help="weight on position 0"),
    "diagonal": FMT("diagonal", format="%.3f", help="weight on the query's own position"),
    "induction": FMT(
        "induction (probe)",
        format="%.3f",
        help="on <s> and a run of random tokens repeated: weight on the token that followed the current token's "
        "earlier occurrence (1 = a perfect induction head; Olsson et al. 2022)",
    ),
    "previous_token_probe": FMT(
        "previous token (probe)", format="%.3f", help="on the same repeated run: weight on the token just before"
    ),
}
PATTERN_HELP = (
    "previous token: each token looks at the one before it. first token: at the first (<s>). current token: at "
    "itself. same token: at an earlier copy of itself. induction: at the token that followed an earlier copy of "
    "itself (Olsson et al. 2022)."
)
GRID_COLUMNS = ("induction", "previous_token_probe", "previous_token", "first_token", "diagonal")  # 0 to 1
COLOUR = state.url_key("stats_colour")  # the score of GRID_COLUMNS the heads' picture shows
# The table's row to open on Explore: in the session only, for a row number depends on the table's order; it
# starts on the head chosen on any page, which the URL keeps.
STATS_PICK = state.session_key("stats_pick")
COMPOSE = state.url_key("compose")  # the composition shown: Q, K or V
DETECT = state.url_key("detect")  # a pattern of analysis.detectors.PATTERNS
DETECT_TEXTS = state.url_text("detect_texts")  # more texts for the detector, one a line
MAX_TEXTS = 20  # the detector's texts besides the sidebar's: each is one analysis of the model's worker
DETECT_STOPPED = "_detect_stopped"  # session: the lines whose scoring was cancelled (not scored again until asked)


def _on_row() -> None:
    rows = st.session_state["stats_table"]["selection"]["rows"]
    if rows:
        st.session_state[STATS_PICK] = rows[0]


def body() -> None:
    st.title("Head statistics")
    shown = sidebar.chosen(trace=True)
    if shown is None:
        return
    table = charts.head_statistics(shown)
    probe = cache.induction_report(shown.path, shown.stamp) if shown.has_model else None
    caption = "Averaged over the query tokens of your text. Click a column header to sort, a row to pick the head."
    if probe is not None:
        table = with_probe_scores(table, probe.induction, probe.previous_token)
        name, head, score = probe.best(probe.induction)
        layer = sublayer_layer(name)
        caption += (
            f" The two probe columns are measured once per model on `<s>` and {probe.length:d} random tokens, "
            f"repeated: an induction head looks back to the token after the current token's earlier occurrence. "
            f"Here the best is layer {layer + 1}, head {head + 1} ({score:.2f}); the loss on the second copy is "
            f"{probe.second_copy_loss:.2f} nats against {probe.first_copy_loss:.2f} on the first."
        )
    heads_picture(shown, table)
    st.caption(caption)
    data_table(
        for_display(table),
        hide_index=True,
        column_config=COLUMNS,
        key="stats_table",
        on_select=_on_row,
        selection_mode="single-row",
        height=min(600, 35 * (len(table) + 1) + 3),
    )
    rows = list(range(len(table)))
    labels = [f"{r.label}, layer {r.layer + 1}, head {r.head + 1}" for r in table.itertuples()]
    head = st.session_state.get(HEAD)  # the average of heads is no row: head 1 takes its place, as on Attention math
    chosen = (st.session_state.get(ATTENTION), st.session_state.get(LAYER), 0 if head == charts.AVERAGE else head)
    here = [i for i, r in enumerate(table.itertuples()) if (r.attention, r.layer, r.head) == chosen]
    state.keep_valid(STATS_PICK, rows, here[0] if here else 0)  # first offered: the head chosen on another page
    pick = st.selectbox("Head to open", rows, key=STATS_PICK, format_func=lambda i: labels[i])
    if st.button("Open on Explore", key="open_head", type="primary"):
        row = table.iloc[pick]
        st.session_state.update({ATTENTION: row["attention"], LAYER: int(row["layer"]), HEAD: int(row["head"])})
        head_chosen()
        st.switch_page("views/explore.py")
    detector(shown)
    if shown.has_model:
        composition(shown, probe)


def heads_picture(shown: cache.Shown, table: pd.DataFrame) -> None:
    """The page's figure, first: every head coloured by one score of the table (those from 0 to 1), the induction
    probe's where the model has one, so that the heads that stand out are seen before the table is read."""
    gridded = [c for c in GRID_COLUMNS if c in table and column_grid(table, c)]
    if not gridded:
        return
    state.keep_valid(COLOUR, gridded, "induction" if "induction" in gridded else "previous_token")
    slot = st.container()  # the figure and its sentence first, the picker that colours it under them
    left, _ = st.columns([2, 3])
    column = left.selectbox("Colour each head by", gridded, key=COLOUR, format_func=lambda c: COLUMNS[c].get("label"))
    grids = column_grid(table, column)
    labels = {a: shown.analysis.attention_label(a) for a in grids}
    label = COLUMNS[column].get("label")
    figure = heads_heatmap(grids, labels, f"Every head: {label}", value="score", signed=False)
    show_chart(figure, "stats_grid", safe_filename("head-statistics", shown.name, column), where=slot)
    figure_says(
        f"Each square is one head (rows: layers); the brighter it is, the higher its {literal(label)} score, "
        "from 0 to 1: "
        f"{literal(COLUMNS[column].get('help', ''))}.",
        slot,
    )


def detector(shown: cache.Shown) -> None:
    """How much of each head's attention follows a pattern (analysis.detectors), over the text and more lines."""
    st.header("Detect a pattern")
    st.caption(
        "The share of each head's attention that falls where a pattern points (1: all of it), averaged over the "
        "queries, and over the texts when there are several (TransformerLens's detect_head). Self-attention only."
    )
    state.keep_valid(DETECT, list(PATTERNS), "previous token")
    pattern = st.selectbox("Pattern", PATTERNS, key=DETECT, help=PATTERN_HELP)
    lines: list[str] = []
    if shown.has_model:
        more = st.text_area(
            f"More texts, one a line (up to {MAX_TEXTS}); the sidebar's text is always the first", key=DETECT_TEXTS
        )
        lines = [line.strip() for line in (more or "").splitlines() if line.strip()]
        if len(lines) > MAX_TEXTS:
            st.warning(f"{len(lines)} lines: the first {MAX_TEXTS} are scored.")
        lines = lines[:MAX_TEXTS]
        if lines and st.session_state.get(DETECT_STOPPED) == lines:
            st.info("Scoring the more texts was cancelled: the scores below are over the sidebar's text alone.")
            st.button("Score them", key="detect_again", on_click=progress.forget, args=(DETECT_STOPPED,))
            lines = []
    scored = [0]

    def analyses() -> Iterator[Analysis]:
        """The sidebar's text, then each line's analysis, one at a time: the page holds one line's attention at once
        (the worker's cache, in the byte budget, keeps what it has room for)."""
        scored[0] += 1
        yield shown.analysis
        if not lines:
            return
        with progress.running("detect", DETECT_STOPPED, lines, "Scoring the more texts…") as show:
            for number, line in enumerate(lines, start=1):
                show((number - 1) / len(lines), f"Scoring line {number} of {len(lines)}")
                try:
                    analysis = cache.analysed(shown.with_text(line), heavy=True).analysis
                except InputError as exc:
                    st.error(errors.shown(f"Line {number} is left out: {exc}"))
                    continue
                scored[0] += 1
                yield analysis
                del analysis

    scores = detect(analyses(), pattern)
    if not scores:
        st.info("This model has no self-attention to score.")
        return
    labels = {a: shown.analysis.attention_label(a) for a in scores}
    texts = "your text" if scored[0] == 1 else f"{scored[0]} texts"
    title = f"‘{pattern}’ heads: the share of attention on the pattern, over {texts}"
    figure = heads_heatmap(scores, labels, title, value="score", signed=False)
    name = safe_filename("detector", shown.name, pattern)
    show_chart(figure, "detector", name)
    table = heads_frame(scores, labels, "score")
    table_downloads(table, name, "detector", f"the ‘{literal(pattern)}’ scores")
    with st.expander("Every head, the highest score first"):
        data_table(table, hide_index=True, key="detector_table")


def composition(source: cache.Source, probe: InductionReport | None) -> None:
    """How the heads compose, read from the model's weights (analysis.circuits): one mode at a time."""
    st.header("How heads compose")
    config = source.ckpt.config
    composed = cache.composition(source.path, source.stamp)
    stack = composed.stack
    if composed.n_layers < 2:
        runs = config.n_decoder_layers if stack == "decoder" else config.n_encoder_layers
        shared = f" (run {runs} times)" if runs > 1 else ""
        st.info(
            f"{literal(source.entry.name)} has one layer of attention weights{shared}: the scores pair heads of "
            "different layers' weights, so there is no pair to score."
        )
        return
    st.caption(
        "From the weights alone, not your text (Elhage et al. 2021): how much each later head reads what an earlier "
        "head writes, ‖W_OV(earlier) · W_QK(later)‖ over the product of their norms, 0 to 1. Q: into its queries, "
        "K: into its keys, V: into its values. An induction head's keys read what a previous-token head wrote."
        + ("" if stack == "decoder" else " Here: the encoder's self-attention.")
    )
    state.keep_valid(COMPOSE, list(MODES), "K")
    mode = st.radio("Composition", MODES, key=COMPOSE, horizontal=True, format_func=MODE_NAMES.get)
    show_chart(charts.composition_chart(source.path, source.stamp, mode), "composition", f"composition-{mode}")
    what = "the composition scores (Q, K and V)"
    table = partial(composition_table, composed.scores)  # built on click: a pair of heads a row
    table_downloads(table, safe_filename("composition", source.name), "composition", what)
    if probe is not None and stack == "decoder":
        name, head, _ = probe.best(probe.induction)
        layer = sublayer_layer(name)
        if layer > 0:
            sources = composed.top_sources(mode, layer, head, k=3)
            listed = ", ".join(f"layer {sl + 1}, head {sh + 1} ({s:.3f})" for sl, sh, s in sources)
            st.caption(
                f"The best induction head of the probe, layer {layer + 1}, head {head + 1}, reads most from: "
                f"{literal(listed)}."
            )


errors.guarded(body)
