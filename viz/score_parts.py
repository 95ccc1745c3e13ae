"""Why a head attends where it does (analysis.score_parts), drawn: the raw score split into query parts × key parts
as a heatmap centred on 0, the table behind it, and its largest cells. Layers and heads count from 1 in the parts'
names (`L2 H3`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz.labels import escape
from viz.style import DIVERGING, category_axis, finish_layout, unvalidated


def score_parts_frame(query_parts: Sequence[str], key_parts: Sequence[str], table: np.ndarray) -> pd.DataFrame:
    """The table as a DataFrame: one row per query part, one column per key part; the cells sum to the score."""
    if table.shape != (len(query_parts), len(key_parts)):
        raise ValueError(f"a {table.shape} table does not match {len(query_parts)} × {len(key_parts)} part names")
    frame = pd.DataFrame(table, index=list(query_parts), columns=list(key_parts))
    frame.index.name, frame.columns.name = "query part", "key part"
    return frame


def largest_cells(frame: pd.DataFrame, count: int = 10) -> pd.DataFrame:
    """The `count` cells of largest size, largest first: query part, key part, contribution, and the share of the
    sum of every cell's size (how much of the score's making it holds, whichever way it pushes)."""
    cells = frame.stack().rename("contribution").reset_index()
    size = cells["contribution"].abs()
    cells["share of all"] = size / (size.sum() or 1.0)
    return cells.loc[size.sort_values(ascending=False).index[:count]].reset_index(drop=True)


def score_parts_heatmap(frame: pd.DataFrame, title: str) -> go.Figure:
    """The table as a heatmap: query parts as rows (model order, top to bottom), key parts as columns, each named up
    to viz.style.AXIS_LABELS of them; blue for a part pair that raises the score, red for one that lowers it, on
    one scale centred on 0, in the score's own units. The cells' sum and the model's own score go beside it (a
    caption, the title of a figure that has none): in the title they wrapped it to four lines at 1024 px."""
    z = frame.to_numpy()
    top = float(np.abs(z).max()) or 1.0
    rows, columns = [escape(n) for n in frame.index], [escape(n) for n in frame.columns]
    series: dict[str, Any] = {"type": "heatmap", "z": z, "x": columns, "y": rows}  # z: sent as a typed array
    series |= {"zmin": -top, "zmax": top, "zmid": 0.0, "colorscale": DIVERGING}
    series["hovertemplate"] = "query part %{y} · key part %{x}: %{z:+.4f}<extra></extra>"
    series["colorbar"] = {"title": {"text": "part of q·k/√dₖ"}, "thickness": 12}  # the score's units: not a share
    if z.size <= 12 * 12:
        series |= {"texttemplate": "%{z:.2f}", "textfont": {"size": 11}}
    layout = {
        # every part named (a translator's 30 key parts fit at 1024 px), else every few as a token axis is
        "xaxis": category_axis(columns) | {"title": {"text": "key part"}, "tickangle": -45},
        "yaxis": category_axis(rows) | {"title": {"text": "query part"}, "autorange": "reversed"},
        **finish_layout(title, height=min(1100, max(360, 16 * len(rows) + 220))),
    }
    return unvalidated([series], layout)
