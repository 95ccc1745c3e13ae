"""Padding and no-peek masks: of the analysed input, and of a padded batch of sentences."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from analysis.record import BatchMasks
from viz.arrays import block_average
from viz.labels import escape, token_labels
from viz.style import FIRST, category_axis, category_hover, finish, token_axis

ALLOWED, BLOCKED = "#fee838", "#00224e"  # the two ends of cividis
TEXT_TOKENS = 24
MAX_CELLS = 64  # longer sides drawn as blocks (each cell: share of allowed pairs): more take seconds to paint


def reduced_note(shape: tuple[int, ...]) -> str:
    """What a mask of `shape` is drawn as, in words; empty when every cell is drawn."""
    if max(shape) <= MAX_CELLS:
        return ""
    rows, cols = (max(1, -(-n // MAX_CELLS)) for n in shape)
    return (
        f"{shape[0]} × {shape[1]} tokens, drawn in blocks of about {rows} × {cols}: each cell is the share of "
        "its pairs that may attend (1 = all may attend, 0 = all masked)."
    )


def padding_note(batch: BatchMasks) -> str:
    """What the batch's padding heatmap is drawn as, in words; empty when every position is drawn."""
    n = batch.padding.shape[1]
    if n <= MAX_CELLS:
        return ""
    return f"{n} positions, drawn in blocks of about {-(-n // MAX_CELLS)}: each cell is the share of real tokens."


def _centres(n: int) -> np.ndarray:
    """Token-index centre of each block that `block_average` averages over: the blocks' mean position."""
    return block_average(np.arange(n, dtype=np.float32)[None, :], MAX_CELLS)[0]


def mask_view(
    mask: np.ndarray, query_pieces: Sequence[str], key_pieces: Sequence[str], attention_label: str
) -> go.Figure:
    """An attention's mask, finished and titled ("Encoder self-attention mask"): what the Masks page draws in each
    tab and `atlas.mask` returns."""
    return mask_heatmap(mask, query_pieces, key_pieces, f"{attention_label} mask")


def mask_heatmap(
    mask: np.ndarray, query_pieces: Sequence[str], key_pieces: Sequence[str], title: str, pieces: bool = True
) -> go.Figure:
    """A (Tq, Tk) boolean mask in two colours, rows = queries, columns = keys; ✓ / ✗ printed for short inputs.
    Axes and every cell's hover name positions from 1 and pieces (viz.labels.token_labels), the cells on one
    category per token (viz.style.category_axis) with only the verdict a cell; a long mask's blocks (above
    MAX_CELLS a side) sit at the positions they are near, on numeric axes, and name them.

    `pieces=False`: the labels are plain names (only escaped), not token pieces.
    """
    m = np.asarray(mask, dtype=bool)
    if m.shape != (len(query_pieces), len(key_pieces)):
        raise ValueError(f"mask of shape {m.shape} does not match {len(query_pieces)} × {len(key_pieces)} tokens")
    label = token_labels if pieces else (lambda names: [escape(n) for n in names])
    q, k = label(query_pieces), label(key_pieces)
    if reduced_note(m.shape):
        heatmap = {
            "z": block_average(m, MAX_CELLS).round(4),
            "x": _centres(m.shape[1]) + FIRST,
            "y": _centres(m.shape[0]) + FIRST,
            "zmin": 0,
            "zmax": 1,
            "colorscale": [[0.0, BLOCKED], [1.0, ALLOWED]],
            "colorbar": {"tickvals": [0, 1], "ticktext": ["all blocked", "all may attend"], "thickness": 12},
            # Numbers formatted in the template (:.0f), never the axis's tick text; no per-cell text: 4,096 cells'
            # strings would outgrow the figure (tests/test_long_inputs.py).
            "hovertemplate": "queries near %{y:.0f} → keys near %{x:.0f}: %{z:.0%} may attend<extra></extra>",
        }
    else:
        heatmap = {
            "z": m.astype(np.uint8),
            "x": k,
            "y": q,
            "zmin": 0,
            "zmax": 1,
            "colorscale": [[0.0, BLOCKED], [0.5, BLOCKED], [0.5, ALLOWED], [1.0, ALLOWED]],
            "colorbar": {"tickvals": [0.25, 0.75], "ticktext": ["blocked (−∞)", "may attend"], "thickness": 12},
            # the verdict a cell (a short word: 14 bytes), its row and column from the axes' categories
            "customdata": np.where(m, "may attend", "masked (−∞)").tolist(),
            "hovertemplate": category_hover() + ": %{customdata}<extra></extra>",
        }
    if max(m.shape) <= TEXT_TOKENS:
        heatmap["text"] = np.where(m, "✓", "✗").tolist()
        heatmap["texttemplate"] = "%{text}"
        heatmap["textfont"] = {"size": 12}
    fig = go.Figure(go.Heatmap(**heatmap))
    ticks = token_axis if reduced_note(m.shape) else category_axis
    for axis, labels in ((fig.update_xaxes, k), (fig.update_yaxes, q)):
        axis(**ticks(labels))
    fig.update_xaxes(title_text="key", tickangle=-60)
    fig.update_yaxes(title_text="query", autorange="reversed")
    return finish(fig, title, height=min(700, max(300, 22 * len(q) + 160)))


def padding_heatmap(batch: BatchMasks) -> go.Figure:
    """(sentence × position) padding mask of the batch: which positions hold a real token; hover names the sentence,
    the position from 1 and its piece (the pad piece where it is padding)."""
    rows = [f"sentence {i + 1}" for i in range(len(batch.pieces))]
    positions = [str(i + FIRST) for i in range(batch.padding.shape[1])]
    fig = mask_heatmap(batch.padding, rows, positions, "", pieces=False)
    fig.update_xaxes(title_text="position", tickangle=0)
    fig.update_yaxes(title_text="")
    if padding_note(batch):
        hover = None
        template = "sentence %{y:.0f}, positions near %{x:.0f}: %{z:.0%} real tokens<extra></extra>"
        ticks = ["all padding", "all real tokens"]
    else:
        said = np.where(batch.padding, "real token", "padding")
        labels = [token_labels(pieces) for pieces in batch.pieces]
        hover = [
            [f"{row}, position {p}: {s}" for p, s in zip(found, kinds)] for row, found, kinds in zip(rows, labels, said)
        ]
        template, ticks = "%{customdata}<extra></extra>", ["padding", "real token"]
    fig.update_traces(colorbar={"ticktext": ticks}, customdata=hover, hovertemplate=template)
    return finish(fig, "Padding mask of the batch (1 = real token, 0 = padding)", height=160 + 40 * len(rows))
