"""Training as pictures: the validation-loss curve with the saved snapshots on it, and one head at every snapshot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from viz.arrays import check_attention
from viz.labels import escape, token_labels
from viz.style import COLORSCALE, HIGHLIGHT, category_axis, category_hover, finish_layout, unvalidated
from viz.ticks import GAP_PX, LINE_EM

LINE = "#0072B2"  # Okabe–Ito blue


def loss_curve(
    steps: Sequence[int],
    losses: Sequence[float],
    snapshot_steps: Sequence[int],
    snapshot_losses: Sequence[float],
    chosen: int | None = None,
    title: str = "Validation loss",
) -> go.Figure:
    """The run's validation loss against its step (a line), each snapshot a marker on it, the chosen one
    ringed. Steps on a log axis (the snapshots' steps are 0, 1 %, 3 %, 10 % … of the run); step 0 is drawn at 1."""
    if len(steps) != len(losses) or len(snapshot_steps) != len(snapshot_losses):
        raise ValueError("every step needs its loss")
    points: dict[str, Any] = {"type": "scatter", "mode": "markers", "name": "snapshots"}
    points |= {"x": [max(s, 1) for s in snapshot_steps], "y": list(snapshot_losses)}
    points |= {"marker": {"size": 9, "color": LINE}, "hovertemplate": "step %{text}: loss %{y:.4f}<extra></extra>"}
    points["text"] = [f"{s:,}" for s in snapshot_steps]
    data: list[dict[str, Any]] = []
    if steps:
        curve = {"type": "scatter", "mode": "lines", "name": "every evaluation", "x": list(steps), "y": list(losses)}
        curve |= {"line": {"color": LINE, "width": 1.5}, "hovertemplate": "step %{x:,}: loss %{y:.4f}<extra></extra>"}
        data.append(curve)
    data.append(points)
    if chosen is not None and chosen in snapshot_steps:
        i = list(snapshot_steps).index(chosen)
        ring = {"type": "scatter", "mode": "markers", "name": f"step {chosen:,}", "x": [max(chosen, 1)]}
        ring |= {"y": [snapshot_losses[i]], "hoverinfo": "skip"}
        ring["marker"] = {"size": 18, "color": "rgba(0,0,0,0)", "line": {"color": HIGHLIGHT, "width": 3}}
        data.append(ring)
    xs = [x for series in data for x in series["x"]]
    layout = {
        "xaxis": {"title": {"text": "step (log scale)"}, "type": "log", **log_steps(min(xs), max(xs))},
        "yaxis": {"title": {"text": "validation loss"}},
        "showlegend": False,  # the page's caption says what the line, the dots and the ring are
        **finish_layout(title, height=300),
    }
    return unvalidated(data, layout)


STRIP_PANEL = 200  # px: one snapshot's heatmap in head_over_steps
STRIP_TITLE = 34  # px: its two-line title ("step 900", "loss 6.933"), room for 12 px
STRIP_TICKS = 70  # px: the key labels under the bottom panel of the first column, at -60° in 9 px type
STRIP_FONT = 9  # px: the panels' tick labels
STRIP_NOTE_FONT = 10  # px: a panel's title, "step 1,400" in 47 px: three panels side by side on a phone (65 px each)
STRIP_ROW_LABELS = int(STRIP_PANEL // (LINE_EM * STRIP_FONT + GAP_PX))  # rows named down a panel, their boxes apart


def head_over_steps(
    weights: Sequence[np.ndarray],
    labels: Sequence[str],
    query_pieces: Sequence[str],
    key_pieces: Sequence[str],
    title: str = "One head through training",
    columns: int = 6,
) -> go.Figure:
    """One head's (Tq, Tk) weights at each snapshot, side by side on the 0–1 cividis scale, each titled with its
    `labels` entry (e.g. "step 300 · loss 1.22"). Axes and every cell's hover name positions from 1 and pieces: each
    heatmap's x and y are the token labels (viz.style.category_axis): at most 24 keys named, under the first column's
    bottom panel, and STRIP_ROW_LABELS rows down the first column."""
    if not weights or len(weights) != len(labels):
        raise ValueError("need one label for each snapshot's weights")
    zs = [check_attention(w, query_pieces, key_pieces) for w in weights]
    q, k = token_labels(query_pieces), token_labels(key_pieces)
    n = len(zs)
    cols = min(columns, n)
    rows = -(-n // cols)
    gap = 0.02
    width = (1 - gap * (cols - 1)) / cols
    # Laid out in pixels: each panel PANEL px tall under its two-line title; key labels only under a panel with none
    # below it (a lower row's title would sit on them), so the rows are a title band apart, not a tick band.
    band = STRIP_TITLE + 8
    area = rows * STRIP_PANEL + (rows - 1) * band + STRIP_TICKS
    data, layout = [], {}
    for i, (z, label) in enumerate(zip(zs, labels, strict=True)):
        r, c = divmod(i, cols)
        axis = "" if i == 0 else str(i + 1)
        heatmap: dict[str, Any] = {"type": "heatmap", "z": z, "zmin": 0.0, "zmax": 1.0, "colorscale": COLORSCALE}
        heatmap |= {"x": k, "y": q, "xaxis": f"x{axis}", "yaxis": f"y{axis}", "showscale": i == 0}
        heatmap["colorbar"] = {"title": {"text": "weight"}, "thickness": 12}
        heatmap["hovertemplate"] = f"{escape(label)}<br>{category_hover()}: %{{z:.3f}}<extra></extra>"
        data.append(heatmap)
        x0 = c * (width + gap)
        top = 1 - r * (STRIP_PANEL + band) / area
        # Hidden, never blanked: a hover's %{x} and %{y} read a tick's text where there is one. The keys are named
        # under the bottom panel of the first column alone, as the rows beside it: every panel reads the same
        # tokens, and a panel's last label, turned, ran into the next one's first.
        x_axis = category_axis(k, 24) | ({} if i == (rows - 1) * cols else {"showticklabels": False})
        layout[f"xaxis{axis}"] = {
            "domain": [x0, x0 + width],
            "anchor": f"y{axis}",
            **x_axis,
            "tickangle": -60,
            "tickfont": {"size": STRIP_FONT},
        }
        # Only the first column names its rows.
        y_axis = category_axis(q, STRIP_ROW_LABELS) | ({"showticklabels": False} if c else {})
        layout[f"yaxis{axis}"] = {
            "domain": [max(0.0, top - STRIP_PANEL / area), min(1.0, top)],  # rounding may step a hair outside 0–1
            "anchor": f"x{axis}",
            "autorange": "reversed",
            **y_axis,
            "tickfont": {"size": STRIP_FONT},
        }
    annotations = []
    for i, label in enumerate(labels):
        r, c = divmod(i, cols)
        x = c * (width + gap) + width / 2
        y = 1 - r * (STRIP_PANEL + band) / area
        text = "<br>".join(escape(part) for part in label.split(" · "))  # "step 900<br>loss 6.933": fits a panel
        annotations.append(
            {"text": text, "x": x, "y": y, "xref": "paper", "yref": "paper", "yanchor": "bottom"}
            | {"showarrow": False, "font": {"size": STRIP_NOTE_FONT}}
        )
    layout["annotations"] = annotations
    layout |= finish_layout(title, height=area + 70 + STRIP_TITLE + 10)
    layout["margin"] = {"l": 10, "r": 10, "t": 70 + STRIP_TITLE, "b": 10}
    return unvalidated(data, layout)


def log_steps(low: float, high: float) -> dict[str, Any]:
    """Ticks of a log step axis at 1, 2 and 5 times each power of ten from `low` to `high`, each written whole
    ("2,000", not Plotly's lone "2" after "1000" and "10k")."""
    ticks = [m * 10**e for e in range(0, 10) for m in (1, 2, 5) if low <= m * 10**e <= high]
    return {"tickmode": "array", "tickvals": ticks, "ticktext": [f"{t:,}" for t in ticks]} if len(ticks) > 1 else {}


INDUCTION_COLOR = "#D55E00"  # Okabe–Ito vermilion


def copying_curve(
    steps: Sequence[int],
    induction: Sequence[float],
    first_copy_loss: Sequence[float],
    second_copy_loss: Sequence[float],
    chosen: int | None = None,
    title: str = "Copying from the context",
) -> go.Figure:
    """A run's induction probe at every evaluation (analysis.induction): the best head's induction score (left
    axis, 0–1) and the loss on each copy of a repeated run of random tokens (right axis, nats). A model that has
    learned to copy has a low loss on the second copy and a head scoring near 1; the change is often sudden, so
    the steps are on a linear axis. `chosen` draws a vertical line at that step."""
    if not (len(steps) == len(induction) == len(first_copy_loss) == len(second_copy_loss)):
        raise ValueError("every step needs its induction score and both copy losses")
    hover = "step %{x:,}: %{y:.3f}<extra>%{fullData.name}</extra>"
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "name": "best induction score", "x": list(steps), "y": list(induction)}
        | {"line": {"color": INDUCTION_COLOR, "width": 2}, "hovertemplate": hover},
        {"type": "scatter", "mode": "lines", "name": "loss, first copy", "x": list(steps), "y": list(first_copy_loss)}
        | {"line": {"color": LINE, "width": 1.5, "dash": "dot"}, "yaxis": "y2", "hovertemplate": hover},
        {"type": "scatter", "mode": "lines", "name": "loss, second copy", "x": list(steps)}
        | {"y": list(second_copy_loss), "line": {"color": LINE, "width": 2}, "yaxis": "y2", "hovertemplate": hover},
    ]
    layout: dict[str, Any] = {
        "xaxis": {"title": {"text": "step"}},
        "yaxis": {"title": {"text": "induction score"}, "range": [0, 1.02]},
        "yaxis2": {"title": {"text": "loss (nats)"}, "overlaying": "y", "side": "right", "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.3},
        **finish_layout(title, height=320),
    }
    if chosen is not None:
        layout["shapes"] = [
            {"type": "line", "x0": chosen, "x1": chosen, "yref": "paper", "y0": 0, "y1": 1}
            | {"line": {"color": HIGHLIGHT, "width": 2, "dash": "dash"}}
        ]
    return unvalidated(data, layout)
