"""Shared look: one fixed, colour-blind-safe 0–1 scale for attention, and the Plotly toolbar's PNG export."""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from viz.labels import escape, safe_filename

COLORSCALE = "Cividis"  # perceptually uniform, readable with red-green colour blindness and in greyscale
DIVERGING = "RdBu"  # for signed values (scores, encodings); blue-red is colour-blind safe
HIGHLIGHT = "#D55E00"  # Okabe–Ito vermillion: stands out on cividis
MASKED = "#9e9e9e"


def chart_config(filename: str) -> dict[str, Any]:
    """`config=` for st.plotly_chart: PNG button saves `<filename>.png` at twice the screen resolution."""
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": "png", "filename": safe_filename(filename), "scale": 2},
    }


def finish(fig: go.Figure, title: str, height: int) -> go.Figure:
    """Common layout: escaped title, compact margins, fixed height."""
    fig.update_layout(
        title={"text": escape(title), "x": 0.0, "xanchor": "left"},
        height=int(height),
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    return fig


def tick_step(n: int, most: int = 64) -> int:
    """Label every `step`-th token so at most `most` labels crowd one axis."""
    return max(1, -(-n // most))


def frozen(fig: go.Figure) -> dict[str, Any]:
    """The figure as the JSON plotly.js receives, as a dict: its arrays already base64 typed arrays. Kept in a
    cache, it is built and encoded once; `thaw` makes a Figure of it for st.plotly_chart."""
    return json.loads(pio.to_json(fig, validate=False))


def thaw(spec: dict[str, Any]) -> go.Figure:
    """A Figure around a `frozen` dict, without Plotly's validation (it was valid when frozen): about half a
    millisecond, and st.plotly_chart's copy of it has no numpy arrays left to encode. `spec` is not changed."""
    return go.Figure(spec, _validate=False)
