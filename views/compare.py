"""Compare: a minimal pair of inputs, the same head of both, and their difference where the tokens align."""

from __future__ import annotations

import streamlit as st

from inference.catalog import MINIMAL_PAIRS, WINOGRAD
from inference.text import InputError
from ui import cache, charts, errors, sidebar, state
from ui.widgets import head_picker, show_chart
from viz.compare import aligned, difference_heatmap
from viz.labels import safe_filename
from viz.style import thaw

COMPARE = state.url_key("compare")  # the second text
PAIRED_WITH = state.session_key("compare_paired_with")  # the first text the second was last chosen for


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


def _use_pair() -> None:
    st.session_state[sidebar.TEXT], st.session_state[COMPARE] = WINOGRAD
    st.session_state[PAIRED_WITH] = WINOGRAD[0]


def body() -> None:
    st.title("Compare two inputs")
    st.caption(
        "Two texts that differ in a word or two (a minimal pair): the same head of each, and where both have the "
        "same number of tokens, the difference second − first (red: the first attends more, blue: the second)."
    )
    first = sidebar.chosen()
    if first is None:
        return
    _follow(first.text)
    st.text_input("Second text (the first is the sidebar's)", key=COMPARE, max_chars=2000)
    st.button("Use Winograd's pair", on_click=_use_pair, key="compare_pair", help=f"{WINOGRAD[0]} / …too wide.")
    if st.session_state[COMPARE] == first.text:
        st.caption("Both texts are the same: change a word of the second to see what it changes.")
    try:
        same = st.session_state[COMPARE] == first.text  # one analysis serves both
        second = first if same else cache.analysed(first.with_text(st.session_state[COMPARE]))
    except InputError as exc:
        st.error(f"Second text: {exc}")
        return
    attention, layer, head = head_picker(first.analysis, with_average=True)
    state.sync_url()
    left, right = st.columns(2)
    for col, ctx, name in ((left, first, "first"), (right, second, "second")):
        fig = thaw(charts.head_chart(ctx, attention, layer, head))
        show_chart(fig, f"compare_{name}", safe_filename("compare", name, ctx.entry.name), where=col)
        analysis = ctx.analysis
        if analysis.output_text is not None:
            col.markdown(f"**Output ({name})**")
            col.code(analysis.output_text or "(empty)", language=None, wrap_lines=True)
        else:
            col.markdown(f"**Next token after the {name} text**")
            last = len(analysis.target_pieces) - 1
            col.dataframe(charts.predictions_table(ctx, last), hide_index=True, key=f"compare_top_{name}")
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
    show_chart(diff, "compare_difference", safe_filename("compare-difference", first.entry.name))


errors.guarded(body)
