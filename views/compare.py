"""Compare: a minimal pair of inputs, the same head of both, and their difference where the tokens align."""

from __future__ import annotations

import streamlit as st

from analysis.head_diff import LayoutError, head_differences
from analysis.head_diff import grids as head_grids
from analysis.patching import PairError
from analysis.record import Analysis
from inference import catalog
from inference.catalog import MINIMAL_PAIRS, WINOGRAD
from inference.checkpoint import CheckpointError
from inference.text import InputError
from model.names import ATTENTIONS
from ui import cache, charts, errors, progress, sidebar, state
from ui.cache import Shown, Source, TraceGoneError
from ui.downloads import table_downloads
from ui.markdown import literal
from ui.says import figure_says
from ui.widgets import data_table, head_picker, open_on_head, show_chart, trace_uploader, weighting_picker
from viz.attribution import heads_heatmap
from viz.compare import aligned, difference_heatmap
from viz.heads import AVERAGE, head_title
from viz.labels import display_piece, safe_filename
from viz.patching import WHAT_LABELS, pair_labels, patching_frame, patching_heatmap, patching_title

COMPARE = state.url_text("compare")  # the second text
PAIRED_WITH = state.session_key("compare_paired_with")  # the first text the second was last chosen for
SECOND_UPLOAD = "compare_upload"  # the second trace file's uploader (when the sidebar draws a trace file)
SECOND_TRACE = "_compare_second_trace"  # session: the second trace file (a cache.Source)
PATCH_WHAT = state.url_key("patch")  # analysis.patching.WHATS
PATCH_ANSWER = state.url_key("patch_answer", longest=200)  # a piece among the first text's top guesses
PATCH_VERSUS = state.url_key("patch_versus", longest=200)  # a piece among either text's top guesses
PATCH_METHOD = state.url_key("patch_method")  # METHODS
METHODS = {"exact": "patched runs (one per patch)", "approximate": "attribution patching (one backward pass)"}
WHATS_SHOWN = {"heads": "each head's output", "residual": "the stream at each layer and position"}
PATCHED = "_compare_patched"  # session: the request whose patching the page shows (the button was pressed for it)
COMPARE_WITH = state.url_key("compare_with")  # WITH: what the second input is
WITH = {"text": "another text", "model": "another model"}
SECOND_MODEL = state.url_key("compare_model", longest=200)  # the second model's name (a checkpoint folder's)


def partner(first: str, card: dict | None = None) -> str:
    """The default second text: the pair the card measured (python -m atlas defaults) when `first` is its first
    text, else a preset's minimal pair, else the first text itself (a word to change)."""
    measured = catalog.card_defaults(card or {}, "compare") or {}
    if measured.get("first") == first and isinstance(measured.get("second"), str):
        return measured["second"]
    return MINIMAL_PAIRS.get(first, first)


def _follow(first: str, card: dict) -> None:
    """The second text follows the first while it is the default partner: a new preset in the sidebar brings its
    own pair; a second text the person typed stays."""
    before = st.session_state.get(PAIRED_WITH)
    was = partner(before or "", card)
    if COMPARE not in st.session_state or (before != first and st.session_state[COMPARE] == was):
        st.session_state[COMPARE] = partner(first, card)
    st.session_state[PAIRED_WITH] = first


@errors.safe  # a callback: runs outside the page's guard
def _use_pair() -> None:
    st.session_state[sidebar.TEXT], st.session_state[COMPARE] = WINOGRAD
    st.session_state[PAIRED_WITH] = WINOGRAD[0]


def _second_opened(trace: Source) -> None:
    st.session_state[SECOND_TRACE] = trace


def _second_trace(first: Shown) -> Shown | None:
    """The second trace file beside the sidebar's: its uploader, and its Analysis; None after saying why none."""
    failed = trace_uploader(
        f"Second trace file (.json or .npz), beside {literal(first.name)}", SECOND_UPLOAD, _second_opened
    )
    if failed:
        st.error(f"The second file cannot be opened: {failed}")  # failed: already errors.shown
        return None
    second = st.session_state.get(SECOND_TRACE)
    if second is None:
        st.info(
            "Choose a second trace file to compare with the one the sidebar draws: the same model on a minimal "
            "pair, or another model on the same text."
        )
        return None
    try:
        return cache.analysed(second)
    except TraceGoneError as exc:
        st.session_state.pop(SECOND_TRACE, None)
        st.error(errors.shown(str(exc)))
        return None


def _second_text(first: Shown) -> Shown | None:
    """The second text's box, Winograd's pair, and its Analysis by the same model; None after saying why none."""
    _follow(first.text, first.ckpt.card)
    st.text_input("Second text (the first is the sidebar's)", key=COMPARE, max_chars=2000)
    st.button(
        "Use Winograd's pair", on_click=_use_pair, key="compare_pair", help=f"{literal(WINOGRAD[0])} / …too wide."
    )
    if st.session_state[COMPARE] == first.text:
        st.caption("Both texts are the same: change a word of the second to see what it changes.")
    try:
        same = st.session_state[COMPARE] == first.text  # one analysis serves both
        return first if same else cache.analysed(first.with_text(st.session_state[COMPARE]))
    except InputError as exc:
        st.error(errors.shown(f"Second text: {exc}"))
        return None


def _second_model(first: Shown) -> Shown | None:
    """The second model's picker and its Analysis of the sidebar's text; None after saying why none. It offers
    every other checkpoint that loads, and opens on the first that has every attention the first model has and reads
    any text, one that reads the same presets first."""
    root = catalog.checkpoints_dir()
    entries = {e.name: e for e in cache.checkpoints(root)}
    others = [name for name, e in entries.items() if e.ok and name != first.name]
    if not others:
        st.info("This server has one model only: compare another text instead.")
        return None
    families = {name: catalog.preset_family(name, e.kind, e.card) for name, e in entries.items()}
    needed = set(first.analysis.attentions)
    # a model with every attention of the first, reading any text (a 5-gram model reads a blank only)
    fits = [n for n in others if needed <= set(ATTENTIONS.get(entries[n].kind, ())) and families[n] != "fivegram"]
    alike = [name for name in fits if families[name] == families.get(first.name)]  # reads the same presets too
    state.keep_valid(SECOND_MODEL, others, (alike or fits or others)[0])
    name = st.selectbox("Second model (the first is the sidebar's)", others, key=SECOND_MODEL)
    entry = entries[name]
    stamp = catalog.stamp(entry.path)
    try:
        ckpt = cache.load_model(str(entry.path), stamp)
        return cache.analysed(Source.checkpoint(entry, ckpt, stamp, first.text))
    except (CheckpointError, InputError) as exc:
        st.error(errors.shown(f"Second model {name}: {exc}"))
        return None


def _nearest(first: Analysis, second: Analysis, attention: str, layer: int, head: int | str) -> tuple[int, int | str]:
    """The second model's head beside the first's (layer, head): the same where it has it, else its last layer or
    head."""
    layers = second.layers(attention)
    near = layer if layer in layers else layers[-1]
    n_heads = second.sublayer(attention, near).n_heads
    return near, head if head == AVERAGE or head < n_heads else n_heads - 1


def _mismatch(first: Analysis, second: Analysis, attention: str, layer: int) -> str:
    """Why the second trace has no head to put beside the first's chosen one ("" when it has)."""
    if attention not in second.attentions:
        return f"The second trace has no {first.attention_label(attention).lower()} (it is {second.kind})."
    if layer not in second.layers(attention):
        return f"The second trace has {len(second.layers(attention))} layers: it has no layer {layer + 1}."
    theirs, ours = second.sublayer(attention, layer).n_heads, first.sublayer(attention, layer).n_heads
    if theirs != ours:
        return f"Layer {layer + 1} has {ours} heads in the first trace and {theirs} in the second: pick traces alike."
    return ""


def _outputs(col, shown: Shown, name: str, models: bool = False) -> None:
    """What the model wrote (a translator) or guessed next (a language model), under its heatmap; `models`: the two
    inputs are two models on one text, named by the models."""
    analysis = shown.analysis
    who = literal(shown.name) if models else name
    if analysis.output_text is not None:
        col.markdown(f"**Output ({who})**")
        col.code(analysis.output_text or "(empty)", language=None, wrap_lines=True)
    elif analysis.predictions:
        col.markdown(f"**Next token by {who}**" if models else f"**Next token after the {name} text**")
        last = len(analysis.target_pieces) - 1
        data_table(charts.predictions_table(shown, last), col, hide_index=True, key=f"compare_top_{name}")


def body() -> None:
    st.title("Compare two inputs")
    first = sidebar.chosen(trace=True)
    inputs = "Two texts that differ in a word or two" if first is None or first.has_model else "Two trace files"
    either = ", or one text read by two models" if first is None or first.has_model else ""
    if first is None:
        st.caption(f"{inputs} (a minimal pair){either}: the same head of each.")
        return
    figure = st.container()  # the two heads and their sentence first; what to compare and the pickers under them
    st.caption(
        f"{inputs} (a minimal pair){either}: the same head of each, and where both have the same number of tokens, "
        "the difference second − first (red: the first attends more, blue: the second)."
    )
    models = False
    if first.has_model:
        state.keep_valid(COMPARE_WITH, list(WITH), "text")
        choice, what = st.columns([1, 3])  # side by side: on a projector the figure starts in the first view
        with_ = choice.radio("Compare with", list(WITH), key=COMPARE_WITH, format_func=WITH.get)
        models = with_ == "model"
        with what:
            second = _second_model(first) if models else _second_text(first)
    else:
        second = _second_trace(first)
    if second is None:
        return
    if first.has_model and (head := catalog.default_head(first.ckpt.card)) and head[0] in first.analysis.sublayers:
        open_on_head(*head)  # the head Explore opens on, measured on the card (python -m atlas defaults)
    attention, layer, head = head_picker(first.analysis, with_average=True)
    norms = weighting_picker(first.analysis) and second.analysis.has_value_norms
    state.sync_url()
    if models:
        two_models(first, second, attention, layer, head, norms)
        return
    if why := _mismatch(first.analysis, second.analysis, attention, layer):
        st.error(errors.shown(why))
        return
    which = "the average of its heads" if head == charts.AVERAGE else f"head {head + 1}"
    figure_says(  # above the two charts: on a phone they stack, the first one in view with it
        f"The same head ({literal(first.analysis.attention_label(attention))}, layer {layer + 1}, {which}) on "
        "each input: where the two pictures differ, the changed word changed what the head reads.",
        figure,
    )
    left, right = figure.columns(2)
    for col, shown, name in ((left, first, "first"), (right, second, "second")):
        show_chart(
            charts.head_chart(shown, attention, layer, head, norms),
            f"compare_{name}",
            safe_filename("compare", name, shown.name),
            where=col,
        )
    left, right = st.columns(2)
    for col, shown, name in ((left, first, "first"), (right, second, "second")):
        _outputs(col, shown, name)
    difference(first, second, attention, layer, head, norms)
    if first.has_model and second.has_model:
        patching_section(first, second)


def two_models(first: Shown, second: Shown, attention: str, layer: int, head: int | str, norms: bool) -> None:
    """Two models on one text: each model's head side by side, each read by its own tokenizer; the difference only
    where both read the same tokens."""
    if attention not in second.analysis.attentions:
        label = first.analysis.attention_label(attention).lower()
        st.error(errors.shown(f"{second.name} has no {label} (it is {second.analysis.kind}): choose another model."))
        return
    near, near_head = _nearest(first.analysis, second.analysis, attention, layer, head)
    if (near, near_head) != (layer, head):
        sublayer = second.analysis.sublayer(attention, near)
        st.caption(
            literal(
                f"{second.name} has {len(second.analysis.layers(attention))} layers of {sublayer.n_heads} heads: "
                f"beside layer {layer + 1}, its layer {near + 1}"
                + ("" if near_head == AVERAGE else f", head {near_head + 1}")
                + "."
            )
        )
    left, right = st.columns(2)
    for col, shown, name, (lay, hd) in (
        (left, first, "first", (layer, head)),
        (right, second, "second", (near, near_head)),
    ):
        show_chart(
            charts.head_chart(shown, attention, lay, hd, norms),
            f"compare_{name}",
            safe_filename("compare", name, shown.name),
            where=col,
        )
        if shown is second:  # the sidebar says the first model's; the second may read the text quite otherwise
            for note in shown.analysis.notes:
                col.caption(literal(note))
        _outputs(col, shown, name, models=True)
    a, b = (x.analysis.sublayer(attention, lay) for x, lay in ((first, layer), (second, near)))
    if list(a.query_pieces) != list(b.query_pieces) or list(a.key_pieces) != list(b.key_pieces):
        st.caption(
            literal(
                f"The two heads read different tokens ({first.name}: {len(a.key_pieces)}, {second.name}: "
                f"{len(b.key_pieces)}): each model reads the text with its own tokenizer (and a translator's decoder "
                "reads its own output), so no position of one is a position of the other: no difference is drawn."
            )
        )
        return
    st.caption(
        literal(f"Both models read the same {len(a.key_pieces)} tokens: the difference is position by position.")
    )
    difference(first, second, attention, layer, head, norms, (near, near_head))
    every_head(first, second)


def every_head(first: Shown, second: Shown) -> None:
    """Every head's change from the first model to the second (analysis.head_diff), where the two match head by
    head; else one line saying why not."""
    try:
        found = head_differences(first.analysis, second.analysis)
    except LayoutError as exc:
        st.caption(literal(f"No head-by-head overview of the two models: {exc}."))
        return
    st.header("Every head: how far it moved", anchor=False)
    labels = {a: first.analysis.attention_label(a) for a in first.analysis.attentions}
    title = f"How far each head moved from {first.name} to {second.name}"
    fig = heads_heatmap(head_grids(found), labels, title, "total variation", signed=False)
    show_chart(fig, "compare_every_head", safe_filename("compare-every-head", first.name, second.name))
    most = max(found, key=lambda d: d.total_variation)
    st.caption(
        literal(
            "Each square is one head: 0 when it attends alike in both models, 1 when no query's two rows of weights "
            f"share a key. The head that moved most is layer {most.layer + 1}, head {most.head + 1} of the "
            f"{labels[most.attention].lower()} ({most.total_variation:.2f})."
        )
    )


def difference(
    first: Shown,
    second: Shown,
    attention: str,
    layer: int,
    head: int | str,
    norms: bool,
    theirs: tuple[int, int | str] | None = None,
) -> None:
    """The second head's weights minus the first's where the token axes align (`theirs`: the second's layer and
    head, when not the first's)."""
    second_layer, second_head = theirs or (layer, head)
    a = charts.as_drawn(first.analysis.sublayer(attention, layer), norms)
    b = charts.as_drawn(second.analysis.sublayer(attention, second_layer), norms)
    nq, nk = min(len(a.query_pieces), len(b.query_pieces)), min(len(a.key_pieces), len(b.key_pieces))
    title = f"Second − first: {head_title(first.analysis.attention_label(attention), layer, head, norms)}"
    if (second_layer, second_head) != (layer, head):
        title += f" beside the second's layer {second_layer + 1}"
        title += "" if second_head == AVERAGE else f", head {second_head + 1}"
    if not (aligned(a.query_pieces, b.query_pieces) and aligned(a.key_pieces, b.key_pieces)):
        st.caption(
            f"The texts have different token counts ({len(a.query_pieces)} × {len(a.key_pieces)} and "
            f"{len(b.query_pieces)} × {len(b.key_pieces)}): the difference covers the positions both have, queries "
            f"1–{nq} and keys 1–{nk}, matched by position."
        )
        title += f" (queries 1–{nq}, keys 1–{nk})"
    weights = [charts.head_weights(x, h)[:nq, :nk] for x, h in ((a, head), (b, second_head))]
    queries, keys = (a.query_pieces[:nq], b.query_pieces[:nq]), (a.key_pieces[:nk], b.key_pieces[:nk])
    diff = difference_heatmap(*weights, queries, keys, title)
    show_chart(diff, "compare_difference", safe_filename("compare-difference", first.name))


def _tokens(first: Shown, second: Shown) -> tuple[list[str], dict[str, int], str, str]:
    """The answer's options (the first text's top guesses), every piece's id, and the two defaults: the pair's
    measured answer and versus when the texts are the card's pair (python -m atlas defaults), else the first
    text's top guess and the second's (or, where both agree, the first's runner-up)."""
    ours, theirs = first.analysis.predictions[-1], second.analysis.predictions[-1]
    ids = {p.piece: p.id for p in (*theirs, *ours)}
    answer = ours[0].piece
    versus = next((p.piece for p in (*theirs, *ours) if p.piece != answer), answer)
    options = [p.piece for p in ours]
    measured = catalog.card_defaults(first.ckpt.card, "compare") or {}
    if (measured.get("first"), measured.get("second")) == (first.text, second.text):
        answer, versus = measured["answer"], measured["versus"]
        ids.update({answer: measured["answer_id"], versus: measured["versus_id"]})
        options = list(dict.fromkeys([answer, *options]))
    return options, ids, answer, versus


def _questions(first: Shown) -> None:
    """What the card measured of the pairs a model is asked (python -m atlas defaults): the question this pair
    asks, and each question the model cannot answer (its logit difference keeps its sign across the two texts)."""
    card = first.ckpt.card
    measured = catalog.card_defaults(card, "compare") or {}
    tried = (card.get("defaults") or {}).get("compare_tried") or []
    lines = []
    if measured.get("first") == first.text:
        lines.append(f"This pair asks {measured['question']}.")
    for pair in tried:
        if isinstance(pair, dict) and not pair.get("answered"):
            a, v = display_piece(pair["answer"]), display_piece(pair["versus"])
            lines.append(
                f"{first.name} cannot answer {pair['question']} ({pair['first']!r} / {pair['second']!r}): "
                f"{a} − {v} is {pair['first_difference']:+.2f} on the first text and {pair['second_difference']:+.2f} "
                "on the second, the same sign, so patching it would measure nothing."
            )
    for line in lines:
        st.caption(literal(line))


def patching_section(first: Shown, second: Shown) -> None:
    """Activation patching of the pair: the second text run again with one activation of the first's."""
    st.header("Activation patching")
    st.caption(
        "Which heads carry the difference? The second text is run again with one activation taken from the first "
        "text's run; the chart shows how much of the difference between the two answers each patch restores (1: "
        "the second text now answers as the first, 0: no change). A language model's texts of the same token "
        "count only: position is patched with position."
    )
    if first.analysis.has_encoder:
        st.info("Activation patching here needs a language model: choose one in the sidebar.")
        return
    a, b = first.analysis.target_pieces, second.analysis.target_pieces
    if len(a) != len(b) or first.text == second.text:
        why = "The texts are the same" if first.text == second.text else "The texts have different token counts"
        st.info(f"{why} ({len(a) - 1} and {len(b) - 1} tokens): change words for words of the same token count.")
        return
    _questions(first)
    options, ids, answer_default, versus_default = _tokens(first, second)
    top, bottom = st.columns(2), st.columns(2)
    state.keep_valid(PATCH_WHAT, list(WHAT_LABELS), "heads")
    what = top[0].selectbox("Patch", list(WHAT_LABELS), key=PATCH_WHAT, format_func=WHATS_SHOWN.get)
    methods = list(METHODS) if what == "heads" else ["exact"]
    state.keep_valid(PATCH_METHOD, methods, "exact")
    method = top[1].selectbox("Method", methods, key=PATCH_METHOD, format_func=METHODS.get)
    state.keep_valid(PATCH_ANSWER, options, answer_default)
    answer = bottom[0].selectbox("Answer (the first text's)", options, key=PATCH_ANSWER, format_func=display_piece)
    others = [p for p in ids if p != answer]
    state.keep_valid(PATCH_VERSUS, others, versus_default if versus_default in others else others[0])
    versus = bottom[1].selectbox("Versus", others, key=PATCH_VERSUS, format_func=display_piece)
    state.sync_url()
    asked = (first.path, first.text, second.text, what, answer, versus, method)
    runs = first.ckpt.config.n_decoder_layers * (first.ckpt.config.n_heads if what == "heads" else len(a))
    cost = "one forward and one backward pass" if method == "approximate" else f"{runs} patched runs"
    if st.button(f"Patch ({cost})", key="patch_run"):
        st.session_state[PATCHED] = asked
    if st.session_state.get(PATCHED) != asked:
        return
    try:
        with progress.running("patch_run", PATCHED, first="Patching…") as show:
            if method == "approximate":
                result = cache.attribution_patching(first, second.text, ids[answer], ids[versus])
            else:
                moved = lambda done, total: show(done / total, f"Patching: {done} of {total} runs")
                result = cache.activation_patching(first, second.text, what, ids[answer], ids[versus], moved)
    except PairError as exc:
        st.info(errors.shown(str(exc)))
        return
    st.caption(
        f"Logit difference {literal(display_piece(answer))} − {literal(display_piece(versus))}: "
        f"{result.clean:+.3f} for the first text, "
        f"{result.corrupted:+.3f} for the second."
    )
    labels = pair_labels([display_piece(p) for p in a], [display_piece(p) for p in b])
    title = patching_title(what, display_piece(answer), display_piece(versus), result.approximate)
    figure = patching_heatmap(result.scores, what, labels, title)
    name = safe_filename("patching", first.name, what, method)
    show_chart(figure, "patching", name)
    table = patching_frame(result.scores, what, labels)
    table_downloads(table, name, "patching", "what each patch restores")
    with st.expander("Every patch, the most restoring first"):
        data_table(table, hide_index=True, key="patching_table")


errors.guarded(body)
