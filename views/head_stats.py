"""Head statistics: a sortable table of every head; the chosen one opens on Explore."""

from __future__ import annotations

import streamlit as st

from analysis.circuits import MODE_NAMES, MODES
from analysis.induction import InductionReport
from model.names import block_layer
from ui import cache, charts, errors, sidebar, state
from ui.widgets import ATTENTION, HEAD, LAYER, head_chosen, show_chart
from viz.stats import for_display, with_probe_scores
from viz.style import thaw

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
STATS_PICK = state.session_key("stats_pick")  # the table's row to open on Explore
COMPOSE = state.url_key("compose")  # the composition shown: Q, K or V


def _on_row() -> None:
    rows = st.session_state["stats_table"]["selection"]["rows"]
    if rows:
        st.session_state[STATS_PICK] = rows[0]


def body() -> None:
    st.title("Head statistics")
    ctx = sidebar.chosen(trace=True)
    if ctx is None:
        return
    table = charts.head_statistics(ctx)
    probe = None if isinstance(ctx, cache.TraceFile) else cache.induction_report(ctx.path, ctx.stamp)
    caption = "Averaged over the query tokens of your text. Click a column header to sort, a row to pick the head."
    if probe is not None:
        table = with_probe_scores(table, probe.induction, probe.previous_token)
        name, head, score = probe.best(probe.induction)
        layer = block_layer(name)
        caption += (
            f" The two probe columns are measured once per model on `<s>` and {probe.length} random tokens, "
            f"repeated: an induction head looks back to the token after the current token's earlier occurrence. "
            f"Here the best is layer {layer + 1}, head {head + 1} ({score:.2f}); the loss on the second copy is "
            f"{probe.second_copy_loss:.2f} nats against {probe.first_copy_loss:.2f} on the first."
        )
    st.caption(caption)
    st.dataframe(
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
    chosen = (st.session_state.get(ATTENTION), st.session_state.get(LAYER), st.session_state.get(HEAD))
    here = [i for i, r in enumerate(table.itertuples()) if (r.attention, r.layer, r.head) == chosen]
    state.keep_valid(STATS_PICK, rows, here[0] if here else 0)  # first offered: the head chosen on another page
    pick = st.selectbox("Head to open", rows, key=STATS_PICK, format_func=lambda i: labels[i])
    if st.button("Open on Explore", key="open_head", type="primary"):
        row = table.iloc[pick]
        st.session_state.update({ATTENTION: row["attention"], LAYER: int(row["layer"]), HEAD: int(row["head"])})
        head_chosen()
        st.switch_page("views/explore.py")
    if not isinstance(ctx, cache.TraceFile):
        composition(ctx, probe)


def composition(ctx: cache.Context, probe: InductionReport | None) -> None:
    """How the heads compose, read from the model's weights (analysis.circuits): one mode at a time."""
    st.header("How heads compose")
    config = ctx.ckpt.config
    composed = cache.composition(ctx.path, ctx.stamp)
    stack = composed.stack
    if composed.n_layers < 2:
        runs = config.n_decoder_layers if stack == "decoder" else config.n_encoder_layers
        shared = f" (run {runs} times)" if runs > 1 else ""
        st.info(
            f"{ctx.entry.name} has one layer of attention weights{shared}: the scores pair heads of different "
            "layers' weights, so there is no pair to score."
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
    show_chart(thaw(charts.composition_chart(ctx.path, ctx.stamp, mode)), "composition", f"composition-{mode}")
    if probe is not None and stack == "decoder":
        name, head, _ = probe.best(probe.induction)
        layer = block_layer(name)
        if layer > 0:
            sources = composed.top_sources(mode, layer, head, k=3)
            listed = ", ".join(f"layer {sl + 1}, head {sh + 1} ({s:.3f})" for sl, sh, s in sources)
            st.caption(
                f"The best induction head of the probe, layer {layer + 1}, head {head + 1}, reads most from: {listed}."
            )


errors.guarded(body)
