"""Fewer x tick labels where a chart is drawn narrow: the widths below which a chart's labelled x ticks (the token
axes of viz.style.category_axis and token_axis, any axis with `tickvals`) would touch, and CSS that shows every
m-th label there. The server never knows how wide a chart will be drawn (a phone's 340 px, a laptop's 680 px, a
column), so the labels are thinned by a container query on the chart's own width, as its cell numbers are
(viz.style.cell_numbers_css). The hover still names every cell: it reads the categories, not the ticks shown."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

LINE_EM = 1.3  # a tick label's box is this many font sizes tall (Source Sans in chromium: 15.6 px at 12 px type)
CHAR_EM = 0.6  # a label's character, in em, at most on average (a label read whole on a horizontal axis)
GAP_PX = 2  # at least this far apart, two labels' boxes
NARROWEST = 120  # px: no rule for charts narrower than this
MOST_RULES = 12  # the thinning steps written for one chart: every 2nd label, every 3rd, … every 13th


def _font(axis: dict[str, Any], layout: dict[str, Any]) -> float:
    return float((axis.get("tickfont") or {}).get("size") or (layout.get("font") or {}).get("size") or 12)


def _labels(axis: dict[str, Any]) -> list[str]:
    ticks = axis.get("ticktext")
    ticks = axis.get("tickvals") if ticks is None else ticks
    return [] if ticks is None or isinstance(ticks, dict) else [str(t) for t in ticks]


def label_pitch(axis: dict[str, Any], layout: dict[str, Any]) -> float:
    """The least distance (px) along an x axis between two labels' anchors for their boxes to stay apart: labels
    turned by `tickangle` lie side by side, LINE_EM of the font tall, so the distance times the angle's sine must
    hold one box; unturned labels must hold the widest label. An axis whose angle Plotly picks ("auto") may turn
    its labels upright (90°), the densest it draws them."""
    font = _font(axis, layout)
    angle = axis.get("tickangle")
    angle = 90.0 if angle in (None, "auto") else abs(float(angle)) % 180
    sine = math.sin(math.radians(angle))
    if sine < 0.3:  # about flat: the widest label's width
        return max((len(t) for t in _labels(axis)), default=1) * CHAR_EM * font + GAP_PX * 2
    return (LINE_EM * font + GAP_PX) / sine


def _chrome(spec: dict[str, Any]) -> float:
    """The chart's width (px) outside its plot area, at most: the y tick labels and title on the left (about CHAR_EM
    em a character), a colour bar or a legend on the right, the margins."""
    layout = spec.get("layout") or {}
    left = 0.0
    for key, axis in layout.items():
        if key.startswith("yaxis") and isinstance(axis, dict) and axis.get("showticklabels") is not False:
            chars = max((len(t) for t in _labels(axis)), default=4)
            left = max(left, chars * CHAR_EM * _font(axis, layout))
    traces = spec.get("data") or ()
    scale = any(
        t.get("type") in ("heatmap", "contour") and t.get("showscale") is not False and not t.get("coloraxis")
        for t in traces
    ) or bool(layout.get("coloraxis"))
    legend = (
        layout.get("showlegend") is not False
        and len(traces) > 1
        and (layout.get("legend") or {}).get("orientation") != "h"
    )
    return 50 + left + (85 if scale else 20) + (120 if legend else 0)


def thinning(fig: go.Figure | dict[str, Any]) -> list[tuple[int, float]]:
    """(m, below), widest first: at a chart width (px) under `below`, every m-th x tick label is shown (and y's,
    where the y axis keeps the x axis's scale), the others hidden (the largest m whose `below` the width is under
    wins); [] where every label fits on any screen. The x axis whose labels need the widest chart decides for all:
    its plot area is its domain's share of the chart less `_chrome`, and its labels at most that divided by their
    number apart. `fig`: a Figure, or a `frozen` one."""
    spec = fig.to_plotly_json() if isinstance(fig, go.Figure) else fig
    layout = spec.get("layout") or {}
    need = 0.0  # the plot width (px) all of the axis's labels need, over its share of the chart's
    count = 0
    for key, axis in layout.items():
        if not isinstance(axis, dict) or axis.get("showticklabels") is False:
            continue
        # a y axis held to its x axis's scale (a square plot) is as long as the x axis: the chart's width sets it
        tied = key.startswith("yaxis") and str(axis.get("scaleanchor", "")).startswith("x")
        if not (key.startswith("xaxis") or tied):
            continue
        labels = _labels(axis)
        if len(labels) < 2:
            continue
        across = layout.get("xaxis" + str(axis["scaleanchor"])[1:]) or {} if tied else axis
        domain = across.get("domain") or (0, 1)
        share = max(float(domain[1]) - float(domain[0]), 0.05)
        pitch = LINE_EM * _font(axis, layout) + GAP_PX if tied else label_pitch(axis, layout)
        wide = pitch * len(labels) / share
        if wide > need:
            need, count = wide, len(labels)
    if not need:
        return []
    chrome = _chrome(spec)
    steps = []
    for m in range(2, min(count, MOST_RULES + 1) + 1):
        below = chrome + need / (m - 1)  # every (m-1)-th label fits from this width on
        if below <= NARROWEST:
            break
        steps.append((m, below))
    return steps


def thinning_css(key: str, fig: go.Figure | dict[str, Any]) -> str:
    """CSS for the chart whose Streamlit key is `key` (`thinning`): under each width, every m-th x tick label shown
    and the others hidden (a label is a `g` in its axis layer, after the tick marks' paths); "" where none is
    needed. Every rule under the width applies and each sets every label, so the last, the narrowest, decides: no
    two ranges need meet at a pixel. `!important`: Plotly sets a label's display inline when it redraws the axis.
    No "<" (a range query): Streamlit's sanitizer drops a style whose text holds one before a letter or digit."""
    steps = thinning(fig)
    if not steps:
        return ""
    spec = fig.to_plotly_json() if isinstance(fig, go.Figure) else fig
    tied = any(
        k.startswith("yaxis") and isinstance(a, dict) and a.get("scaleanchor") and a.get("tickvals") is not None
        for k, a in (spec.get("layout") or {}).items()
    )
    scope = f".st-key-{key}"
    rules = [f"{scope}{{container-type:inline-size}}"]
    for m, below in steps:
        label = f"{scope} .xaxislayer-above>g" + (f",{scope} .yaxislayer-above>g" if tied else "")
        hide = ",".join(f"{one}:not(:nth-of-type({m}n+1))" for one in label.split(",")) + "{display:none!important}"
        show = ",".join(f"{one}:nth-of-type({m}n+1)" for one in label.split(",")) + "{display:inline!important}"
        rules.append(f"@container (max-width:{below:.1f}px){{{hide}{show}}}")
    return "".join(rules)
