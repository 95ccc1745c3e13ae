"""Trace file: a trace this app exported, or `atlas.save` wrote from attention computed anywhere (a GPU box, a
Hugging Face model, a TransformerLens cache), opened and drawn with the views that need only attention."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from atlas import api
from inference.analysis import Analysis
from inference.imported import TraceError, read_trace
from ui import errors, state
from ui.widgets import show_chart, small_table
from viz.labels import safe_filename

UPLOAD = "trace_upload"
TRACE_ATTENTION = state.session_key("trace_attention")
TRACE_LAYER = state.session_key("trace_layer")
TRACE_HEAD = state.session_key("trace_head")
READ = "_trace_read"  # session: (the upload's file id, its Analysis or its TraceError) — one trace per session
# Streamlit refuses a larger upload itself (its own message); .streamlit/config.toml's server.maxUploadSize is the
# same number for the whole server. A 256-token trace of lm-english is 12.1 MB as .npz, 51.0 MB as JSON
# (inference.export of analyze(lm-english, a 256-token text)).
MAX_UPLOAD_MB = 100
NEEDS_MODEL = (
    "Generate, Attention math, Positional encoding, Head ablation, Training steps and the Lesson run the model "
    "itself: a trace holds its attention, not its weights. Pick a model in the sidebar for those."
)


def read(upload) -> Analysis | TraceError:
    """The upload's Analysis, parsed once per file: the session keeps the last one only (a new file replaces it)."""
    kept = st.session_state.get(READ)
    if kept is not None and kept[0] == upload.file_id:
        return kept[1]
    try:
        result: Analysis | TraceError = read_trace(upload.getvalue(), upload.name)
    except TraceError as exc:
        result = exc
    st.session_state[READ] = (upload.file_id, result)
    return result


def views(analysis: Analysis, name: str) -> None:
    attentions = analysis.attentions
    opening = "decoder.cross_attn" if "decoder.cross_attn" in attentions else attentions[0]  # as Explore opens
    state.keep_valid(TRACE_ATTENTION, attentions, opening)
    attention = st.radio(
        "Attention", attentions, key=TRACE_ATTENTION, format_func=analysis.attention_label, horizontal=True
    )
    layers = [layer + 1 for layer in analysis.layers(attention)]
    n_heads = analysis.block(attention, layers[0] - 1).n_heads
    left, right = st.columns(2)
    state.keep_valid(TRACE_LAYER, layers, layers[0])
    layer = left.selectbox("Layer", layers, key=TRACE_LAYER, format_func=lambda n: f"layer {n}")
    state.keep_valid(TRACE_HEAD, list(range(1, n_heads + 1)), 1)
    head = right.selectbox("Head", list(range(1, n_heads + 1)), key=TRACE_HEAD, format_func=lambda n: f"head {n}")
    base = safe_filename("trace", name, attention, f"L{layer}", f"H{head}")
    tabs = st.tabs(["One head", "All heads", "Paper view", "Rollout", "Mask", "Head statistics"])
    show_chart(api.head(analysis, layer, head, attention), "trace_chart_head", base, where=tabs[0])
    show_chart(api.heads(analysis, attention), "trace_chart_heads", f"{base}-all", where=tabs[1])
    show_chart(api.paper(analysis, layer, head, attention), "trace_chart_paper", f"{base}-paper", where=tabs[2])
    show_chart(api.rollout(analysis, layer, attention), "trace_chart_rollout", f"{base}-rollout", where=tabs[3])
    show_chart(api.mask(analysis, attention), "trace_chart_mask", f"{base}-mask", where=tabs[4])
    tabs[5].dataframe(api.head_stats(analysis), hide_index=True, key="trace_stats")


def body() -> None:
    st.title("Open a trace file")
    st.caption(
        "A trace this app exported (Explore's “Whole analysis as JSON / NPZ”, `python -m atlas trace`), or one "
        "`atlas.save` wrote in a notebook from a Hugging Face model, a TransformerLens cache or plain arrays: "
        "attention computed anywhere, drawn here. The file is checked as a checkpoint is (shapes against the "
        "tokens, finite weights, each row summing to 1) and stays in this session only."
    )
    upload = st.file_uploader(
        "Trace file (.json or .npz)", type=["json", "npz"], key=UPLOAD, max_upload_size=MAX_UPLOAD_MB
    )
    if upload is None:
        st.session_state.pop(READ, None)  # the file was removed: its analysis goes with it
        st.info("No trace opened yet: choose a .json or .npz file above.")
        return
    found = read(upload)
    if isinstance(found, TraceError):
        st.error(f"This file cannot be opened: {found}")
        return
    first = next(iter(found.blocks.values()))
    rows = [
        ("file", upload.name),
        ("from", found.checkpoint),
        ("kind", found.kind),
        ("tokens", str(len(first.query_pieces))),
        ("layers × heads", f"{len(found.layers(first.attention))} × {found.n_heads}"),
    ]
    small_table(pd.DataFrame(rows, columns=["trace", "value"]), row_header="trace")
    views(found, upload.name)
    st.caption(NEEDS_MODEL)


errors.guarded(body)
