"""Trace file: a trace this app exported, or `atlas.save` wrote from attention computed anywhere (a GPU box, a
Hugging Face model, a TransformerLens cache), opened and drawn with the views that need only attention."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from analysis.record import Analysis
from atlas import api
from ui import cache, errors, sidebar
from ui.cache import TraceGoneError
from ui.says import figure_says
from ui.widgets import data_table, head_picker, show_chart, small_table, trace_uploader
from viz.labels import safe_filename

UPLOAD = "trace_upload"
# A trace to open without one of your own, written by the README's command on a shipped model:
# python -m atlas trace translate-en-de "The cat sat." -o examples/trace-the-cat-sat.npz
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "trace-the-cat-sat.npz"
NEEDS_MODEL = (
    "Generate, Attention math, Positional encoding, Head ablation, Training steps and the Lesson run the model "
    "itself: a trace holds its attention, not its weights. Turn off “Draw the trace file” in the sidebar for those."
)
ATTENTION_PAGE_LINKS = (
    ("views/explore.py", "Explore"),
    ("views/paper.py", "Paper view"),
    ("views/rollout.py", "Attention rollout"),
    ("views/masks.py", "Masks"),
    ("views/head_stats.py", "Head statistics"),
    ("views/compare.py", "Compare with a second trace"),
)


def views(analysis: Analysis, name: str) -> None:
    """The file's views on one page, with the attention, layer and head every page shares (ui.widgets)."""
    attention, layer, head = head_picker(analysis, with_average=False)
    layer, head = layer + 1, head + 1  # atlas.api counts from 1, as the labels
    base = safe_filename("trace", name, attention, f"L{layer}", f"H{head}")
    tabs = st.tabs(["One head", "All heads", "Paper view", "Rollout", "Mask", "Head statistics"])
    show_chart(api.head(analysis, layer, head, attention), "trace_chart_head", base, where=tabs[0])
    show_chart(api.heads(analysis, attention), "trace_chart_heads", f"{base}-all", where=tabs[1])
    show_chart(api.paper(analysis, layer, head, attention), "trace_chart_paper", f"{base}-paper", where=tabs[2])
    show_chart(api.rollout(analysis, layer, attention), "trace_chart_rollout", f"{base}-rollout", where=tabs[3])
    show_chart(api.mask(analysis, attention), "trace_chart_mask", f"{base}-mask", where=tabs[4])
    data_table(api.head_stats(analysis), tabs[5], hide_index=True, key="trace_stats")


@errors.safe  # a callback: runs outside the page's guard
def _open_example() -> None:
    sidebar.open_trace(cache.open_trace(EXAMPLE.read_bytes(), EXAMPLE.name))


def body() -> None:
    st.title("Open a trace file")
    failed = trace_uploader("Trace file (.json or .npz)", UPLOAD, sidebar.open_trace)
    figure_says(
        "Drop a trace here: Explore's “Whole analysis as JSON” button writes one of the text you are looking at; "
        "open it and every page draws it."
    )
    st.caption(
        "A trace this app exported (Explore's “Whole analysis as JSON / NPZ”, `python -m atlas trace`), or one "
        "`atlas.save` wrote in a notebook from a Hugging Face model, a TransformerLens cache or plain arrays: "
        "attention computed anywhere, drawn here and on the pages below. The file is checked as a checkpoint is "
        "(shapes against the tokens, finite weights, each row summing to 1); the server keeps its attention, not the "
        "file, and only this session draws it."
    )
    st.button(
        "Open an example: the translator on “The cat sat.”",
        key="trace_example",
        on_click=_open_example,
        help='Written by `python -m atlas trace translate-en-de "The cat sat."`',
    )
    if failed:
        st.error(f"This file cannot be opened: {failed}")  # failed: already errors.shown
    trace = st.session_state.get(sidebar.TRACE)
    if trace is None:
        if not failed:
            st.info("No trace opened yet: choose a .json or .npz file above.")
        return
    try:
        analysis = cache.analysed(trace).analysis
    except TraceGoneError as exc:
        sidebar.close_trace()
        st.error(errors.shown(str(exc)))
        return
    small_table(pd.DataFrame(sidebar.trace_summary(trace.name, analysis), columns=["trace", "value"]), None, "trace")
    if st.session_state.get(sidebar.DRAW_TRACE):
        st.markdown("**Drawn on these pages too**, as they draw a model's attention:")
        cols = st.columns(3)
        for i, (path, label) in enumerate(ATTENTION_PAGE_LINKS):
            cols[i % 3].page_link(path, label=label)
    else:
        st.caption("“Draw the trace file” is off in the sidebar: the other pages draw the model.")
    views(analysis, trace.name)
    st.caption(NEEDS_MODEL)


errors.guarded(body)
