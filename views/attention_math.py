"""Attention math: one head and one query, from raw scores to the weighted sum of the values."""

from __future__ import annotations

import streamlit as st

from ui import cache, errors, sidebar, state, widgets
from ui.widgets import QUERY, head_picker, show_chart, token_picker
from viz.labels import indexed_labels, safe_filename
from viz.steps import (
    FORMULA,
    WINDOW,
    attention_steps,
    key_window,
    opening_query,
    output_figure,
    steps_figure,
    steps_latex,
    steps_table,
    weights_overview,
    window_note,
)

FIRST_KEY = state.url_key("steps_first_key", int, url="first_key")  # the first key of the window shown, from 1


@state.fragment
@errors.safe
def steps_view(source: cache.Source) -> None:
    ctx = cache.redrawn(source)  # the fragment holds its analysis weakly (cache.held)
    analysis, model = ctx.analysis, ctx.entry.name
    attention, layer, head = head_picker(analysis, with_average=False)
    block = analysis.block(attention, layer)
    labels = indexed_labels(block.query_pieces)
    query = token_picker("Query token", QUERY, labels, analysis, start=opening_query(block.mask))
    state.sync_url()  # first: the address bar follows the choice before the charts are drawn
    steps = attention_steps(block, head, query, cache.head_detail(ctx, block.name, head))
    st.latex(steps_latex(steps))
    name = safe_filename("steps", model, attention, f"L{layer + 1}", f"H{head + 1}", f"q{query + 1}")  # as labelled
    n_keys = len(block.key_pieces)
    window = key_window(steps)  # all keys when they fit, else the window around the largest weight
    if n_keys > WINDOW:
        # Kept and linked; back to the window around the largest weight when the head, query or text changes.
        owner = (analysis.checkpoint, analysis.text, block.name, head, query)
        state.keep_valid(FIRST_KEY, state.Between(1, n_keys - WINDOW + 1), window.start + 1, owner=owner)
        first = st.slider("First key shown", 1, n_keys - WINDOW + 1, key=FIRST_KEY)
        window = key_window(steps, first - 1)
        overview = weights_overview(steps, window)
        show_chart(overview, "steps_overview", f"{name}-overview")
        st.caption(window_note(window, n_keys))
    show_chart(steps_figure(steps, window), "steps_chart", name)
    show_chart(output_figure(steps), "output_chart", f"{name}-output")
    with st.expander("The numbers", expanded=len(labels) <= 16):
        st.dataframe(steps_table(steps, window), hide_index=True, key="steps_table")


def body() -> None:
    st.title("Attention math")
    st.latex(FORMULA)
    # On a projector the steps in words fold away, so that the figure is in the first view.
    where = st.expander("The five steps in words") if widgets.projector() else st.container()
    where.caption(
        "For one head and one query token: 1. the raw scores q·kⱼ/√dₖ, 2. the mask sets forbidden keys to −∞, "
        "3. softmax turns the row into weights that sum to 1, 4. each value vector vⱼ is scaled by its weight, "
        "5. their sum is the head's output for this token."
    )
    ctx = sidebar.chosen()
    if ctx is not None:
        steps_view(cache.held(ctx))


errors.guarded(body)
