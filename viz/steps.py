"""Scaled dot-product attention for one head and one query, step by step, from the recorded scores, weights and V."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.record import HeadDetail, Sublayer
from viz.labels import display_piece, indexed_labels, token_labels
from viz.style import COLORSCALE, DIVERGING, FIRST, MASKED, finish

TEXT_TOKENS = 16
WINDOW = 64  # keys drawn in the four stage panels and the table; a person cannot read 512 rows of numbers
FORMULA = (
    r"\begin{aligned}&\mathrm{Attention}(Q,K,V)=\mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}+M\right)V\\"
    r"&M_{ij}=\begin{cases}0 & \text{may attend}\\-\infty & \text{masked}\end{cases}\end{aligned}"
    # two lines: on one, the mask's cases do not fit a 1024-pixel-wide window
)


@dataclass(frozen=True)
class Steps:
    """Each stage for query `query` of head `head`; arrays are over the keys (Tk,) or (Tk, d_head)."""

    query: int
    head: int
    query_piece: str
    key_pieces: tuple[str, ...]
    d_head: int
    scores: np.ndarray  # recorded QKᵀ/√d_head row, before the mask
    allowed: np.ndarray  # bool
    masked: np.ndarray  # scores with −∞ where masked
    weights: np.ndarray  # recorded softmax row
    values: np.ndarray  # (Tk, d_head) V of this head
    weighted: np.ndarray  # (Tk, d_head) w_j · v_j
    output: np.ndarray  # (d_head,) Σ_j w_j v_j


def attention_steps(sublayer: Sublayer, head: int, query: int, detail: HeadDetail | None = None) -> Steps:
    """Gather the four stages of `sublayer`'s head `head` for query position `query` (ValueError if out of range).
    The raw scores and values come from `detail` (that head's, computed on demand) or else from the sub-layer."""
    n_heads, tq, _ = sublayer.weights.shape
    if not 0 <= head < n_heads:
        raise ValueError(f"head {head} is outside 0..{n_heads - 1}")
    if not 0 <= query < tq:
        raise ValueError(f"query {query} is outside 0..{tq - 1}")
    if detail is not None:
        if (detail.sublayer, detail.head) != (sublayer.name, head):
            raise ValueError(f"the detail is of {detail.sublayer} head {detail.head}, not {sublayer.name} head {head}")
        head_scores, v = detail.scores, detail.values
    elif sublayer.scores is None or sublayer.values is None:
        raise ValueError(f"{sublayer.name}: this copy holds no raw scores or values; the full analysis has them")
    else:
        head_scores, v = sublayer.scores[head], sublayer.values[head]
    d_head = int(v.shape[-1])
    allowed = sublayer.mask[query].astype(bool)
    scores = head_scores[query].astype(np.float64)
    weights = sublayer.weights[head, query].astype(np.float64)
    weighted = weights[:, None] * v.astype(np.float64)
    return Steps(
        query=query,
        head=head,
        query_piece=sublayer.query_pieces[query],
        key_pieces=sublayer.key_pieces,
        d_head=d_head,
        scores=scores,
        allowed=allowed,
        masked=np.where(allowed, scores, -np.inf),
        weights=weights,
        values=v.astype(np.float64),
        weighted=weighted,
        output=weighted.sum(axis=0),
    )


def key_window(steps: Steps, start: int | None = None, size: int = WINDOW) -> range:
    """The keys drawn: `size` keys from `start` (clamped to the row); `start=None` centres on the largest weight."""
    n_keys = len(steps.weights)
    size = max(1, min(size, n_keys))
    if start is None:
        start = int(np.argmax(steps.weights)) - size // 2
    start = max(0, min(int(start), n_keys - size))
    return range(start, start + size)


def window_note(window: range, n_keys: int) -> str:
    """What the stage panels show, in words; empty when every key is shown."""
    if len(window) >= n_keys:
        return ""
    return (
        f"Showing keys {window.start + 1}–{window.stop} of {n_keys} in the four panels and the table; "
        "the overview above shows the weights of all keys. Move the slider to see other keys."
    )


def _fmt(values: np.ndarray, number: str = "{:.2f}") -> list[list[str]]:
    """One cell per value, as a column: "−∞" where masked, else the number."""
    return [["−∞" if np.isneginf(x) else number.format(x)] for x in values]


def opening_query(mask: np.ndarray) -> int:
    """The query the page opens on: one whose row the mask changes, half its keys hidden (the middle query of a
    no-peek mask), so that step 2 shows what masking does; the last query when the mask hides nothing there
    either (cross-attention, an encoder without padding), where every row is alike."""
    allowed = np.asarray(mask, dtype=bool)
    rows = [i for i in range(len(allowed)) if not allowed[i].all() and allowed[i].any()]
    if not rows:
        return len(allowed) - 1
    return min(rows, key=lambda i: (abs(int(allowed[i].sum()) - allowed.shape[1] / 2), i))


STEP_LABELS = ("1. scores", "2. masked", "3. softmax", "4. weight × V<br>(value dimension)")
STEP_LABELS_BELOW = 90  # px under the panels for the three narrow panels' upright names
STEP_LABEL_COLOR = "#262730"  # the page's text colour: a step's name is read, not a tick


def steps_figure(steps: Steps, window: range | None = None) -> go.Figure:
    """Four panels sharing the key axis: raw scores → masked (−∞ in grey) → softmax weights → w_j·v_j.

    Only the keys in `window` (default: all) are drawn; colour scales still span every key so that panels of
    different windows compare.
    """
    n_keys = len(steps.key_pieces)
    window = range(n_keys) if window is None else window
    if window.start < 0 or window.stop > n_keys or not len(window):
        raise ValueError(f"key window {window.start}..{window.stop - 1} is outside 0..{n_keys - 1}")
    sl = slice(window.start, window.stop)
    keys = token_labels(steps.key_pieces)[sl]  # `12:▁cat`: hover names each cell's key from these, not the ticks
    y = np.arange(window.start + FIRST, window.stop + FIRST, dtype=np.int32)  # key positions, counted from 1
    show_text = len(keys) <= TEXT_TOKENS
    fig = make_subplots(
        rows=1,
        cols=4,
        shared_yaxes=True,
        column_widths=[0.12, 0.12, 0.12, 0.64],
        horizontal_spacing=0.02,
    )
    bound = float(np.abs(steps.scores).max()) or 1.0
    columns = [
        (steps.scores[sl], DIVERGING, -bound, bound),
        (np.where(steps.allowed, steps.scores, np.nan)[sl], DIVERGING, -bound, bound),
        (steps.weights[sl], COLORSCALE, 0.0, 1.0),
    ]
    for col, (values, scale, lo, hi) in enumerate(columns, start=1):
        text = _fmt(steps.masked[sl] if col == 2 else values)
        fig.add_trace(
            go.Heatmap(
                z=np.asarray(values, dtype=np.float32)[:, None],
                y=y,
                x=[0],
                colorscale=scale,
                zmin=lo,
                zmax=hi,
                showscale=False,
                text=text,
                texttemplate="%{text}" if show_text else None,
                customdata=[[key] for key in keys],
                hovertemplate="key %{customdata}: %{text}<extra></extra>",
            ),
            row=1,
            col=col,
        )
    wbound = float(np.abs(steps.weighted).max()) or 1.0
    fig.add_trace(
        go.Heatmap(
            z=steps.weighted[sl].astype(np.float32),
            y=y,
            colorscale=DIVERGING,
            zmin=-wbound,
            zmax=wbound,
            texttemplate="%{z:.2f}" if show_text and steps.d_head <= TEXT_TOKENS else None,
            colorbar={"thickness": 10, "title": {"text": "w·v"}},
            customdata=[[key] * steps.d_head for key in keys],
            hovertemplate="key %{customdata}, dim %{x}: %{z:.3f}<extra></extra>",
            x0=FIRST,
        ),
        row=1,
        col=4,
    )
    fig.update_layout(plot_bgcolor=MASKED)
    # Each panel's step under it, in the figure's own type (larger in projector mode), dark: above the panels they
    # sat in small grey type under the chart's title. The three narrow panels' names stand upright, read bottom to
    # top, so that they never run into each other however narrow the panels get (25 px each on a phone); the wide
    # panel's is its axis title.
    fig.update_xaxes(showticklabels=False, showgrid=False, automargin=True, title_font_color=STEP_LABEL_COLOR)
    for col, label in enumerate(STEP_LABELS[:3], start=1):
        fig.add_annotation(
            text=label,
            textangle=-90,
            xref=f"x{col if col > 1 else ''} domain",
            x=0.5,
            yref="paper",
            y=0,
            xanchor="center",
            yanchor="top",
            yshift=-4,
            showarrow=False,
            font={"color": STEP_LABEL_COLOR},
        )
    fig.update_xaxes(title_text=STEP_LABELS[3], title_standoff=6, showticklabels=True, row=1, col=4)
    fig.update_yaxes(tickmode="array", tickvals=list(y), ticktext=keys, autorange="reversed", showgrid=False)
    fig.update_yaxes(title_text="key", row=1, col=1)
    title = f"Head {steps.head + 1}, query {steps.query + 1} ({display_piece(steps.query_piece)})"
    fig = finish(fig, title, height=min(900, max(320, 26 * len(keys) + 200)))
    return fig.update_layout(margin_b=STEP_LABELS_BELOW)


def weights_overview(steps: Steps, window: range) -> go.Figure:
    """The softmax weights of every key as one compact line, the keys drawn in the panels shaded."""
    x = np.arange(1, len(steps.weights) + 1, dtype=np.int32)
    fig = go.Figure(
        go.Scatter(
            x=x,
            y=steps.weights.astype(np.float32),
            mode="lines",
            line={"width": 1},
            fill="tozeroy",
            hovertemplate="key %{x}: weight %{y:.3f}<extra></extra>",
        )
    )
    fig.add_vrect(x0=window.start + 0.5, x1=window.stop + 0.5, fillcolor="grey", opacity=0.2, line_width=0)
    fig.update_xaxes(title_text="key position", range=[0.5, len(x) + 0.5], showgrid=False)
    fig.update_yaxes(title_text="weight", rangemode="tozero")
    return finish(fig, f"Softmax weights over all {len(x)} keys (shaded: the keys drawn below)", height=200)


def output_figure(steps: Steps) -> go.Figure:
    """The head's output for this query: Σ_j w_j v_j, one cell per value dimension."""
    z = steps.output.astype(np.float32)[None, :]
    bound = float(np.abs(z).max()) or 1.0
    fig = go.Figure(
        go.Heatmap(
            z=z,
            colorscale=DIVERGING,
            zmin=-bound,
            zmax=bound,
            showscale=False,
            texttemplate="%{z:.2f}" if steps.d_head <= 32 else None,
            hovertemplate="dim %{x}: %{z:.4f}<extra></extra>",
            x0=FIRST,
        )
    )
    fig.update_yaxes(showticklabels=False)
    fig.update_xaxes(title_text="value dimension", showgrid=False)
    return finish(fig, "5. output = Σⱼ wⱼ vⱼ", height=170)


def steps_table(steps: Steps, window: range | None = None) -> pd.DataFrame:
    """The numbers per key in `window` (default: all): raw score, masked score, weight. The masked score is text,
    "−∞" where masked: a table shows a float −inf as "-Infinity"."""
    window = range(len(steps.key_pieces)) if window is None else window
    sl = slice(window.start, window.stop)
    return pd.DataFrame(
        {
            "key": indexed_labels(steps.key_pieces)[sl],
            "score QKᵀ/√d": steps.scores[sl],
            "masked": [row[0] for row in _fmt(steps.masked[sl], "{:.4f}")],
            "weight": steps.weights[sl],
        }
    )


def steps_latex(steps: Steps) -> str:
    """The scaling for this head as numbers: √d_k and the largest weight, its key numbered from 1 as the key
    labels (`5:▁station`) are."""
    best = int(np.argmax(np.where(steps.allowed, steps.weights, -1.0)))
    # two lines: on one, the numbers run past a phone's 340 px
    return (
        rf"\begin{{gathered}}d_k = {steps.d_head},\ \sqrt{{d_k}} = {math.sqrt(steps.d_head):.3f}\\"
        rf"\max_j w_j = w_{{{best + 1}}} = {steps.weights[best]:.3f},\quad \sum_j w_j = {steps.weights.sum():.3f}"
        r"\end{gathered}"
    )
