"""Which input tokens one prediction rests on (analysis.token_attribution), drawn: one row per method, one column
per input token (a translator's source first, then the decoder's input), each row coloured against its own largest
|value| (the methods' numbers are on different scales: a logit's share, a gradient's length, a share of
attention), the numbers themselves in the cells and the hover. Tokens count from 1 within their stack."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz.labels import escape, plotly_labels
from viz.style import DIVERGING, finish_layout, unvalidated

STACK_NAMES = {"encoder": "source", "decoder": "input"}
MOST_NUMBERS = 24  # tokens whose numbers are written in the cells; more and the cells get too narrow to read


def token_labels_by_stack(pieces: Sequence[str], stacks: Sequence[str]) -> list[str]:
    """`source 3:▁cat` / `input 2:▁The` for a translator, `2:▁The` for a one-stack model: each token's place from
    1 within its stack, HTML-escaped."""
    two = len(set(stacks)) > 1
    seen: dict[str, int] = {}
    labels = []
    for piece, stack in zip(plotly_labels(pieces), stacks, strict=True):
        seen[stack] = seen.get(stack, 0) + 1
        labels.append(f"{STACK_NAMES[stack] + ' ' if two else ''}{seen[stack]}:{piece}")
    return labels


def token_attribution_frame(
    pieces: Sequence[str], stacks: Sequence[str], scores: dict[str, np.ndarray]
) -> pd.DataFrame:
    """One row per input token: its stack ("source" or "input"), its place in it (from 1), the token, and a column
    per method."""
    places, seen = [], {}
    for stack in stacks:
        seen[stack] = seen.get(stack, 0) + 1
        places.append(seen[stack])
    frame = pd.DataFrame(
        {"stack": [STACK_NAMES[s] for s in stacks], "position": places, "token": list(pieces)}
        | {method: np.asarray(values, dtype=float) for method, values in scores.items()}
    )
    return frame


def token_attribution_heatmap(
    pieces: Sequence[str], stacks: Sequence[str], scores: dict[str, np.ndarray], title: str
) -> go.Figure:
    """Methods × input tokens, each row scaled to its own largest |value| on one diverging scale centred on 0 (blue
    toward the prediction, red against it; saliency, rollout and flow are never negative)."""
    if not scores:
        raise ValueError("no attributions to draw")
    methods = list(scores)
    raw = np.array([np.asarray(scores[m], dtype=float) for m in methods])  # (M, n)
    top = np.abs(raw).max(axis=1, keepdims=True)
    scaled = raw / np.where(top > 0, top, 1.0)
    labels = token_labels_by_stack(pieces, stacks)
    series = {
        "type": "heatmap",
        "z": scaled.tolist(),
        "customdata": raw.tolist(),
        "x": list(range(1, len(labels) + 1)),
        "y": [escape(m) for m in methods],
        "zmin": -1.0,
        "zmax": 1.0,
        "zmid": 0.0,
        "colorscale": DIVERGING,
        "colorbar": {"title": {"text": "share of<br>the row's<br>largest"}, "thickness": 12},
        "hovertemplate": "%{y} · %{text}: %{customdata:.4g}<extra></extra>",
        "text": [labels] * len(methods),
    }
    if len(labels) <= MOST_NUMBERS:
        series["texttemplate"] = "%{customdata:.2f}"
        series["textfont"] = {"size": 11}
    layout = {
        "xaxis": {
            "tickmode": "array",
            "tickvals": list(range(1, len(labels) + 1)),
            "ticktext": labels,
            "showgrid": False,
            "tickangle": -45 if len(labels) > 8 else 0,
        },
        "yaxis": {"autorange": "reversed", "showgrid": False},
    } | finish_layout(title, height=max(300, 46 * len(methods) + 230))
    return unvalidated([series], layout)
