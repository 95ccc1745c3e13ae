"""Figures and tables only the Lesson draws: token vectors, a head with its masked cells marked, the measured cost
of attention with its fitted curve, the work a key/value cache saves, the residual stream, and the shifted targets
of a language model. Every other view of the lesson reuses the other pages' figures."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis.record import Analysis
from viz.heads import head_heatmap
from viz.labels import display_piece, token_labels
from viz.style import AT_FIRST, DIVERGING, FIRST, HIGHLIGHT, MASKED, finish, finish_layout, token_axis, unvalidated

MOST_COLUMNS = 128  # dimensions or units drawn: more are thin slivers nobody can read
MOST_ROWS = 64  # tokens drawn
MARK_TOKENS = 24  # at most this many tokens per axis: a ✗ in each masked cell
BLUE = "#35608d"  # cividis's blue, as viz.generation's bars


def vectors_heatmap(
    rows: np.ndarray,
    pieces: Sequence[str],
    title: str,
    x_title: str = "dimension",
    columns: Sequence[int] | None = None,
) -> go.Figure:
    """(T, D) vectors, one row per token, on a blue–red scale centred on 0. At most MOST_ROWS tokens and
    MOST_COLUMNS columns are drawn (the title says which were left out); `columns`: the indices of the columns drawn
    when they are not 0, 1, 2, … Hover and axes count tokens and columns from 1."""
    arr = np.asarray(rows, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[0] != len(pieces):
        raise ValueError(f"vectors of shape {arr.shape} do not match {len(pieces)} tokens")
    if columns is not None and len(columns) != arr.shape[1]:
        raise ValueError(f"{len(columns)} column numbers for {arr.shape[1]} columns")
    shown = arr[:MOST_ROWS, :MOST_COLUMNS]
    cut = [f"first {n} of {total} {what}" for n, total, what in zip(shown.shape, arr.shape, ("tokens", x_title + "s"))]
    cut = [text for text, n, total in zip(cut, shown.shape, arr.shape) if n < total]
    if cut:
        title += f" ({', '.join(cut)})"
    bound = float(np.abs(shown).max()) or 1.0
    labels = token_labels(pieces[: shown.shape[0]])
    numbers = [c + FIRST for c in (columns[: shown.shape[1]] if columns is not None else range(shown.shape[1]))]
    heatmap = {
        "type": "heatmap",
        "z": shown,
        "zmin": -bound,
        "zmax": bound,
        "colorscale": DIVERGING,
        "reversescale": True,  # red positive, blue negative
        "colorbar": {"thickness": 12},
        "customdata": [[[label, n] for n in numbers] for label in labels],
        **AT_FIRST,
        "hovertemplate": f"%{{customdata[0]}}, {x_title} %{{customdata[1]}}: %{{z:.3f}}<extra></extra>",
    }
    layout = {
        "xaxis": {"title": {"text": x_title if columns is None else f"{x_title}s (hover for the number)"}},
        "yaxis": {"title": {"text": "token"}, "autorange": "reversed", **token_axis(labels)},
        **finish_layout(title, height=min(700, max(260, 20 * len(labels) + 140))),
    }
    layout["xaxis"]["showgrid"] = False
    if columns is not None:
        layout["xaxis"]["showticklabels"] = False
    return unvalidated([heatmap], layout)


def masked_head(
    weights: np.ndarray, mask: np.ndarray, query_pieces: Sequence[str], key_pieces: Sequence[str], title: str
) -> go.Figure:
    """One head's weights with the masked cells drawn grey (their score was −∞, their weight is exactly 0) and
    marked ✗ when there are few tokens."""
    m = np.asarray(mask, dtype=bool)
    w = np.asarray(weights, dtype=np.float32)
    if m.shape != w.shape:
        raise ValueError(f"mask of shape {m.shape} does not match weights of shape {w.shape}")
    fig = head_heatmap(np.where(m, w, np.nan), query_pieces, key_pieces, title)
    fig.update_layout(plot_bgcolor=MASKED)
    fig.update_xaxes(zeroline=False)
    fig.update_yaxes(zeroline=False)
    if max(m.shape) <= MARK_TOKENS and not m.all():
        rows, cols = np.nonzero(~m)
        q, k = token_labels(query_pieces), token_labels(key_pieces)
        fig.add_trace(
            go.Scatter(
                x=[k[c] for c in cols],  # on head_heatmap's cells, one category per token label
                y=[q[r] for r in rows],
                mode="text",
                text=["✗"] * len(rows),
                textfont={"color": "white", "size": 12},
                hoverinfo="skip",
                showlegend=False,
            )
        )
    return fig


def cost_figure(
    lengths: Sequence[int], measured: Sequence[float], fit: Sequence[float], title: str, unit: str
) -> go.Figure:
    """Measurements (markers) against sequence length, and the fitted quadratic a·n² + b·n + c (`fit`, in the
    same unit) drawn as a line from 0 to the longest length."""
    if len(lengths) != len(measured) or len(fit) != 3:
        raise ValueError(f"{len(lengths)} lengths, {len(measured)} measurements and {len(fit)} coefficients")
    x = np.linspace(0, max(lengths), 100)
    a, b, c = fit
    fig = go.Figure(
        [
            go.Scatter(
                x=x,
                y=a * x**2 + b * x + c,
                mode="lines",
                name="fitted a·n² + b·n + c",
                line={"color": HIGHLIGHT},
                hovertemplate=f"fit at n = %{{x:.0f}}: %{{y:.3g}} {unit}<extra></extra>",
            ),
            go.Scatter(
                x=list(lengths),
                y=list(measured),
                mode="markers",
                name="measured",
                marker={"color": BLUE, "size": 9},
                hovertemplate=f"n = %{{x}}: %{{y:.3g}} {unit}<extra></extra>",
            ),
        ]
    )
    fig.update_xaxes(title_text="sequence length n (tokens)", rangemode="tozero")
    fig.update_yaxes(title_text=unit, rangemode="tozero")
    fig.update_layout(legend={"orientation": "h", "y": -0.3})
    return finish(fig, title, height=340)


def cache_work(prompt: int, steps: int, step: int) -> go.Figure:
    """Positions run through the decoder in all after each of `steps` decoding steps that follow a `prompt` of
    that many tokens: with the cache, the first step runs the prompt and each later one the new token only;
    without it, step s runs all prompt + s − 1 positions again. The chosen step (1-based) is circled."""
    if not 1 <= step <= steps or prompt < 1:
        raise ValueError(f"step {step} is outside 1..{steps}, or the prompt ({prompt} tokens) is empty")
    s = np.arange(1, steps + 1)
    without = np.cumsum(prompt + s - 1)
    with_ = prompt + s - 1
    fig = go.Figure(
        [
            go.Scatter(x=s, y=without, mode="lines+markers", name="without the cache", line={"color": HIGHLIGHT}),
            go.Scatter(x=s, y=with_, mode="lines+markers", name="with the cache", line={"color": BLUE}),
            go.Scatter(
                x=[step, step],
                y=[with_[step - 1], without[step - 1]],
                mode="markers",
                marker={"color": "black", "size": 13, "symbol": "circle-open", "line": {"width": 2}},
                hoverinfo="skip",
                showlegend=False,
            ),
        ]
    )
    fig.update_xaxes(title_text="decoding step")
    fig.update_yaxes(title_text="positions computed so far", rangemode="tozero")
    fig.update_layout(legend={"orientation": "h", "y": -0.3})
    return finish(fig, "Positions computed so far", height=320)


def residual_figure(norms: np.ndarray, pre_norm: bool, norm: str = "LayerNorm") -> go.Figure:
    """Mean vector length per sub-layer of each layer: the stream coming in, what the sub-layer adds, the stream
    going out (after the norm, `norm` by name, for post-norm)."""
    arr = np.asarray(norms, dtype=np.float32)
    if arr.ndim != 3 or arr.shape[1:] != (2, 3):
        raise ValueError(f"expected (layers, 2, 3) norms, got shape {arr.shape}")
    names = [f"L{layer + 1} {part}" for layer in range(arr.shape[0]) for part in ("attention", "feed-forward")]
    flat = arr.reshape(-1, 3)
    out = f"x + Sublayer({norm}(x))" if pre_norm else f"{norm}(x + Sublayer(x))"
    series = (("stream coming in: x", BLUE), ("what the sub-layer adds", HIGHLIGHT), (f"going out: {out}", "#009E73"))
    fig = go.Figure(
        [
            go.Scatter(x=names, y=flat[:, i], mode="lines+markers", name=name, line={"color": colour})
            for i, (name, colour) in enumerate(series)
        ]
    )
    fig.update_xaxes(title_text="sub-layer", tickangle=-40)
    fig.update_yaxes(title_text="mean vector length", rangemode="tozero")
    fig.update_layout(legend={"orientation": "h", "y": -0.45})
    return finish(fig, "The residual stream, sub-layer by sub-layer", height=400)


def shift_frame(analysis: Analysis) -> pd.DataFrame:
    """A language model's input and target side by side: position i reads token i and is trained to predict
    token i + 1 (the text shifted by one); the model's own first guess there and its probability."""
    pieces = analysis.target_pieces
    rows = range(len(pieces) - 1)
    return pd.DataFrame(
        {
            "position": [i + 1 for i in rows],
            "input (reads)": [display_piece(pieces[i]) for i in rows],
            "target (next token)": [display_piece(pieces[i + 1]) for i in rows],
            "model's first guess": [display_piece(analysis.predictions[i][0].piece) for i in rows],
            "probability": [analysis.predictions[i][0].prob for i in rows],
            "right": ["✓" if analysis.predictions[i][0].id == analysis.target_ids[i + 1] else "" for i in rows],
        }
    )
