"""Seed 003's experiment as charts: accuracy against layers and heads (ours beside the report's), accuracy
against training time, and the pruning curves with the heads that remain. Drawn from plain numbers (the cards'
figures), never from a model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.heads import heads_grid
from viz.style import MASKED, finish

# One colour per head count, Okabe–Ito (colour-blind safe), and a dash per source: the same head count is the
# same colour in both panels
HEAD_COLOURS = {1: "#0072B2", 8: "#E69F00", 16: "#009E73"}
OTHER_COLOUR = "#CC79A7"
SPECIAL = (("shared_layers", "diamond", "layers shared"), ("shared_embeddings", "x", "in/out embeddings shared"))


def _plain(row: Mapping[str, Any]) -> bool:
    return not row["shared_layers"] and not row["shared_embeddings"]


def _label(heads: int) -> str:
    return "1 head (self-attention)" if heads == 1 else f"{heads} heads"


ACCURACY_SPAN = 0.10  # the least a panel's accuracy axis spans: one point of accuracy is a tenth of its height


def accuracy_range(values: Sequence[float]) -> list[float]:
    """A panel's accuracy axis: its values' spread with a margin, at least ACCURACY_SPAN, inside 0–1, so that a
    difference of 0.01 looks as small as it is instead of filling the panel."""
    low, high = min(values), max(values)
    span = max(ACCURACY_SPAN, 1.2 * (high - low))
    middle = (low + high) / 2
    bottom = min(max(0.0, middle - span / 2), 1.0 - span)
    return [bottom, bottom + span]


def accuracy_chart(rows: Sequence[Mapping[str, Any]], seed_rows: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Test accuracy against layers, one line per head count; left our table, right the report's (other data and
    scale: each panel its own axis). The shared-layers and shared-embeddings rows are single markers.

    `rows`: dicts with layers, heads, shared_layers, shared_embeddings, accuracy; `seed_rows` the same for the
    report's rows at its width (heads 1 for its single-head self-attention)."""
    # Short two-line panel titles: at a phone's 150 px a panel, longer ones print over each other (the page's text
    # says what differs between the two)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Ours<br>(d_model 64)", "The report's<br>(d_model 256)"))
    for col, table in ((1, rows), (2, seed_rows)):
        for heads, colour in HEAD_COLOURS.items():
            line = sorted((r["layers"], r["accuracy"]) for r in table if r["heads"] == heads and _plain(r))
            if not line:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[x for x, _ in line],
                    y=[y for _, y in line],
                    mode="lines+markers",
                    name=_label(heads),
                    legendgroup=str(heads),
                    showlegend=col == 1,
                    line={"color": colour},
                    hovertemplate="%{x} layers: accuracy %{y:.4f}<extra>" + _label(heads) + "</extra>",
                ),
                row=1,
                col=col,
            )
        for key, symbol, name in SPECIAL:
            found = [r for r in table if r[key]]
            if found:
                fig.add_trace(
                    go.Scatter(
                        x=[r["layers"] for r in found],
                        y=[r["accuracy"] for r in found],
                        mode="markers",
                        name=name,
                        legendgroup=key,
                        showlegend=col == 1,
                        marker={"symbol": symbol, "size": 12, "color": OTHER_COLOUR},
                        hovertemplate="%{x} layers: accuracy %{y:.4f}<extra>" + name + "</extra>",
                    ),
                    row=1,
                    col=col,
                )
    fig.update_xaxes(title_text="layers", tickvals=[1, 2, 3], range=[0.7, 3.3])
    fig.update_yaxes(title_text="test accuracy", tickformat=".2f", row=1, col=1)
    fig.update_yaxes(tickformat=".2f", row=1, col=2)  # the same quantity: one title, on the left
    for col, table in ((1, rows), (2, seed_rows)):
        if table:
            fig.update_yaxes(range=accuracy_range([r["accuracy"] for r in table]), row=1, col=col)
    fig.update_layout(legend={"orientation": "h", "y": -0.25, "x": 0})
    fig = finish(fig, "Accuracy against layers and heads", 420)
    fig.update_layout(margin={"t": 90})  # the panels' titles below the chart's, not over it
    fig.update_annotations(yshift=8)
    return fig


def time_chart(rows: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Test accuracy against training seconds, one marker per model of our table, sized by its parameters."""
    fig = go.Figure()
    largest = max((r["parameters"] for r in rows), default=1)
    for heads, colour in HEAD_COLOURS.items():
        found = [r for r in rows if r["heads"] == heads]
        if not found:
            continue
        fig.add_trace(
            go.Scatter(
                x=[r["seconds"] for r in found],
                y=[r["accuracy"] for r in found],
                mode="markers+text",
                text=[r["short"] for r in found],
                textposition="top center",
                name=_label(heads),
                marker={"color": colour, "size": [8 + 12 * r["parameters"] / largest for r in found]},
                customdata=[[r["parameters"]] for r in found],
                hovertemplate="%{text}: %{x:.0f} s, accuracy %{y:.4f}, %{customdata[0]:,} parameters<extra></extra>",
            )
        )  # fmt: skip
    fig.update_xaxes(title_text="training time (seconds, one CPU thread)", rangemode="tozero")
    fig.update_yaxes(title_text="test accuracy", tickformat=".3f")
    fig.update_layout(legend={"orientation": "h", "y": -0.25, "x": 0})
    return finish(fig, "Accuracy against training time (marker size: parameters)", 380)


def pruning_chart(curves: Mapping[str, Sequence[Mapping[str, Any]]], chosen: str, removed: int) -> go.Figure:
    """Test accuracy as heads are removed one at a time, least important first: one line per model, the chosen
    model's point at `removed` ringed."""
    fig = go.Figure()
    colours = ("#D55E00", "#0072B2", "#009E73", "#E69F00")
    for i, (name, points) in enumerate(curves.items()):
        fig.add_trace(
            go.Scatter(
                x=[p["removed"] for p in points],
                y=[p["accuracy"] for p in points],
                mode="lines+markers",
                name=name,
                line={"color": colours[i % len(colours)]},
                hovertemplate="%{x} heads removed: accuracy %{y:.4f}<extra>" + name + "</extra>",
            )
        )
    point = next((p for p in curves.get(chosen, ()) if p["removed"] == removed), None)
    if point is not None:
        fig.add_trace(
            go.Scatter(
                x=[removed],
                y=[point["accuracy"]],
                mode="markers",
                name=f"{chosen}, {removed} removed",
                marker={"size": 18, "color": "rgba(0,0,0,0)", "line": {"width": 3, "color": "#111111"}},
                hoverinfo="skip",
            )
        )
    most = max((p["removed"] for points in curves.values() for p in points), default=1)
    fig.update_xaxes(title_text="heads removed (least important first)", range=[-0.6, most + 0.6])
    fig.update_yaxes(title_text="test accuracy", tickformat=".3f", rangemode="tozero")
    fig.update_layout(legend={"orientation": "h", "y": -0.25, "x": 0})
    return finish(fig, "Heads pruned: how many does the model need?", 400)


def remaining_heads(mean_attention: np.ndarray, removed: Sequence[tuple[int, int]], title: str) -> go.Figure:
    """Every head's attention averaged over the test 5-grams, (layers, heads, 4, 4), as the all-heads grid; the
    removed heads (layer, head) covered in grey."""
    arr = np.asarray(mean_attention, dtype=np.float32)
    fig = heads_grid(arr, title, max_size=arr.shape[-1])
    h, w = arr.shape[-2:]
    for layer, head in removed:
        fig.add_shape(
            type="rect",
            x0=head * w - 0.5,
            x1=head * w + w - 0.5,
            y0=layer * h - 0.5,
            y1=layer * h + h - 0.5,
            fillcolor=MASKED,
            opacity=0.9,
            line={"width": 0},
        )
    return fig
