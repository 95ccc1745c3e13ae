"""Explore: one head beside the model's predictions, then the grid of every head."""

from __future__ import annotations

from functools import partial

import streamlit as st

import ui
from viz.data import TraceData
from viz.heads import average_heads, grid_pick, head_frame, head_heatmap, heads_grid
from viz.labels import safe_filename
from viz.style import chart_config
from viz.tables import generation_frame, position_labels, top_k_frame

PROB = st.column_config.ProgressColumn("probability", min_value=0.0, max_value=1.0, format="%.3f")


def _on_grid_select(n_heads: int) -> None:
    pick = grid_pick(st.session_state["grid"]["selection"], n_heads)
    if pick is not None:
        st.session_state["layer"], st.session_state["head"] = pick


def predictions(trace: TraceData) -> None:
    """LM: top-k after the chosen position (default: the last); encoder-decoder: output and top-k per step."""
    if trace.kind == "decoder-only":
        labels = position_labels(trace)
        positions = list(range(len(labels)))
        if st.session_state.get("position") not in positions:
            st.session_state["position"] = positions[-1]
        pos = st.selectbox("Next token after", positions, key="position", format_func=lambda i: labels[i])
        st.dataframe(top_k_frame(trace, pos), hide_index=True, column_config={"probability": PROB}, key="topk")
    else:
        st.markdown("**Model output**")
        st.code(trace.output_text or "(empty)", language=None, wrap_lines=True)
        st.dataframe(generation_frame(trace), hide_index=True, key="steps_topk")


@st.fragment
@ui.safe
def heads_view(trace: TraceData, model: str) -> None:
    """Everything that changes with the attention type, layer and head: reruns alone, never the model."""
    group, layer, head = ui.head_picker(trace, with_average=True)
    ui.sync_url()  # first: the address bar follows the choice before the charts are drawn
    block = trace.block(group, layer)
    weights = average_heads(block.weights) if head == ui.AVERAGE else block.weights[head]
    head_name = "average of heads" if head == ui.AVERAGE else f"head {head + 1}"
    title = f"{trace.group_label(group)}, layer {layer + 1}, {head_name}"
    name = safe_filename("attention", model, group, f"L{layer}", "avg" if head == ui.AVERAGE else f"H{head}")
    left, right = st.columns([3, 2])
    with left:
        fig = head_heatmap(weights, block.query_pieces, block.key_pieces, title)
        st.plotly_chart(fig, key="head_chart", config=chart_config(name))
        csv = lambda: head_frame(weights, block.query_pieces, block.key_pieces).to_csv()  # built on click
        st.download_button("CSV of this head", csv, f"{name}.csv", "text/csv", key="dl_csv", on_click="ignore")
    with right:
        st.subheader("Predictions")
        predictions(trace)
    st.subheader("All heads")
    st.caption("Every head of this attention type: rows are layers, columns heads. Click a tile to open it.")
    selected = None if head == ui.AVERAGE else (layer, head)
    stacked = trace.stacked(group)
    grid = heads_grid(stacked, f"{trace.group_label(group)}: every head", selected)
    st.plotly_chart(
        grid,
        key="grid",
        on_select=partial(_on_grid_select, stacked.shape[1]),
        selection_mode="points",
        config=chart_config(safe_filename("heads", model, group)),
    )


def body() -> None:
    st.title("Explore")
    chosen = ui.context_and_trace()
    if chosen is None:
        return
    ctx, trace = chosen
    heads_view(trace, ctx.entry.name)
    st.subheader("Export and share")
    st.caption("The address bar keeps the model, text, layer and head: copy it to share this view.")
    cols = st.columns(2)
    for col, fmt, mime in ((cols[0], "json", "application/json"), (cols[1], "npz", "application/octet-stream")):
        data = partial(ui.export_bytes, ctx.path, ctx.stamp, ctx.text, fmt)
        file_name = f"{safe_filename('trace', ctx.entry.name)}.{fmt}"
        label = f"Whole trace as {fmt.upper()}"
        col.download_button(label, data, file_name, mime, key=f"dl_{fmt}", on_click="ignore")


ui.guarded(body)
