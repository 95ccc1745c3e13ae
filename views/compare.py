"""Compare: a minimal pair of inputs, the same head of both, and their difference where the tokens align."""

from __future__ import annotations

import streamlit as st

from inference.text import InputError
from ui import cache, charts, errors, sidebar, state
from ui.widgets import head_picker, show_chart
from viz.compare import aligned, difference_heatmap
from viz.labels import safe_filename
from viz.style import thaw

PAIRS = {  # the first text of a known minimal pair → its partner
    "The animal didn't cross the street because it was too tired.": (
        "The animal didn't cross the street because it was too wide."
    ),
}
DEFAULT_SECOND = "The animal didn't cross the street because it was too wide."
COMPARE = state.url_key("compare")  # the second text


def _use_pair() -> None:
    first = next(iter(PAIRS))
    st.session_state[sidebar.TEXT], st.session_state[COMPARE] = first, PAIRS[first]


def body() -> None:
    st.title("Compare two inputs")
    st.caption(
        "Two texts that differ in a word or two (a minimal pair): the same head of each, and where both have the "
        "same number of tokens, the difference second − first (red: the first attends more, blue: the second)."
    )
    first = sidebar.chosen()
    if first is None:
        return
    st.session_state.setdefault(COMPARE, PAIRS.get(first.text, DEFAULT_SECOND))
    cols = st.columns([4, 1])
    cols[0].text_input("Second text (the first is the sidebar's)", key=COMPARE, max_chars=2000)
    cols[1].button("Animal / street pair", on_click=_use_pair, key="compare_pair", help="Winograd's minimal pair")
    try:
        second = cache.analysed(first.with_text(st.session_state[COMPARE]))
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
    if not (aligned(a.query_pieces, b.query_pieces) and aligned(a.key_pieces, b.key_pieces)):
        st.info(
            f"The texts have different token counts ({len(a.query_pieces)} × {len(a.key_pieces)} and "
            f"{len(b.query_pieces)} × {len(b.key_pieces)}): their heads are shown side by side, and a difference "
            "needs the same number of tokens."
        )
        return
    weights = [charts.head_weights(x, head) for x in (a, b)]
    title = f"Second − first: {first.analysis.attention_label(attention)}, layer {layer + 1}, {charts.head_name(head)}"
    diff = difference_heatmap(*weights, (a.query_pieces, b.query_pieces), (a.key_pieces, b.key_pieces), title)
    show_chart(diff, "compare_difference", safe_filename("compare-difference", first.entry.name))


errors.guarded(body)
