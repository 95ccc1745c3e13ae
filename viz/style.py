"""Shared look: one fixed, colour-blind-safe 0–1 scale for attention, and the Plotly toolbar's PNG export."""

from __future__ import annotations

import functools
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


def finish_layout(title: str, height: int) -> dict[str, Any]:
    """Common layout: escaped title, compact margins, fixed height."""
    return {
        "title": {"text": escape(title), "x": 0.0, "xanchor": "left"},
        "height": int(height),
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
    }


def finish(fig: go.Figure, title: str, height: int) -> go.Figure:
    """`finish_layout` applied to a figure."""
    fig.update_layout(**finish_layout(title, height))
    return fig


def unvalidated(data: list[dict[str, Any]], layout: dict[str, Any]) -> go.Figure:
    """A Figure of trace and layout dicts written against Plotly's schema, without Plotly's validation: the
    charts drawn on every rerun are built this way (a validated 8 × 8 grid took 25 ms, this 0.6 ms). Named
    colour scales are expanded as validation would; tests/test_viz.py checks the JSON equals the validated one."""
    for trace in data:
        if isinstance(trace.get("colorscale"), str):
            trace["colorscale"] = _expanded(trace["colorscale"])
    return go.Figure({"data": data, "layout": layout}, _validate=False)


@functools.cache
def _expanded(name: str) -> list[list]:
    return [list(pair) for pair in go.Heatmap(colorscale=name).colorscale]


def token_axis(labels: list[str]) -> dict[str, Any]:
    """An axis of integer token positions labelled with (escaped) pieces, at most 64 labels shown."""
    idx = list(range(0, len(labels), tick_step(len(labels))))
    return {"tickmode": "array", "tickvals": idx, "ticktext": [labels[i] for i in idx], "showgrid": False}


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
