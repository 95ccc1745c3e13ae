"""One head, the average of heads, and the layer × head grid of every head, as Plotly figures."""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz.arrays import THUMBNAIL, block_average, check_attention, quantize
from viz.highlight import Pointed, grid_shapes, heatmap_shapes
from viz.labels import indexed_labels, token_labels
from viz.style import COLORSCALE, HIGHLIGHT, category_axis, category_hover, finish_layout, thaw, unvalidated

ANNOTATE_TOKENS = 16  # at most this many tokens per axis: print each weight in its cell
AVERAGE = "average"  # the head that is the mean of a layer's heads, wherever a head is chosen (pages, atlas.head)


def head_name(head: int | str) -> str:
    """A head as its label reads: "head 3" for index 2, or "average of heads" for AVERAGE."""
    return "average of heads" if head == AVERAGE else f"head {int(head) + 1}"


NORMS = "weight × value norm"  # what a value-weighted view (analysis.record.Sublayer.value_weighted) draws


def head_title(attention_label: str, layer: int, head: int | str, norms: bool = False) -> str:
    """The one-head view's title: "Cross-attention (decoder → encoder), layer 2, head 3" (`layer`, `head` 0-based),
    and ", weight × value norm" when it draws the value-weighted shares."""
    return f"{attention_label}, layer {layer + 1}, {head_name(head)}" + (f", {NORMS}" if norms else "")


def head_weights(weights: np.ndarray, head: int | str) -> np.ndarray:
    """(Tq, Tk): one head of a sub-layer's (H, Tq, Tk) weights, or their mean for AVERAGE."""
    return average_heads(weights) if head == AVERAGE else np.asarray(weights)[head]


def head_view(
    weights: np.ndarray,
    query_pieces: Sequence[str],
    key_pieces: Sequence[str],
    attention_label: str,
    layer: int,
    head: int | str,
    norms: bool = False,
) -> go.Figure:
    """The one-head view, finished and titled, from a sub-layer's (H, Tq, Tk) weights: what Explore draws and
    `atlas.head` returns (`layer`, `head` 0-based; head AVERAGE: the mean of the layer's heads; `norms`: the
    weights given are the value-weighted shares, and the title says so)."""
    title = head_title(attention_label, layer, head, norms)
    return head_heatmap(head_weights(weights, head), query_pieces, key_pieces, title)


def average_heads(weights: np.ndarray) -> np.ndarray:
    """Mean over heads of (H, Tq, Tk) weights; rows still sum to 1."""
    arr = np.asarray(weights, dtype=np.float32)
    if arr.ndim != 3:
        raise ValueError(f"expected (heads, queries, keys) weights, got shape {arr.shape}")
    return arr.mean(axis=0)


HEATMAP_MOST = 440  # px: a head's heatmap at most


def head_heatmap(
    weights: np.ndarray,
    query_pieces: Sequence[str],
    key_pieces: Sequence[str],
    title: str = "Attention",
    annotate: bool | None = None,
    point: Pointed | None = None,
) -> go.Figure:
    """Heatmap of one head (or an average): query tokens as rows, key tokens as columns, fixed 0–1 cividis scale.
    `point` = (query row, key column): a token pointed at, its row and column outlined (viz.highlight).

    Each axis has one category per token, its label `12:▁cat` (viz.labels.token_labels: the position keeps repeated
    tokens apart), at most 48 of them shown (viz.style.category_axis). Hover reads "query 3:▁on → key 10:▁The: 0.060"
    in every cell, at any length, from the cell's own categories: the labels travel once per axis. The matrix travels
    as a float32 typed array, not a list of Python floats.
    """
    z = check_attention(weights, query_pieces, key_pieces)
    q_labels, k_labels = token_labels(query_pieces), token_labels(key_pieces)
    # Tall enough for a row of 14 px a token, short enough to lie whole in a phone's or a laptop's first view under
    # the page's title; a longer text labels every other row (or fewer), never two labels on top of each other.
    height = min(HEATMAP_MOST, max(360, 14 * len(q_labels) + 160))
    rows = max(8, (height - 160) // 14)
    heatmap: dict[str, Any] = {"z": z, "x": k_labels, "y": q_labels, "zmin": 0.0, "zmax": 1.0, "colorscale": COLORSCALE}
    heatmap["colorbar"] = {"title": {"text": "weight"}, "thickness": 12}
    heatmap["hovertemplate"] = category_hover() + ": %{z:.3f}<extra></extra>"
    if annotate if annotate is not None else max(z.shape) <= ANNOTATE_TOKENS:
        heatmap["texttemplate"] = "%{z:.2f}"
        heatmap["textfont"] = {"size": 11}
    layout = {
        "xaxis": {"title": {"text": "key (attended to)"}, "tickangle": -60, **category_axis(k_labels)},
        "yaxis": {"title": {"text": "query (attending)"}, "autorange": "reversed", **category_axis(q_labels, rows)},
        **finish_layout(title, height=height),
    }
    if point is not None and (shapes := heatmap_shapes(len(q_labels), len(k_labels), point)):
        layout["shapes"] = shapes
    return unvalidated([{"type": "heatmap", **heatmap}], layout)


def swap_head(spec: dict[str, Any], weights: np.ndarray, title: str) -> dict[str, Any]:
    """A `frozen` `head_heatmap` of the same tokens with another head's weights and title. Axes, hover text and
    layout are shared with `spec` (not changed): a head switch encodes one matrix instead of building a figure."""
    heatmap = spec["data"][0]
    z = np.ascontiguousarray(weights, dtype=np.float32)
    typed = heatmap["z"] if isinstance(heatmap["z"], dict) else {}  # a typed array: {"dtype", "bdata", "shape"}
    shape = tuple(int(n) for n in str(typed["shape"]).split(",")) if "shape" in typed else ()
    if z.shape != shape:
        raise ValueError(f"weights of shape {z.shape} do not fit this heatmap of shape {shape}")
    encoded = {
        "dtype": "f4",
        "bdata": base64.b64encode(z.tobytes()).decode("ascii"),
        "shape": f"{shape[0]}, {shape[1]}",
    }
    old = spec["layout"]
    base = old["height"] - (old["margin"]["t"] - 40)  # the height before the old title's extra lines
    fresh = finish_layout(title, base)
    layout = {**old, "title": {**old["title"], "text": fresh["title"]["text"]}}
    layout |= {"height": fresh["height"], "margin": {**old["margin"], "t": fresh["margin"]["t"]}}
    return {**spec, "data": [{**heatmap, "z": encoded}, *spec["data"][1:]], "layout": layout}


GRID_CELLS = 200_000  # the most weights (uint8 cells) one grid sends: 48 tiles of 64², 270 tiles of 27²
GRID_ROW_PX = 64  # a layer's row never gets thinner than this: a 30-token head stays readable
DEEP_LAYERS = 12  # deeper than this, the head labels go on top of the (tall) grid


def thumbnail_size(n_layers: int, n_heads: int) -> int:
    """The largest side of each tile: THUMBNAIL, or less when so many heads would exceed GRID_CELLS (never < 16)."""
    return int(min(THUMBNAIL, max(16, math.isqrt(GRID_CELLS // max(1, n_layers * n_heads)))))


def grid_height(n_layers: int, n_heads: int) -> int:
    """The grid's height in pixels: rows of 90 px (fewer heads) up to 1000 px in all; a deep model's rows of at
    least GRID_ROW_PX each, however tall that makes it (30 layers: 1,980 px; the page scrolls)."""
    row = max(90, 600 // max(n_heads, 1))
    if 60 + n_layers * row > 1000:
        row = max(GRID_ROW_PX, 940 // n_layers)
    return 60 + n_layers * row


def grid_title(attention_label: str, norms: bool = False) -> str:
    """The grid's title: "Self-attention (masked): every head", and ", weight × value norm" for the shares."""
    return f"{attention_label}: every head" + (f", {NORMS}" if norms else "")


def grid_view(
    stacked: np.ndarray, attention_label: str, norms: bool = False, selected: tuple[int, int] | None = None
) -> go.Figure:
    """The grid of every head, finished and titled, from (L, H, Tq, Tk) weights: what Explore draws and
    `atlas.heads` returns (`norms`: the weights given are the value-weighted shares, and the title says so)."""
    return heads_grid(stacked, grid_title(attention_label, norms), selected)


def heads_grid(
    stacked: np.ndarray,
    title: str = "All heads",
    selected: tuple[int, int] | None = None,
    max_size: int | None = None,
    point: Pointed | None = None,
) -> go.Figure:
    """Layer × head grid of small heatmaps from (L, H, Tq, Tk) weights, one heatmap in all.

    Each thumbnail is block-averaged to at most `max_size`² (None: :func:`thumbnail_size`, which keeps a deep
    model's grid, SmolLM2's 30 × 9, as light as a small one's) and quantised to uint8 (0–255 ↔ weight 0–1). An
    invisible marker sits on each tile's centre so a click selects that head (customdata = [layer, head]). A deep
    model's rows keep at least GRID_ROW_PX each (the chart grows instead of squashing them) and its head labels
    stand on top, where the grid starts. `point` = (query row, key column): a token pointed at, outlined in every
    tile (viz.highlight).
    """
    arr = np.asarray(stacked, dtype=np.float32)
    if arr.ndim != 4:
        raise ValueError(f"expected (layers, heads, queries, keys) weights, got shape {arr.shape}")
    n_layers, n_heads = arr.shape[:2]
    tiles = block_average(arr, thumbnail_size(n_layers, n_heads) if max_size is None else max_size)  # (L, H, h, w)
    h, w = tiles.shape[-2:]
    mosaic = quantize(tiles.transpose(0, 2, 1, 3).reshape(n_layers * h, n_heads * w))
    ticks = [0, 64, 128, 191, 255]
    heat = {
        "type": "heatmap",
        "z": mosaic,
        "zmin": 0,
        "zmax": 255,
        "colorscale": COLORSCALE,
        "hoverinfo": "skip",
        "colorbar": {
            "title": {"text": "weight"},
            "tickvals": ticks,
            "ticktext": ["0", ".25", ".5", ".75", "1"],
            # a deep model's colour bar stays a readable 400 px at the top, not the grid's two thousand
            **({"lenmode": "pixels", "len": 400, "y": 1, "yanchor": "top"} if n_layers > DEEP_LAYERS else {}),
        },
    }
    layer_idx, head_idx = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")
    centres = {
        "type": "scatter",
        "x": (head_idx.ravel() * w + (w - 1) / 2).astype(np.float32),
        "y": (layer_idx.ravel() * h + (h - 1) / 2).astype(np.float32),
        "mode": "markers",
        "marker": {"size": 18, "opacity": 0.0, "symbol": "square"},
        "customdata": [[int(a), int(b)] for a, b in zip(layer_idx.ravel(), head_idx.ravel())],  # plain: tiny
        "text": [f"layer {a + 1}, head {b + 1}" for a, b in zip(layer_idx.ravel(), head_idx.ravel())],  # 1-based
        "hovertemplate": "%{text}: click to open<extra></extra>",
        "showlegend": False,
    }
    line = {"color": "white", "width": 2}
    shapes = [
        {"type": "line", "x0": k * w - 0.5, "x1": k * w - 0.5, "y0": -0.5, "y1": n_layers * h - 0.5, "line": line}
        for k in range(1, n_heads)
    ] + [
        {"type": "line", "y0": k * h - 0.5, "y1": k * h - 0.5, "x0": -0.5, "x1": n_heads * w - 0.5, "line": line}
        for k in range(1, n_layers)
    ]
    if point is not None:
        shapes += grid_shapes(n_layers, n_heads, (h, w), arr.shape[2:], point)
    layout = {
        **({"shapes": shapes} if shapes else {}),
        "xaxis": {
            **({"side": "top"} if n_layers > DEEP_LAYERS else {}),
            "tickmode": "array",
            "tickvals": [k * w + (w - 1) / 2 for k in range(n_heads)],
            "ticktext": [f"head {k + 1}" for k in range(n_heads)],
            "showgrid": False,
            "zeroline": False,
            "range": [-0.5, n_heads * w - 0.5],
        },
        "yaxis": {
            "tickmode": "array",
            "tickvals": [k * h + (h - 1) / 2 for k in range(n_layers)],
            "ticktext": [f"layer {k + 1}" for k in range(n_layers)],
            "showgrid": False,
            "zeroline": False,
            "range": [n_layers * h - 0.5, -0.5],  # layer 1 on top; fixed: the click markers would pad an autorange
        },
        "hovermode": "closest",
        "hoverdistance": -1,
        "clickmode": "event+select",
        "meta": {"tile": [h, w], "tokens": [int(arr.shape[2]), int(arr.shape[3])]},
        **finish_layout(title, height=grid_height(n_layers, n_heads)),
    }
    fig = unvalidated([heat, centres], layout)
    return fig if selected is None else select_head(fig, selected)


def select_head(grid: go.Figure | dict[str, Any], selected: tuple[int, int]) -> go.Figure:
    """A copy of a `heads_grid` figure (or its `frozen` dict) with head `selected` = (layer, head) outlined. The
    grid is not changed, so one built grid serves every head switch: the copy skips Plotly's validation (only a
    rectangle is added)."""
    return thaw(outlined(grid.to_dict() if isinstance(grid, go.Figure) else grid, selected))


def outlined(spec: dict[str, Any], selected: tuple[int, int]) -> dict[str, Any]:
    """`select_head` on a `frozen` grid, frozen: a new top level and layout, every other part shared with `spec`."""
    h, w = spec["layout"]["meta"]["tile"]
    layer, head = selected
    box = {"x0": head * w - 0.5, "x1": (head + 1) * w - 0.5, "y0": layer * h - 0.5, "y1": (layer + 1) * h - 0.5}
    rect = {"type": "rect", "line": {"color": HIGHLIGHT, "width": 4}, **box}
    return {**spec, "layout": {**spec["layout"], "shapes": [*spec["layout"].get("shapes", []), rect]}}


def grid_pick(selection: Mapping[str, Any] | None, n_heads: int) -> tuple[int, int] | None:
    """The (layer, head) a click on the grid selected, from st.plotly_chart's selection state, else None.

    Reads the marker's customdata [layer, head] (a list, or an index-keyed object from a typed array), else its
    point index (markers are laid out layer by layer).
    """
    points = (selection or {}).get("points") or []
    for point in points:
        data = point.get("customdata")
        if isinstance(data, Mapping):
            data = [data.get("0"), data.get("1")]
        if isinstance(data, list | tuple) and len(data) >= 2 and None not in data[:2]:
            return int(data[0]), int(data[1])
        index = point.get("point_index", point.get("point_number"))
        if point.get("curve_number", 1) == 1 and isinstance(index, int) and n_heads > 0:
            return divmod(index, n_heads)
    return None


def head_frame(weights: np.ndarray, query_pieces: Sequence[str], key_pieces: Sequence[str]) -> pd.DataFrame:
    """One head as a table (rows: `i:query piece`, columns: `j:key piece`) for the CSV download."""
    z = check_attention(weights, query_pieces, key_pieces)
    return pd.DataFrame(z, index=indexed_labels(query_pieces), columns=indexed_labels(key_pieces))
