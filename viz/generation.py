"""Decoding step by step: the attention row of one step, and the key/value cache growing as the decoder writes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.labels import escape, indexed_labels
from viz.style import AXIS_LABELS, HIGHLIGHT, finish_layout, tick_step, unvalidated


def kv_cache_numbers(n_layers: int, d_model: int, positions: int) -> int:
    """Numbers a decoder's self-attention cache holds after `positions` tokens: a key and a value vector of
    d_model (all heads together) per position, per layer."""
    return 2 * n_layers * positions * d_model


def attention_row(
    weights: np.ndarray, key_pieces: Sequence[str], title: str, own: int | None = None, most: int = AXIS_LABELS
) -> go.Figure:
    """One query's attention weights over its keys as bars (keys labelled `i:piece`, counted from 1, at most `most`
    labels: fewer for a chart in a column); the bar of the query's own position (`own`, 0-based) in the highlight
    colour."""
    w = np.asarray(weights, dtype=np.float32)
    if w.ndim != 1 or w.shape[0] != len(key_pieces):
        raise ValueError(f"a row of {w.shape} weights does not match {len(key_pieces)} keys")
    labels = [escape(label) for label in indexed_labels(key_pieces)]  # Plotly renders tags: escaped
    colours = [HIGHLIGHT if i == own else "#35608d" for i in range(len(labels))]  # cividis's blue
    step = tick_step(len(labels), most=most)
    bars = {
        "type": "bar",
        "x": list(range(len(labels))),
        "y": w,
        "marker": {"color": colours},
        "customdata": labels,
        "hovertemplate": "%{customdata}: %{y:.3f}<extra></extra>",
    }
    layout = {
        "xaxis": {
            "tickmode": "array",
            "tickvals": list(range(0, len(labels), step)),
            "ticktext": labels[::step],
            "tickangle": -60,
            "title": {"text": "key (attended to)"},
        },
        "yaxis": {"range": [0, 1], "title": {"text": "weight"}},
        "showlegend": False,
        **finish_layout(title, height=300),
    }
    return unvalidated([bars], layout)


def cache_growth(numbers: Sequence[int], step: int, title: str = "Key/value cache") -> go.Figure:
    """The cache's size after each step (numbers held), the chosen step (1-based) marked."""
    steps = list(range(1, len(numbers) + 1))
    kib = [n * 4 / 1024 for n in numbers]  # float32
    line = {
        "type": "scatter",
        "x": steps,
        "y": kib,
        "mode": "lines+markers",
        "marker": {"color": "#35608d", "size": 5},
        "hovertemplate": "after step %{x}: %{y:.1f} KiB<extra></extra>",
    }
    mark = {
        "type": "scatter",
        "x": [step],
        "y": [kib[step - 1]],
        "mode": "markers",
        "marker": {"color": HIGHLIGHT, "size": 12},
        "hoverinfo": "skip",
    }
    layout = {
        "xaxis": {"title": {"text": "decoding step"}},
        "yaxis": {"title": {"text": "KiB (float32)"}, "rangemode": "tozero"},
        "showlegend": False,
        **finish_layout(title, height=260),
    }
    return unvalidated([line, mark], layout)
