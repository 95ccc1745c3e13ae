"""Shared look: one fixed, colour-blind-safe 0–1 scale for attention, and the Plotly toolbar's PNG export."""

from __future__ import annotations

import functools
import html
import json
import math
import re
from typing import Any, NamedTuple

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from _plotly_utils.utils import to_typed_array_spec

from viz.labels import escape, safe_filename

COLORSCALE = "Cividis"  # perceptually uniform, readable with red-green colour blindness and in greyscale
DIVERGING = "RdBu"  # for signed values (scores, encodings); blue-red is colour-blind safe
HIGHLIGHT = "#D55E00"  # Okabe–Ito vermillion: stands out on cividis
MASKED = "#9e9e9e"


def chart_config(filename: str) -> dict[str, Any]:
    """`config=` for st.plotly_chart: the toolbar's camera saves the chart as `<filename>.svg`.

    SVG, not PNG: a vector drawing stays sharp at any size on a slide or in a paper, and an editor can change its
    text. Plotly's toolbar has one download button, and one format for it: a second button needs a JavaScript
    click handler, which a JSON config cannot carry. A PNG (at any scale) or a PDF of the same figure comes from
    `atlas.save_figure` in a notebook."""
    return {"displaylogo": False, "toImageButtonOptions": {"format": "svg", "filename": safe_filename(filename)}}


TITLE_CHARS = 34  # a title line at most this long: about 290 px in the bold title font, a half-width chart at 1024×768


def wrap_title(title: str, width: int = TITLE_CHARS) -> list[str]:
    """`title` in lines of at most `width` characters, broken after a comma where it can, else between words
    (Plotly never wraps a title; a long one is cut off at the chart's edge, "…layer 1, h")."""
    lines: list[str] = []
    for part in title.split(", "):
        piece = part if not lines else ", " + part
        if lines and len(lines[-1]) + len(piece) <= width:
            lines[-1] += piece
            continue
        if lines:
            lines[-1] += ","
        words, line = part.split(" "), ""
        for word in words:
            if line and len(line) + 1 + len(word) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return lines or [""]


def finish_layout(title: str, height: int) -> dict[str, Any]:
    """Common layout: the escaped title wrapped to lines (viz.style.wrap_title), compact margins, fixed height."""
    lines = wrap_title(title)
    extra = 22 * (len(lines) - 1)  # a title line: 17 px type and its leading
    return {
        # Hung from the top of the chart, so that its extra lines grow down into the margin, not over the plot.
        "title": {"text": "<br>".join(escape(line) for line in lines), "x": 0.0, "xanchor": "left"}
        | {"yref": "container", "y": 1.0, "yanchor": "top", "pad": {"t": 20}},  # less puts the title's top outside
        "height": int(height) + extra,
        "margin": {"l": 10, "r": 10, "t": 40 + extra, "b": 10},
    }


def finish(fig: go.Figure, title: str, height: int) -> go.Figure:
    """`finish_layout` applied to a figure."""
    fig.update_layout(**finish_layout(title, height))
    return fig


def unvalidated(data: list[dict[str, Any]], layout: dict[str, Any]) -> go.Figure:
    """A Figure of series (Plotly's `data`) and layout dicts written against Plotly's schema, without Plotly's
    validation, which costs many times the building itself: the charts drawn on every rerun are built this way.
    Named colour scales are expanded as validation would; tests/test_viz.py checks the JSON equals the validated
    one."""
    _expand_colorscales(data)
    return go.Figure({"data": data, "layout": layout}, _validate=False)


def _expand_colorscales(data: list[dict[str, Any]]) -> None:
    """Each series' named colour scale as the list validation would make of it (in place)."""
    for series in data:
        if isinstance(series.get("colorscale"), str):
            series["colorscale"] = _expanded(series["colorscale"])


@functools.cache
def _expanded(name: str) -> list[list]:
    return [list(pair) for pair in go.Heatmap(colorscale=name).colorscale]


FIRST = 1  # everything a person reads counts from 1: a token chart's cell i sits at x (or y) = i + FIRST
AT_FIRST = {"x0": FIRST, "y0": FIRST}  # a heatmap trace's cells from FIRST, so hover reads the position people see


AXIS_LABELS = 48  # at most this many labels on a token axis: more overlap at 1024 × 768
COLUMN_LABELS = 16  # the same for a chart in one of two columns (about 300 px of axis at 1024 × 768)


def token_axis(labels: list[str]) -> dict[str, Any]:
    """An axis of token positions counted from 1 (traces placed with AT_FIRST), every `tick_step`-th labelled with
    its `labels` entry (viz.labels.token_labels: `12:▁cat`), at most AXIS_LABELS of them. A hover reading this axis
    (%{x}) reads a tick's text at a tick and a bare number between two: a heatmap whose hover names its cells'
    tokens draws on `category_axis` instead."""
    idx = list(range(0, len(labels), tick_step(len(labels))))
    return {
        "tickmode": "array",
        "tickvals": [i + FIRST for i in idx],
        "ticktext": [labels[i] for i in idx],
        "showgrid": False,
    }


def category_axis(labels: list[str], most: int = AXIS_LABELS) -> dict[str, Any]:
    """An axis of one category per token, named by its label (viz.labels.token_labels: `12:▁cat`, unique because it
    starts with the position), for a heatmap whose x (or y) is these `labels`. Its hover's %{x} (%{y}) is then each
    cell's own label, whatever ticks are shown: the labels travel once per axis, not once per cell (a string a cell
    took 2.7 MB more at 256 × 256 tokens). Every `tick_step`-th label is shown, at most `most` of them. The type is set,
    never guessed: plain position names ("3") would otherwise make a numeric axis."""
    shown = labels[:: tick_step(len(labels), most)]
    return {"type": "category", "tickmode": "array", "tickvals": shown, "ticktext": shown, "showgrid": False}


def tick_step(n: int, most: int = AXIS_LABELS) -> int:
    """Label every `step`-th token so at most `most` labels crowd one axis."""
    return max(1, -(-n // most))


def category_hover(row_word: str = "query", column_word: str = "key") -> str:
    """A heatmap's hover naming its cell on `category_axis` axes, "query 3:▁on → key 10:▁The": %{y} and %{x} are
    the cell's own row and column categories (a numeric axis would give a tick's text or a bare number instead)."""
    return f"{row_word} %{{y}} → {column_word} %{{x}}"


def frozen(fig: go.Figure) -> dict[str, Any]:
    """The figure as the JSON plotly.js receives, as a dict: its arrays already base64 typed arrays. Kept in a
    cache, it is built and encoded once; `thaw` makes a Figure of it for st.plotly_chart.

    Equal to `json.loads(pio.to_json(fig, validate=False))`, built without that round trip: Plotly's `to_dict`
    deep-copies every series and the template, then the JSON is written and read back, several milliseconds a
    chart on every new sentence. The figure's own dicts are walked once instead, each array encoded as `to_dict`
    would; the default template, the same in every figure, is one shared dict (`shared_template`), never changed.
    A value of a type the walk does not know takes the round trip."""
    try:
        layout = fig._layout
        template, default = layout.get("template"), _default_template()
        shared = template is not None and default is not None and template == default[0]
        spec = {
            "data": _plain(fig._data, _IN_LIST),
            "layout": _plain({k: v for k, v in layout.items() if not (shared and k == "template")}, _IN_DICT),
        }
        if fig._frame_objs:
            raise _Unknown
    except _Unknown:
        return json.loads(pio.to_json(fig, validate=False))
    for trace in spec["data"]:
        trace.pop("uid", None)  # as pio.to_json leaves it out
    if shared:
        spec["layout"]["template"] = default[1]
    return spec


def frozen_spec(data: list[dict[str, Any]], layout: dict[str, Any]) -> dict[str, Any]:
    """`frozen(unvalidated(data, layout))` without building the Figure: for a chart the app draws on every new
    sentence and never hands out as a Figure (a phone's certainty strip), Plotly's Figure, with its copy of the
    default template, is work for nothing. `layout` without a template gets the default one, as a Figure would.
    tests/test_viz.py holds the two equal."""
    _expand_colorscales(data)
    default = _default_template()
    try:
        spec = {"data": _plain(data, _IN_LIST), "layout": _plain(layout, _IN_DICT)}
    except _Unknown:
        return frozen(unvalidated(data, layout))
    if "template" not in layout and default is not None:
        spec["layout"]["template"] = default[1]
    return spec


class _Unknown(Exception):  # noqa: N818 (a signal to take the round trip, not an error)
    """A value `_plain` does not know: the figure takes Plotly's own JSON round trip."""


_IN_LIST, _IN_DICT, _AS_IS = 0, 1, 2  # where a value sits: Plotly encodes an array as a typed array in a dict only
_SKIPPED = frozenset(("geojson", "layer", "layers", "range"))  # keys whose values Plotly never encodes so


def _plain(value: Any, where: int) -> Any:
    """`value` as Plotly's `to_dict` and a JSON round trip give it: arrays that are a dict's values as typed arrays
    (`to_typed_array_spec`), other arrays and tuples as lists, NumPy scalars as numbers, NaN and ±∞ as None."""
    kind = type(value)
    if kind is str or kind is bool or kind is int or value is None:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is dict:
        inner = _AS_IS if where == _AS_IS else _IN_DICT
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _Unknown
            out[key] = _plain(item, _AS_IS if key in _SKIPPED else inner)
        return out
    if kind is list or kind is tuple:
        inner = _AS_IS if where == _AS_IS else _IN_LIST
        return [_plain(item, inner) for item in value]
    if kind is np.ndarray:
        if where == _IN_DICT:
            typed = to_typed_array_spec(value)
            if isinstance(typed, dict):
                return typed
        if value.dtype.kind not in "biuf":
            raise _Unknown
        return _plain(value.tolist(), _AS_IS)
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return _plain(value.item(), where)
    raise _Unknown


def shared_template() -> dict[str, Any] | None:
    """The frozen default template every `frozen` figure on it holds (one dict: never change it), or None when
    the default is not a registered template's name. Streamlit makes its own ("streamlit") the default."""
    default = _default_template()
    return None if default is None else default[1]


def _default_template() -> tuple[Any, dict[str, Any]] | None:
    name = pio.templates.default
    return _template_named(name) if isinstance(name, str) else None


@functools.cache
def _template_named(name: str) -> tuple[Any, dict[str, Any]] | None:
    """Template `name` as a Figure holds it, and as `frozen` gives it; None for a name not registered."""
    if name not in pio.templates:
        return None
    figure = go.Figure(layout={"template": name})
    return figure._layout["template"], json.loads(pio.to_json(figure, validate=False))["layout"]["template"]


def thaw(spec: dict[str, Any]) -> go.Figure:
    """A Figure around a `frozen` dict, without Plotly's validation (it was valid when frozen): about half a
    millisecond, and st.plotly_chart's copy of it has no numpy arrays left to encode. `spec` is not changed."""
    return go.Figure(spec, _validate=False)


def standalone_html(fig: go.Figure | dict[str, Any]) -> str:
    """The figure (or a `frozen` dict) as one HTML page that opens anywhere offline: plotly.js inside it (about
    4.8 MB), no CDN, still interactive (hover, zoom)."""
    figure = thaw(fig) if isinstance(fig, dict) else fig
    return pio.to_html(figure, include_plotlyjs=True, full_html=True, config={"displaylogo": False})


# Cell numbers are drawn only where they fit: CSS hides them when the chart's box is narrower than its cells need.
DIGIT_EM = 0.56  # the width of a digit or point, in em, in Plotly's default font (measured in chromium: Source Sans)
CELL_PAD_PX = 4
PROJECTOR_FONT = 20  # chart text in projector mode, as large as its body text (22 px, captions 21 px)
PROJECTOR_CELL_FONT = 16  # numbers inside heatmap cells: larger, and 15 tokens' numbers no longer fit 1024 px
# The tallest chart in projector mode: a 768 px projector keeps about 280 px for the menu, the title and the model's
# line (or the Lesson's step heading) above a page's first figure, and two lines under it for the sentence that
# explains it.
PROJECTOR_MOST_HEIGHT = 420


def _number_chars(heatmap: dict[str, Any]) -> int:
    """How many characters the widest number in a heatmap's cells has: "0.00" for %{z:.2f}, else its text's longest
    line (a cell may hold a piece over its percentage, "▁Hund<br>58%")."""
    template = heatmap.get("texttemplate") or ""
    if "%{text}" in template and heatmap.get("text") is not None:
        lines = (line for row in heatmap["text"] for t in row for line in str(t).split("<br>"))
        return max((len(line) for line in lines), default=0)
    return 4


def _text_lines(heatmap: dict[str, Any]) -> int:
    """How many lines of text a heatmap's cells hold at most: 1 for %{z:.2f}, more for a text with line breaks."""
    template = heatmap.get("texttemplate") or ""
    if "%{text}" in template and heatmap.get("text") is not None:
        return max((str(t).count("<br>") + 1 for row in heatmap["text"] for t in row), default=1)
    return template.count("<br>") + 1


def _z_shape(z: Any) -> tuple[int, int]:
    """(rows, columns) of a heatmap's z: a nested list, an array, or a typed array ({"dtype", "bdata", "shape"})."""
    if isinstance(z, dict):
        rows, columns = str(z.get("shape", "0, 0")).split(",")
        return int(rows), int(columns)
    return tuple(int(n) for n in np.shape(z)) if np.ndim(z) == 2 else (0, 0)


def cell_numbers_width(fig: go.Figure | dict[str, Any]) -> int:
    """The narrowest chart box (px) in which every heatmap's cell numbers fit side by side, or 0 when it prints
    none. Cells share the plot's width with the y labels (about 7 px a character), the axis titles and colour bar;
    a chart without a y axis (a strip of tokens) with its margins and its colour bar alone (`_colorbar_px`).
    `fig`: a Figure, or a `frozen` one (read as it is: nothing is copied)."""
    spec = fig.to_plotly_json() if isinstance(fig, go.Figure) else fig  # a Figure's own dicts, not a copy
    layout = spec.get("layout") or {}
    need = 0.0
    labels = 0
    for axis in ("yaxis", "yaxis2"):
        ticks = (layout.get(axis) or {}).get("ticktext")
        labels = max(labels, max((len(str(t)) for t in (() if ticks is None else ticks)), default=0))
    y_axis = (layout.get("yaxis") or {}).get("visible", True) is not False
    for series in spec.get("data") or ():
        if series.get("type") != "heatmap" or not series.get("texttemplate"):
            continue
        chrome = 170 + 7 * min(labels, 24) if y_axis else 20 + _colorbar_px(series, layout)
        font = (series.get("textfont") or {}).get("size") or 12
        cell = _number_chars(series) * DIGIT_EM * font + CELL_PAD_PX
        axis = "xaxis" + (series.get("xaxis") or "x")[1:]
        domain = (layout.get(axis) or {}).get("domain") or (0, 1)
        share = max(domain[1] - domain[0], 0.05)
        need = max(need, _z_shape(series.get("z"))[1] * cell / share + chrome)
    return int(need)


def _colorbar_px(heatmap: dict[str, Any], layout: dict[str, Any]) -> float:
    """The width a heatmap's colour bar takes beside its plot: its bar and pads, and its title or tick labels
    ("100%"), whichever is wider, in the chart's type; 0 without one."""
    if heatmap.get("showscale") is False:
        return 0.0
    font = (layout.get("font") or {}).get("size") or TICK_FONT
    title = ((heatmap.get("colorbar") or {}).get("title") or {}).get("text") or ""
    return max(len(title), 4) * DIGIT_EM * font + 30


# A heatmap's rows are as tall as its plot (the chart's height less its margins and its x axis) over its rows: its
# cell numbers print in a type that fits a row, down to CELL_FONT_MIN, and not at all in rows shorter than that.
CELL_LINE_EM = 1.2  # a row of numbers, in em of their type: the digits (0.65 em) and the gap to the next row's
CELL_FONT_MIN = 10  # px: smaller numbers are dropped, not printed (hover still shows every value)
TICK_FONT = 12  # px: Plotly's tick labels, where the figure sets none (measured in chromium under Streamlit's theme)
TICK_CHAR_EM = 0.6  # a tick label's character, in em (its width; times the sine of its angle, its height)


def _shown_chars(label: Any) -> int:
    """How many characters a label shows: its escapes (`&lt;/s&gt;`) as one each, its tags (`<b>`) as none."""
    return len(html.unescape(re.sub(r"<[^>]*>", "", str(label))))


def _plot_height(layout: dict[str, Any], xaxis: str, yaxis: str) -> float:
    """The plot's height (px) in a chart of `layout`'s fixed height: the margins, the x axis's tick labels (tilted:
    their longest one's height at its angle) and its title taken off, times the y axis's share of what is left.
    0 for a chart without a fixed height."""
    height = layout.get("height") or 0
    margin = layout.get("margin") or {}
    x = layout.get(xaxis) or {}
    below = 0.0
    if x.get("visible", True) is not False:
        tick = (x.get("tickfont") or {}).get("size") or TICK_FONT
        ticks = x.get("ticktext")
        longest = max((_shown_chars(t) for t in (() if ticks is None else ticks)), default=4)
        angle = math.radians(x.get("tickangle") or 0)
        below = longest * TICK_CHAR_EM * tick * abs(math.sin(angle)) + tick * abs(math.cos(angle)) + 6
        if (x.get("title") or {}).get("text"):
            below += 1.3 * tick + 20  # the axis title and the pads around it
    domain = (layout.get(yaxis) or {}).get("domain") or (0, 1)
    plot = height - margin.get("t", 100) - margin.get("b", 80) - below
    return max(0.0, plot * (domain[1] - domain[0]))


def cell_fonts(fig: go.Figure | dict[str, Any]) -> dict[int, int]:
    """The heatmaps whose cell numbers do not fit their rows in the type they ask for, by index in the figure's
    data: each with the type (px) its numbers fit in, or 0 where even CELL_FONT_MIN does not fit (none printed).
    Empty when every heatmap's numbers fit (or none prints any). `fig`: a Figure, or a `frozen` one (read as it is)."""
    spec = fig.to_plotly_json() if isinstance(fig, go.Figure) else fig
    layout = spec.get("layout") or {}
    fonts = {}
    for i, series in enumerate(spec.get("data") or ()):
        rows = _z_shape(series.get("z"))[0]
        if series.get("type") != "heatmap" or not series.get("texttemplate") or not rows:
            continue
        font = (series.get("textfont") or {}).get("size") or TICK_FONT
        xaxis, yaxis = (f"{a}axis" + (series.get(f"{a}axis") or a)[1:] for a in ("x", "y"))
        row = (_plot_height(layout, xaxis, yaxis) / rows - (series.get("ygap") or 0)) / _text_lines(series)
        if not layout.get("height") or font * CELL_LINE_EM <= row:
            continue
        fits = int(row / CELL_LINE_EM)
        fonts[i] = fits if fits >= CELL_FONT_MIN else 0
    return fonts


def fit_cell_numbers(fig: go.Figure | dict[str, Any]) -> go.Figure | dict[str, Any]:
    """`fig` with each heatmap's cell numbers in a type that fits its rows, or none printed where none fits
    (`cell_fonts`): `fig` itself when all fit, else a changed copy (for a `frozen` figure, a frozen one that shares
    what did not change: no Figure is built for it)."""
    fonts = cell_fonts(fig)
    if not fonts:
        return fig
    if isinstance(fig, dict):  # the frozen spec changed where it changes, its other parts shared as they are
        data = list(fig["data"])
        for i, size in fonts.items():
            series = dict(data[i])
            if size:
                series["textfont"] = {**series.get("textfont", {}), "size": size}
            else:
                series.pop("texttemplate", None)
            data[i] = series
        return {**fig, "data": data}
    out = go.Figure(fig)
    for i, size in fonts.items():
        series = out.data[i]
        if size:
            series.textfont.size = size
        else:
            series.texttemplate = None
    return out


class Reflowed(NamedTuple):
    """A chart laid out twice: `wide` where its cell text fits the chart's width (`cell_numbers_width`), else
    `narrow`, the same cells in more, shorter lines (a phone's). The app draws both and shows one, by the width of
    the box they are in."""

    wide: go.Figure | dict[str, Any]
    narrow: go.Figure | dict[str, Any]


def cell_numbers_css(key: str, width: int) -> str:
    """CSS for the chart whose Streamlit key is `key`: below `width` px its heatmap cell numbers are hidden (they
    would overlap into a blur); hover still shows every value. A container query, so it follows the chart's real
    width on any screen and column layout."""
    scope = f".st-key-{key}"
    hide = f"{scope} .heatmap-label{{display:none}}"
    return f"{scope}{{container-type:inline-size}}@container (max-width:{width}px){{{hide}}}"


def for_projector(fig: go.Figure) -> go.Figure:
    """The figure in large type for a projector: its text and ticks PROJECTOR_FONT px (cell numbers
    PROJECTOR_CELL_FONT), titles larger, the chart taller to hold them. Changes `fig` (a thawed copy) and
    returns it."""
    fig.update_layout(font={"size": PROJECTOR_FONT}, title_font={"size": PROJECTOR_FONT + 4})
    fig.update_traces(textfont={"size": PROJECTOR_CELL_FONT}, selector={"type": "heatmap"})
    fig.update_xaxes(tickfont={"size": PROJECTOR_FONT})
    fig.update_yaxes(tickfont={"size": PROJECTOR_FONT})
    lines = (fig.layout.title.text or "").count("<br>") + 1 if fig.layout.title.text else 0
    top = fig.layout.margin.t if fig.layout.margin and fig.layout.margin.t is not None else 40
    room = max(top, 16 + round(lines * 1.35 * (PROJECTOR_FONT + 4)))  # the larger title's lines above the plot
    if fig.layout.height:
        fig.update_layout(height=int(fig.layout.height * 1.3) + room - top)
    # The larger title sits higher than its pad says (measured in chromium: 10 px above the chart at 20 px type):
    # a larger pad keeps its first line inside the chart, and the margin grows by as much.
    fig.update_layout(margin={"t": room + 14}, title_pad_t=24)
    if fig.layout.height:
        fig.update_layout(height=min(PROJECTOR_MOST_HEIGHT, fig.layout.height + 14))
        _fewer_row_labels(fig)
    return fig


def _fewer_row_labels(fig: go.Figure) -> None:
    """A token axis down the side (category_axis) of a chart made shorter for a projector keeps a label for every
    row only where rows are as tall as the projector's type: else every other one (or fewer)."""
    plot = fig.layout.height - (fig.layout.margin.t or 0) - 160  # the x axis's tilted labels and title below
    most = max(4, int(plot // (PROJECTOR_FONT * 1.25)))
    for axis in fig.select_yaxes():
        if axis.type == "category" and axis.tickvals is not None and len(axis.tickvals) > most:
            ticks = list(axis.tickvals)
            axis.update(tickvals=ticks[:: tick_step(len(ticks), most)], ticktext=ticks[:: tick_step(len(ticks), most)])
