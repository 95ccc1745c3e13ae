"""Point at a token: its row (the token as query) and its column (the token as key) outlined on a head's heatmap and on
the grid of every head, so that one choice shows the same token in every attention view of a page.

A token is named by the sequence it belongs to, "encoder" (the text an encoder reads) or "decoder" (the text a
decoder reads), and its position from 0; `pointed` says where it sits in a sub-layer of one attention type.
"""

from __future__ import annotations

from typing import Any

from model.names import parse_attention_type
from viz.arrays import block_of
from viz.style import HIGHLIGHT

# The outline of the token pointed at: the one highlight colour, drawn over the cells, never filling them.
LINE = {"color": HIGHLIGHT, "width": 3}
GRID_LINE = {"color": HIGHLIGHT, "width": 1.5}  # a thumbnail's row is a few pixels: a thinner outline
QUERY, KEY = "pointed query", "pointed key"  # the shapes' names: what a test (or a reader of the JSON) finds

Pointed = tuple[int | None, int | None]  # (query row, key column), None where the token is not on that axis


def pointed(attention: str, stack: str, position: int) -> Pointed:
    """Where token `position` of `stack`'s text sits in a sub-layer of `attention` ("decoder.cross_attn"): its query
    row, when the sub-layer's queries are that text's tokens, and its key column, when its keys are (cross-attention's
    keys are the encoder's). An encoder's token has no row in cross-attention; a decoder's has no column."""
    query_stack, kind = parse_attention_type(attention)
    key_stack = "encoder" if kind == "cross_attn" else query_stack
    return (position if stack == query_stack else None, position if stack == key_stack else None)


def _rect(x: tuple[float, float], y: tuple[float, float], line: dict[str, Any], name: str) -> dict[str, Any]:
    return {"type": "rect", "name": name, "x0": x[0], "x1": x[1], "y0": y[0], "y1": y[1], "line": line}


def heatmap_shapes(n_queries: int, n_keys: int, point: Pointed) -> list[dict[str, Any]]:
    """The outlines on a (n_queries × n_keys) heatmap whose cells sit at category positions 0, 1, …: the row of
    query `point[0]` and the column of key `point[1]` (either None: not drawn)."""
    query, key = point
    shapes = []
    if query is not None and 0 <= query < n_queries:
        shapes.append(_rect((-0.5, n_keys - 0.5), (query - 0.5, query + 0.5), LINE, QUERY))
    if key is not None and 0 <= key < n_keys:
        shapes.append(_rect((key - 0.5, key + 0.5), (-0.5, n_queries - 0.5), LINE, KEY))
    return shapes


def grid_shapes(n_layers: int, n_heads: int, tile: tuple[int, int], tokens: tuple[int, int], point: Pointed) -> list:
    """The outlines on a layer × head grid of (h, w) thumbnails of (Tq, Tk) weights (viz.heads.heads_grid): the
    query's row across each layer's tiles and the key's column down each head's tiles, one shape per layer and
    one per head. A thumbnail averages blocks of tokens: the outline is on the block holding the token."""
    (h, w), (n_q, n_k) = tile, tokens
    query, key = point
    shapes = []
    if query is not None and 0 <= query < n_q:
        row = block_of(n_q, h, query)
        for layer in range(n_layers):
            y = layer * h + row
            shapes.append(_rect((-0.5, n_heads * w - 0.5), (y - 0.5, y + 0.5), GRID_LINE, QUERY))
    if key is not None and 0 <= key < n_k:
        column = block_of(n_k, w, key)
        for head in range(n_heads):
            x = head * w + column
            shapes.append(_rect((x - 0.5, x + 0.5), (-0.5, n_layers * h - 0.5), GRID_LINE, KEY))
    return shapes


def point_at(spec: dict[str, Any], point: Pointed) -> dict[str, Any]:
    """A copy of a `frozen` head heatmap (viz.heads.head_heatmap) or grid of heads (viz.heads.heads_grid) with the
    token `point` = (query row, key column) outlined; `spec` is not changed, so one cached figure serves every
    token pointed at."""
    layout = spec["layout"]
    meta = layout.get("meta") or {}
    if "tile" in meta and "tokens" not in meta:  # a grid built without its token counts: nothing to place
        return spec
    if "tile" in meta:
        n_layers, n_heads = len(layout["yaxis"]["tickvals"]), len(layout["xaxis"]["tickvals"])
        shapes = grid_shapes(n_layers, n_heads, tuple(meta["tile"]), tuple(meta["tokens"]), point)
    else:
        heatmap = spec["data"][0]
        shapes = heatmap_shapes(len(heatmap["y"]), len(heatmap["x"]), point)
    if not shapes:
        return spec
    return {**spec, "layout": {**layout, "shapes": [*layout.get("shapes", []), *shapes]}}
