"""What each part of a model writes toward one prediction (analysis.attribution), drawn: the heads as a layer ×
head heatmap per attention type, the other parts as bars, and the logit lens as a layer × position grid of each
layer's top guess. Layers, heads and positions count from 1."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz.labels import escape
from viz.style import AT_FIRST, COLORSCALE, DIVERGING, FIRST, finish_layout, token_axis, unvalidated, wrap_title
from viz.tables import heads_frame

GAP = 0.08  # between two attention types' heatmaps, as a share of the width
LEFT_OUT = "padding, start-of-text and unknown tokens left out"  # of the logit lens's guesses


def attribution_title(token: str, position_label: str, versus: str | None) -> str:
    """`‘▁mat’ after 7:▁the` or `‘▁mat’ versus ‘▁hat’ after 7:▁the`: what the figures split."""
    what = f"‘{token}’" if versus is None else f"‘{token}’ versus ‘{versus}’"
    return f"What each head writes toward {what} after {position_label}"


def heads_heatmap(
    heads: dict[str, np.ndarray], labels: dict[str, str], title: str, value: str = "logit", signed: bool = True
) -> go.Figure:
    """attention type → (L, H) one number per head, as heatmaps side by side (a translator's self- and
    cross-attention): one row per layer, one column per head. `signed` (direct contributions): blue for a push
    toward the token, red against it, one colour scale centred on 0 for all; else (scores from 0 to 1) the fixed
    0–1 cividis scale. `value` names the colour bar."""
    if not heads:
        raise ValueError("no attention heads to draw")
    top = max(float(np.abs(h).max()) for h in heads.values()) or 1.0
    scale = {"zmin": -top, "zmax": top, "zmid": 0.0, "colorscale": DIVERGING} if signed else {}
    scale = scale or {"zmin": 0.0, "zmax": 1.0, "colorscale": COLORSCALE}
    width = (1.0 - GAP * (len(heads) - 1)) / len(heads)
    data: list[dict[str, Any]] = []
    layout: dict[str, Any] = {}
    for i, (attention, matrix) in enumerate(heads.items()):
        layers, n_heads = matrix.shape
        suffix = "" if i == 0 else str(i + 1)
        show_numbers = layers * n_heads <= 16 * 12
        series = {"type": "heatmap", "z": matrix.tolist(), **AT_FIRST, "xaxis": f"x{suffix}", "yaxis": f"y{suffix}"}
        series |= scale
        number = "%{z:+.3f}" if signed else "%{z:.3f}"
        series["hovertemplate"] = (
            f"{escape(labels.get(attention, attention))}<br>layer %{{y}} · head %{{x}}: {number}<extra></extra>"
        )
        series["colorbar"] = {"title": {"text": value}, "thickness": 12}
        series["showscale"] = i == len(heads) - 1
        if show_numbers:
            series |= {"texttemplate": "%{z:.2f}", "textfont": {"size": 11}}
        data.append(series)
        start = i * (width + GAP)
        layout[f"xaxis{suffix}"] = {
            "domain": [start, start + width],
            # the attention's name under its own panel, wrapped so that two panels' names never meet, a phone's
            # 95 px panels too ("self-attention" is the longest word)
            "title": {"text": "<br>".join(["head", *map(escape, wrap_title(labels.get(attention, attention), 14))])},
            "dtick": 1 if n_heads <= 16 else None,
            "showgrid": False,
        }
        layout[f"yaxis{suffix}"] = {
            "title": {"text": "layer"} if i == 0 else None,
            # the layers' numbers once, on the left, where every panel has the same layers: a later panel's would
            # print over its left neighbour's last column on a phone
            "showticklabels": i == 0 or layers != next(iter(heads.values())).shape[0],
            "autorange": "reversed",
            "dtick": 1 if layers <= 32 else None,
            "anchor": f"x{suffix}",
            "showgrid": False,
        }
    rows = max(h.shape[0] for h in heads.values())
    layout |= finish_layout(title, height=min(900, max(300, 34 * rows + 170)))
    return unvalidated(data, layout)


def parts_bars(parts: Sequence[tuple[str, float]], logit: float, title: str) -> go.Figure:
    """(name, value) of every part that is not a single head (embeddings, positions, each layer's heads together
    and its feed-forward, biases), as horizontal bars in model order, top to bottom; the sum and the model's own
    logit in the title's last line."""
    names = [escape(n) for n, _ in parts]
    values = [v for _, v in parts]
    colours = ["#2166ac" if v >= 0 else "#b2182b" for v in values]  # DIVERGING's ends: toward / against
    bar = {"type": "bar", "orientation": "h", "x": values, "y": names, "marker": {"color": colours}}
    bar["hovertemplate"] = "%{y}: %{x:+.3f}<extra></extra>"
    full = f"{title}. The parts sum to {sum(values):+.3f}; the model's logit is {logit:+.3f}"
    layout = {
        "xaxis": {"title": {"text": "contribution to the logit"}, "zeroline": True, "zerolinewidth": 2},
        "yaxis": {"autorange": "reversed", "type": "category"},
        **finish_layout(full, height=min(900, 24 * len(parts) + 150)),
    }
    return unvalidated([bar], layout)


def lens_rows(rows: int) -> list[str]:
    """The logit lens's rows, bottom to top: the stream after the embeddings, then after layer 1, 2, …"""
    return ["embeddings"] + [f"layer {i}" for i in range(1, rows)]


def lens_heatmap(
    top_pieces: Sequence[Sequence[str]], prob: np.ndarray, position_labels: list[str], title: str
) -> go.Figure:
    """The logit lens: rows the stream after the embeddings and after each layer (the last at the top), columns the
    positions; each cell the top guess (its piece written in it when the grid is small enough to read) coloured by
    its probability on a fixed 0–1 scale. The title ends on what the guesses leave out, as
    analysis.attribution.logit_lens does: padding, the start of text, the unknown token."""
    rows, positions = prob.shape
    row_names = lens_rows(rows)
    pieces = [[escape(p) for p in row] for row in top_pieces]
    heatmap: dict[str, Any] = {"type": "heatmap", "z": prob.tolist(), "x0": FIRST, "y": row_names}
    heatmap |= {"zmin": 0.0, "zmax": 1.0, "colorscale": COLORSCALE, "text": pieces}
    heatmap["colorbar"] = {"title": {"text": "p"}, "thickness": 12}
    ticks = [escape(label) for label in position_labels]  # Plotly reads "<s>" as a tag
    heatmap["customdata"] = [ticks for _ in range(rows)]
    heatmap["hovertemplate"] = "after %{customdata} · %{y}: %{text} (p = %{z:.3f})<extra></extra>"
    if positions <= 24:
        heatmap |= {"texttemplate": "%{text}", "textfont": {"size": 11}}
    layout = {
        "xaxis": {**token_axis(ticks), "title": {"text": "after the token"}, "tickangle": -45},
        "yaxis": {"type": "category", "title": None},
        **finish_layout(f"{title} ({LEFT_OUT})", height=min(900, 30 * rows + 190)),
    }
    return unvalidated([heatmap], layout)


def other_parts(
    heads: dict[str, np.ndarray],
    feed_forward: np.ndarray,
    embeddings: float,
    positions: float | None,
    biases: float,
    labels: dict[str, str],
) -> list[tuple[str, float]]:
    """Every part as a bar, in model order: the token embeddings, the positions (None: a model whose positions turn
    queries and keys instead of entering the stream), then per layer its heads together (per attention type) and
    its feed-forward, and the biases last. They sum to the logit."""
    parts = [("token embeddings", embeddings)]
    if positions is not None:
        parts.append(("positions", positions))
    for layer in range(len(feed_forward)):
        for attention, matrix in heads.items():
            parts.append(
                (f"layer {layer + 1} · {labels.get(attention, attention)}, all heads", float(matrix[layer].sum()))
            )
        parts.append((f"layer {layer + 1} · feed-forward", float(feed_forward[layer])))
    parts.append(("biases (norms, attention outputs, output layer)", biases))
    return parts


def parts_frame(
    heads: dict[str, np.ndarray],
    feed_forward: np.ndarray,
    embeddings: float,
    positions: float | None,
    biases: float,
    labels: dict[str, str],
) -> pd.DataFrame:
    """Every part's direct contribution, one row each: part, attention, layer and head (from 1; empty where the
    part has none), contribution. The heads first, the largest push first (`heads_frame`), then each layer's
    feed-forward, the token embeddings, the positions (None: a model whose positions enter no stream, no row) and
    the biases. They sum to the logit; `other_parts` adds the same heads up per layer for the bars."""
    columns = ["part", "attention", "layer", "head", "contribution"]
    rows = heads_frame(heads, labels, "contribution").assign(part="head")[columns]
    rest = [("feed-forward", None, layer + 1, None, float(v)) for layer, v in enumerate(feed_forward)]
    rest.append(("embeddings", None, None, None, embeddings))
    if positions is not None:
        rest.append(("positions", None, None, None, positions))
    rest.append(("biases", None, None, None, biases))
    table = pd.concat([rows, pd.DataFrame(rest, columns=columns)], ignore_index=True)
    table[["layer", "head"]] = table[["layer", "head"]].astype("Int64")
    return table


def lens_frame(top_pieces: Sequence[Sequence[str]], prob: np.ndarray, position_labels: list[str]) -> pd.DataFrame:
    """The logit lens's grid as a table, one row per cell, the embeddings' row first: after ("embeddings",
    "layer 1", … as the grid's rows), layer (from 1; empty for the embeddings), position (from 1), token (its
    `i:piece` label), the top guess and its probability."""
    rows, positions = prob.shape
    names = lens_rows(rows)
    cells = [
        (names[r], r or None, t + 1, position_labels[t], top_pieces[r][t], float(prob[r, t]))
        for r in range(rows)
        for t in range(positions)
    ]
    frame = pd.DataFrame(cells, columns=["after", "layer", "position", "token", "top guess", "probability"])
    frame["layer"] = frame["layer"].astype("Int64")
    return frame
