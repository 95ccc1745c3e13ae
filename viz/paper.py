"""The picture of the Transformer paper's Figures 3–5: two columns of tokens joined by a line per attention weight.

Queries stand on the left (for cross-attention: the decoder's output), keys on the right (the source); a line
joins query i to key j with opacity = weight, one colour per head. Plotly gives a scatter line one opacity per
series, so each head's segments are grouped into `BUCKETS` opacity buckets of width `BUCKET_WIDTH`: a segment is
drawn with its bucket's middle, within `BUCKET_WIDTH / 2` of its weight. A head is one legend group (a full-colour
legend entry and its bucket series), so a click on the legend hides or shows the whole head.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from analysis.record import Sublayer
from viz.labels import indexed_labels, token_labels
from viz.style import HIGHLIGHT, finish_layout, tick_step, unvalidated

# Okabe & Ito (2008), colour-blind safe; yellow last, it is the faintest on white.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000", "#F0E442")
BUCKETS = 20
BUCKET_WIDTH = 1.0 / BUCKETS  # a segment's opacity is within BUCKET_WIDTH / 2 of its weight
LINE_WIDTH = 1.2
ROW_PX = 16  # vertical pixels per token up to MAX_HEIGHT: 60 tokens stay readable
MAX_HEIGHT = 1800
CHROME_PX = 150  # title, legend and margins
OUTSIDE = -1.0  # x left of the plot (x range [0, 1]): where a line path walks from one segment to the next
SELF_COLUMNS = ("query (attending)", "key (attended to)")
CROSS_COLUMNS = ("decoder output (queries)", "source (keys)")


THRESHOLD = 0.1  # the Paper view's threshold opens here: a query has at most 10 lines per head
MIN_THRESHOLD = 0.05  # and never lower: at most 20 lines per query and head, 40,960 for 8 heads × 256 tokens


def lines_above(weights: np.ndarray, threshold: float, query: int | None = None) -> np.ndarray:
    """(head, query, key) index triples, shape (N, 3), of the weights ≥ `threshold` in (H, Tq, Tk) `weights`,
    only query `query`'s when given. Each row sums to 1, so a query has at most 1 / threshold lines per head."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"the threshold must be in (0, 1], got {threshold}")
    chosen = weights if query is None else weights[:, query : query + 1]
    found = np.argwhere(chosen >= threshold)
    if query is not None:
        found[:, 1] = query
    return found


def opening_threshold(weights: np.ndarray, query: int | None, usual: float, least: float) -> float:
    """The threshold a first visit opens on: `usual`, or, where the largest weight of (H, Tq, Tk) `weights` (query
    `query`'s only, when given) is smaller (a long text spreads its weights thin), that weight rounded down to
    0.01, not below `least`: the view opens on lines wherever the slider can show any."""
    largest = float(weights.max() if query is None else weights[:, query].max())
    if largest >= usual:
        return usual
    return max(least, math.floor(largest * 100) / 100)


def _bucket(w: np.ndarray) -> np.ndarray:
    return np.minimum((w * BUCKETS).astype(np.int64), BUCKETS - 1)


def bucket_opacity(bucket: int) -> float:
    """The opacity a bucket's lines are drawn with: the middle of its weights [b, b + 1) · BUCKET_WIDTH."""
    return (bucket + 0.5) * BUCKET_WIDTH


def _segments(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x and y of line segments (0, q) → (1, k) as ONE unbroken path: each segment is walked out and back,
    (OUTSIDE, q) → (0, q) → (1, k) → (0, q), and the walk to the next segment's start runs left of the plot, where
    Plotly clips it. Gaps (NaN) would make Plotly draw one SVG path per segment: thousands of paths take the
    browser seconds to redraw at 256 tokens; one path per series draws the same picture."""
    x = np.tile(np.array([OUTSIDE, 0.0, 1.0, 0.0], dtype=np.float32), len(q))
    y = np.stack([q, q, k, q], axis=1).astype(np.float32).ravel()
    return x, y


def _ticks(labels: list[str], n: int, step: int, mark: int | None) -> dict[str, Any]:
    idx = sorted(set(range(0, len(labels), step)) | ({mark} if mark is not None else set()))
    text = [f'<span style="color:{HIGHLIGHT}"><b>{labels[i]}</b></span>' if i == mark else labels[i] for i in idx]
    return {
        "tickmode": "array",
        "tickvals": idx,
        "ticktext": text,
        "range": [n - 0.5, -0.5],  # token 1 on top
        "fixedrange": True,
        "showgrid": False,
        "zeroline": False,
        "ticks": "",
        "tickfont": {"size": 12 if step == 1 else 10},
    }


def attention_lines(
    weights: np.ndarray,
    query_pieces: Sequence[str],
    key_pieces: Sequence[str],
    *,
    heads: Sequence[int] | None = None,
    query: int | None = None,
    threshold: float = 0.1,
    title: str = "Attention",
    columns: tuple[str, str] = SELF_COLUMNS,
) -> go.Figure:
    """Figures 3–5 of "Attention Is All You Need" from (H, Tq, Tk) `weights`: query tokens on the left, key
    tokens on the right, a line from query i to key j for each weight ≥ `threshold`, opacity = weight (bucketed,
    see the module), one Okabe–Ito colour and one legend entry per head.

    `heads`: the 0-based heads to draw (default all: the layer's heads overlaid); `query`: only that query's
    lines (its label is highlighted). Labels are escaped; the arrays travel as float32 typed arrays."""
    arr = np.asarray(weights, dtype=np.float32)
    if arr.ndim != 3:
        raise ValueError(f"expected (heads, queries, keys) weights, got shape {arr.shape}")
    n_heads, n_q, n_k = arr.shape
    if (n_q, n_k) != (len(query_pieces), len(key_pieces)):
        raise ValueError(
            f"weights of shape {arr.shape} do not match {len(query_pieces)} query × {len(key_pieces)} key tokens"
        )
    heads = list(range(n_heads)) if heads is None else list(heads)
    if not heads or any(not 0 <= h < n_heads for h in heads):
        raise ValueError(f"heads must be among 0 … {n_heads - 1}, got {heads}")
    if query is not None and not 0 <= query < n_q:
        raise ValueError(f"query {query} is not a query position (0 … {n_q - 1})")
    found = lines_above(arr[heads], threshold, query)  # head column: index into `heads`
    w = arr[heads][found[:, 0], found[:, 1], found[:, 2]]
    group = found[:, 0] * BUCKETS + _bucket(w)
    order = np.argsort(group, kind="stable")
    found, group = found[order], group[order]
    starts = np.flatnonzero(np.diff(group, prepend=-1))
    series: list[dict[str, Any]] = []
    for slot, head in enumerate(heads):
        name = f"head {head + 1}"
        colour = PALETTE[head % len(PALETTE)]
        legend = {"legendgroup": name, "name": name, "hoverinfo": "skip"}
        # The legend entry: full colour whatever the head's weights (an empty series, drawn nowhere).
        series.append({"type": "scatter", "x": [None], "y": [None], "mode": "lines", **legend})
        series[-1]["line"] = {"color": colour, "width": 3}
        for start, stop in zip(starts, [*starts[1:], len(group)]):
            if group[start] // BUCKETS != slot:
                continue
            x, y = _segments(found[start:stop, 1], found[start:stop, 2])
            series.append(
                {
                    "type": "scatter",
                    "x": x,
                    "y": y,
                    "mode": "lines",
                    "line": {"color": colour, "width": LINE_WIDTH, "simplify": False},
                    "opacity": bucket_opacity(int(group[start] % BUCKETS)),
                    "showlegend": False,
                    **legend,
                }
            )
    q_labels, k_labels = token_labels(query_pieces), token_labels(key_pieces)
    n = max(n_q, n_k)
    height = min(MAX_HEIGHT, max(360, ROW_PX * n + CHROME_PX))
    step = tick_step(n, most=max(1, (height - CHROME_PX) // 13))
    ends = {"type": "scatter", "mode": "markers", "showlegend": False, "cliponaxis": False}
    ends["marker"] = {"size": 5, "color": "#757575"}
    ends["hovertemplate"] = "%{text}<extra></extra>"
    series.append({**ends, "x": np.zeros(n_q, np.float32), "y": np.arange(n_q, dtype=np.float32)})
    series[-1]["text"] = [f"query {label}" for label in q_labels]
    series.append({**ends, "x": np.ones(n_k, np.float32), "y": np.arange(n_k, dtype=np.float32), "yaxis": "y2"})
    series[-1]["text"] = [f"key {label}" for label in k_labels]
    layout = {
        **finish_layout(title, height),
        "xaxis": {"range": [0.0, 1.0], "visible": False, "fixedrange": True},  # OUTSIDE is clipped
        "yaxis": {**_ticks(q_labels, n, step, query), "title": {"text": columns[0]}},
        "yaxis2": {**_ticks(k_labels, n, step, None), "title": {"text": columns[1]}, "overlaying": "y"},
        "showlegend": True,
        "legend": {"orientation": "h", "x": 0.0, "xanchor": "left", "y": 1.0, "yanchor": "bottom"},
        "hovermode": "closest",
        "plot_bgcolor": "white",
    }
    layout["yaxis2"]["side"] = "right"
    # The title on the figure's top edge, the legend (up to two rows of heads) between it and the plot.
    layout["title"] = {**layout["title"], "y": 1.0, "yref": "container", "yanchor": "top", "pad": {"t": 10}}
    layout["margin"] = {**layout["margin"], "t": 95}
    return unvalidated(series, layout)


def sublayer_lines(
    sublayer: Sublayer,
    heads: Sequence[int] | None = None,
    query: int | None = None,
    threshold: float = 0.1,
    title: str = "",
) -> go.Figure:
    """`attention_lines` of one Sublayer: its weights and pieces; cross-attention's columns are named for what they
    are (the decoder's output on the left, the source on the right)."""
    columns = CROSS_COLUMNS if sublayer.type == "cross_attn" else SELF_COLUMNS
    return attention_lines(
        sublayer.weights,
        sublayer.query_pieces,
        sublayer.key_pieces,
        heads=heads,
        query=query,
        threshold=threshold,
        title=title or sublayer.name,
        columns=columns,
    )


def paper_title(attention_label: str, layer: int, n_heads: int, head: int | None, query_label: str | None) -> str:
    """The Paper view's title: "Encoder self-attention, layer 2, all 8 heads, query 3: ▁cat" (`layer`, `head`
    0-based; head None: every head; query_label None: every query token's lines)."""
    name = f"all {n_heads} heads" if head is None else f"head {head + 1}"
    token = "" if query_label is None else f", query {query_label}"
    return f"{attention_label}, layer {layer + 1}, {name}{token}"


def paper_view(
    sublayer: Sublayer, attention_label: str, layer: int, head: int | None, query: int | None, threshold: float
) -> go.Figure:
    """The Paper view, finished and titled: what the page draws and `atlas.paper` returns (`layer`, `head`, `query`
    0-based; head None: every head of the layer; query None: every query token's lines)."""
    query_label = None if query is None else indexed_labels(sublayer.query_pieces)[query]
    title = paper_title(attention_label, layer, sublayer.n_heads, head, query_label)
    return sublayer_lines(sublayer, None if head is None else [head], query, threshold, title)
