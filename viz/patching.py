"""Activation patching (analysis.patching), drawn: a layer × head or layer × position grid of how much of the
clean answer each patch restores (0: none, 1: all), and the same as a table. Layers, heads and positions count
from 1."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz.labels import escape
from viz.style import AT_FIRST, DIVERGING, finish_layout, token_axis, unvalidated

WHAT_LABELS = {
    "heads": "each head's output, at every position",
    "residual": "the stream entering each layer, at one position",
}


def pair_labels(clean: Sequence[str], corrupted: Sequence[str]) -> list[str]:
    """`3:▁cat`, or `3:▁cat/▁dog` where the texts differ: the positions of a pair, from 1 (plain text)."""
    return [f"{i + 1}:{a}" if a == b else f"{i + 1}:{a}/{b}" for i, (a, b) in enumerate(zip(clean, corrupted))]


def patching_title(what: str, answer: str, versus: str, approximate: bool) -> str:
    """What the grid shows, and how it was measured."""
    how = "Attribution patching (approximate)" if approximate else "Activation patching"
    where = "each head" if what == "heads" else "each layer and position"
    return f"{how}: how much of ‘{answer}’ − ‘{versus}’ {where} restores"


def patching_heatmap(
    scores: np.ndarray, what: str, positions: list[str], title: str, rows: list[str] | None = None
) -> go.Figure:
    """(L, H) or (L, T) normalised results as a heatmap: one row per layer; blue where a patch restores the clean
    answer (1: all of it), red where it moves the other way, white where it changes nothing. `positions`: the
    pair's labels (`pair_labels`), for the stream's columns. `rows`: each row's label (a translator's rows are
    the layers of both stacks), else the layer from 1; NaN cells are left blank."""
    layers, across = scores.shape
    top = max(1.0, float(np.nanmax(np.abs(scores)))) if scores.size and not np.isnan(scores).all() else 1.0
    z = [[None if np.isnan(v) else float(v) for v in row] for row in scores]  # NaN: no such cell (blank)
    heatmap: dict[str, Any] = {"type": "heatmap", "z": z, **AT_FIRST}
    heatmap |= {"zmin": -top, "zmax": top, "zmid": 0.0, "colorscale": DIVERGING}
    heatmap["colorbar"] = {"title": {"text": "restored"}, "thickness": 12}
    if what == "heads":
        heatmap["hovertemplate"] = "layer %{y} · head %{x}: %{z:.3f}<extra></extra>"
        xaxis: dict[str, Any] = {"title": {"text": "head"}, "dtick": 1 if across <= 16 else None}
    else:
        ticks = [escape(p) for p in positions]
        heatmap["customdata"] = [ticks for _ in range(layers)]
        heatmap["hovertemplate"] = "entering layer %{y}, at %{customdata}: %{z:.3f}<extra></extra>"
        xaxis = {**token_axis(ticks), "title": {"text": "position (first text/second where they differ)"}}
        xaxis["tickangle"] = -45
    if layers * across <= 16 * 12:
        heatmap |= {"texttemplate": "%{z:.2f}", "textfont": {"size": 11}}
    layout = {
        "xaxis": {**xaxis, "showgrid": False},
        "yaxis": {"title": {"text": "layer"}, "autorange": "reversed", "dtick": 1 if layers <= 32 else None}
        if rows is None
        else {"autorange": "reversed", "tickvals": list(range(layers)), "ticktext": [escape(r) for r in rows]},
        **finish_layout(title, height=min(900, max(300, 34 * layers + 190))),
    }
    return unvalidated([heatmap], layout)


def patching_frame(scores: np.ndarray, what: str, positions: list[str]) -> pd.DataFrame:
    """One row per patch: layer and head (or position, with its label), from 1, and the share restored, the largest
    first."""
    rows = []
    for layer in range(scores.shape[0]):
        for i in range(scores.shape[1]):
            place = {"head": i + 1} if what == "heads" else {"position": i + 1, "token": positions[i]}
            rows.append({"layer": layer + 1, **place, "restored": float(scores[layer, i])})
    frame = pd.DataFrame(rows)
    return frame.sort_values("restored", ascending=False, kind="stable").reset_index(drop=True)
