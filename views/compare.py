"""Compare: a minimal pair of inputs, the same head of both, and their difference where the tokens align."""

from __future__ import annotations

import streamlit as st

from analysis.record import Analysis
from inference.catalog import MINIMAL_PAIRS, WINOGRAD
from inference.text import InputError
from ui import cache, charts, errors, sidebar, state
from ui.cache import Analysed, TracedAnalysis, TraceGoneError
from ui.widgets import head_picker, show_chart, trace_uploader
from viz.compare import aligned, difference_heatmap
from viz.labels import safe_filename
from viz.style import thaw

COMPARE = state.url_key("compare")  # the second text
PAIRED_WITH = state.session_key("compare_paired_with")  # the first text the second was last chosen for
SECOND_UPLOAD = "compare_upload"  # the second trace file's uploader (when the sidebar draws a trace file)
SECOND_TRACE = "_compare_second_trace"  # session: the second trace file (a cache.TraceFile)


def partner(first: str) -> str:
    """The default second text: a preset's minimal pair, else the first text itself (a word to change)."""
    return MINIMAL_PAIRS.get(first, first)


def _follow(first: str) -> None:
    """The second text follows the first while it is the default partner: a new preset in the sidebar brings its
    own pair; a second text the person typed stays."""
    before = st.session_state.get(PAIRED_WITH)
    if COMPARE not in st.session_state or (before != first and st.session_state[COMPARE] == partner(before or "")):
        st.session_state[COMPARE] = partner(first)
    st.session_state[PAIRED_WITH] = first


@errors.safe  # a callback: runs outside the page's guard
def _use_pair() -> None:
    st.session_state[sidebar.TEXT], st.session_state[COMPARE] = WINOGRAD
    st.session_state[PAIRED_WITH] = WINOGRAD[0]


def _second_opened(trace: cache.TraceFile) -> None:
    st.session_state[SECOND_TRACE] = trace


def _second_trace(first: TracedAnalysis) -> TracedAnalysis | None:
    """The second trace file beside the sidebar's: its uploader, and its Analysis; None after saying why none."""
    failed = trace_uploader(f"Second trace file (.json or .npz), beside {first.name}", SECOND_UPLOAD, _second_opened)
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
        return cache.traced(second)
    except TraceGoneError as exc:
        st.session_state.pop(SECOND_TRACE, None)
        st.error(errors.shown(str(exc)))
        return None


def _second_text(first: Analysed) -> Analysed | None:
    """The second text's box, Winograd's pair, and its Analysis by the same model; None after saying why none."""
    _follow(first.text)
    st.text_input("Second text (the first is the sidebar's)", key=COMPARE, max_chars=2000)
    st.button("Use Winograd's pair", on_click=_use_pair, key="compare_pair", help=f"{WINOGRAD[0]} / …too wide.")
    if st.session_state[COMPARE] == first.text:
        st.caption("Both texts are the same: change a word of the second to see what it changes.")
    try:
        same = st.session_state[COMPARE] == first.text  # one analysis serves both
        return first if same else cache.analysed(first.with_text(st.session_state[COMPARE]))
    except InputError as exc:
        st.error(errors.shown(f"Second text: {exc}"))
        return None


def _mismatch(first: Analysis, second: Analysis, attention: str, layer: int) -> str:
    """Why the second trace has no head to put beside the first's chosen one ("" when it has)."""
    if attention not in second.attentions:
        return f"The second trace has no {first.attention_label(attention).lower()} (it is {second.kind})."
    if layer not in second.layers(attention):
        return f"The second trace has {len(second.layers(attention))} layers: it has no layer {layer + 1}."
    theirs, ours = second.block(attention, layer).n_heads, first.block(attention, layer).n_heads
    if theirs != ours:
        return f"Layer {layer + 1} has {ours} heads in the first trace and {theirs} in the second: pick traces alike."
    return ""


def _outputs(col, ctx: Analysed | TracedAnalysis, name: str) -> None:
    """What the model wrote (a translator) or guessed next (a language model), under its heatmap."""
    analysis = ctx.analysis
    if analysis.output_text is not None:
        col.markdown(f"**Output ({name})**")
        col.code(analysis.output_text or "(empty)", language=None, wrap_lines=True)
    elif analysis.predictions:
        col.markdown(f"**Next token after the {name} text**")
        last = len(analysis.target_pieces) - 1
        col.dataframe(charts.predictions_table(ctx, last), hide_index=True, key=f"compare_top_{name}")


def body() -> None:
    st.title("Compare two inputs")
    first = sidebar.chosen(trace=True)
    inputs = "Two trace files" if isinstance(first, TracedAnalysis) else "Two texts that differ in a word or two"
    st.caption(
        f"{inputs} (a minimal pair): the same head of each, and where both have the same number of tokens, the "
        "difference second − first (red: the first attends more, blue: the second)."
    )
    if first is None:
        return
    second = _second_trace(first) if isinstance(first, TracedAnalysis) else _second_text(first)
    if second is None:
        return
    attention, layer, head = head_picker(first.analysis, with_average=True)
    state.sync_url()
    if why := _mismatch(first.analysis, second.analysis, attention, layer):
        st.error(errors.shown(why))
        return
    left, right = st.columns(2)
    for col, ctx, name in ((left, first, "first"), (right, second, "second")):
        fig = thaw(charts.head_chart(ctx, attention, layer, head))
        show_chart(fig, f"compare_{name}", safe_filename("compare", name, ctx.name), where=col)
        _outputs(col, ctx, name)
    a, b = first.analysis.block(attention, layer), second.analysis.block(attention, layer)
    nq, nk = min(len(a.query_pieces), len(b.query_pieces)), min(len(a.key_pieces), len(b.key_pieces))
    title = f"Second − first: {first.analysis.attention_label(attention)}, layer {layer + 1}, {charts.head_name(head)}"
    if not (aligned(a.query_pieces, b.query_pieces) and aligned(a.key_pieces, b.key_pieces)):
        st.caption(
            f"The texts have different token counts ({len(a.query_pieces)} × {len(a.key_pieces)} and "
            f"{len(b.query_pieces)} × {len(b.key_pieces)}): the difference covers the positions both have, queries "
            f"1–{nq} and keys 1–{nk}, matched by position."
        )
        title += f" (queries 1–{nq}, keys 1–{nk})"
    weights = [charts.head_weights(x, head)[:nq, :nk] for x in (a, b)]
    queries, keys = (a.query_pieces[:nq], b.query_pieces[:nq]), (a.key_pieces[:nk], b.key_pieces[:nk])
    diff = difference_heatmap(*weights, queries, keys, title)
    show_chart(diff, "compare_difference", safe_filename("compare-difference", first.name))


errors.guarded(body)
