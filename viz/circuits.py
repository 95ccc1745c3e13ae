"""How heads compose (analysis.circuits), drawn: one heatmap per kind of composition, earlier heads as rows and
later heads as columns, and the same scores as a table, layers and heads counted from 1."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz.style import AT_FIRST, COLORSCALE, finish_layout, unvalidated

MODE_TITLES = {
    "Q": "Q-composition: the queries of later heads read what earlier heads wrote",
    "K": "K-composition: the keys of later heads read what earlier heads wrote",
    "V": "V-composition: the values of later heads read what earlier heads wrote",
}


def head_labels(n_layers: int, n_heads: int) -> list[str]:
    """ "L1 H1", "L1 H2", …: every head of a stack in layer order, counted from 1."""
    return [f"L{layer + 1} H{head + 1}" for layer in range(n_layers) for head in range(n_heads)]


def composition_heatmap(scores: np.ndarray, mode: str) -> go.Figure:
    """(L, H, L, H) scores of one mode ([earlier layer, head, later layer, head], NaN where the later layer is not
    after the earlier one) as a heatmap: a row per head that writes (all but the last layer's), a column per head
    that reads (all but the first layer's); blank cells pair heads that cannot compose."""
    layers, heads = scores.shape[0], scores.shape[1]
    if scores.shape != (layers, heads, layers, heads):
        raise ValueError(f"expected (layers, heads, layers, heads) scores, got shape {scores.shape}")
    if layers < 2:
        raise ValueError("heads compose across layers: a model of one layer has no pair to score")
    labels = head_labels(layers, heads)
    matrix = scores.reshape(layers * heads, layers * heads)[: (layers - 1) * heads, heads:]
    rows, cols = labels[: (layers - 1) * heads], labels[heads:]
    top = float(np.nanmax(matrix)) if np.isfinite(matrix).any() else 1.0
    z = np.where(np.isfinite(matrix), matrix, None)
    heatmap: dict[str, Any] = {"z": z.tolist(), "x": cols, "y": rows, "zmin": 0.0, "zmax": top, **AT_FIRST}
    heatmap |= {"colorscale": COLORSCALE, "colorbar": {"title": {"text": "score"}, "thickness": 12}}
    heatmap["hovertemplate"] = "%{y} → %{x}: %{z:.3f}<extra></extra>"
    layout = {
        "xaxis": {"title": {"text": "later head (reads)"}, "tickangle": -60, "type": "category"},
        "yaxis": {"title": {"text": "earlier head (writes)"}, "autorange": "reversed", "type": "category"},
        **finish_layout(MODE_TITLES[mode], height=min(900, max(360, 16 * len(rows) + 200))),
    }
    return unvalidated([{"type": "heatmap", **heatmap}], layout)


def composition_table(scores: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per pair of heads that can compose: earlier layer and head, later layer and head (from 1), and
    each mode's score, the strongest K-composition first."""
    first = next(iter(scores.values()))
    layers, heads = first.shape[0], first.shape[1]
    rows = []
    for el in range(layers):
        for eh in range(heads):
            for ll in range(el + 1, layers):
                for lh in range(heads):
                    row = {"earlier layer": el + 1, "earlier head": eh + 1, "later layer": ll + 1, "later head": lh + 1}
                    rows.append(row | {mode: float(s[el, eh, ll, lh]) for mode, s in scores.items()})
    table = pd.DataFrame(rows)
    return table.sort_values("K", ascending=False, kind="stable").reset_index(drop=True) if "K" in table else table
