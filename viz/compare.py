"""Two inputs, one head: the difference of their attention where the token axes align."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.arrays import check_attention
from viz.labels import token_labels
from viz.style import DIVERGING, category_axis, category_hover, finish_layout, unvalidated


def aligned(first: Sequence[str], second: Sequence[str]) -> bool:
    """Whether two token axes can be compared position by position: the same number of tokens."""
    return len(first) == len(second)


def merged_labels(first: Sequence[str], second: Sequence[str]) -> list[str]:
    """One axis for two aligned token lists (viz.labels.token_labels): `2:▁cat` where both agree, `2:▁cat / ▁dog`
    where they differ."""
    a, b = token_labels(first), token_labels(second)
    if len(a) != len(b):
        raise ValueError(f"token axes of {len(a)} and {len(b)} tokens do not align")
    return [x if p == q else f"{x} / {y.partition(':')[2]}" for x, y, p, q in zip(a, b, first, second)]


def difference_heatmap(
    first: np.ndarray,
    second: np.ndarray,
    queries: tuple[Sequence[str], Sequence[str]],
    keys: tuple[Sequence[str], Sequence[str]],
    title: str,
) -> go.Figure:
    """`second − first` of one head's (Tq, Tk) weights for two inputs with aligned axes, on a diverging scale
    from −1 (only the first attends there) to +1 (only the second does); 0 is white. Axes of the merged labels
    (viz.style.category_axis): every cell's hover names both positions and pieces."""
    a = check_attention(first, queries[0], keys[0])
    b = check_attention(second, queries[1], keys[1])
    if a.shape != b.shape:
        raise ValueError(f"the two inputs' heads have shapes {a.shape} and {b.shape}: their tokens do not align")
    q, k = merged_labels(*queries), merged_labels(*keys)
    heatmap = {
        "type": "heatmap",
        "z": (b - a).astype(np.float32),
        "x": k,
        "y": q,
        "zmin": -1.0,
        "zmid": 0.0,
        "zmax": 1.0,
        "colorscale": DIVERGING,
        "colorbar": {"title": {"text": "second − first"}, "thickness": 12},
        "hovertemplate": category_hover() + ": %{z:+.3f}<extra></extra>",
    }
    layout = {
        "xaxis": {"title": {"text": "key (attended to)"}, "tickangle": -60, **category_axis(k)},
        "yaxis": {"title": {"text": "query (attending)"}, "autorange": "reversed", **category_axis(q)},
        **finish_layout(title, height=min(900, max(360, 22 * len(q) + 160))),
    }
    return unvalidated([heatmap], layout)
