"""Attention rollout as a token × token heatmap: rows the output positions, columns the input tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from analysis.record import Analysis
from viz.arrays import check_attention
from viz.labels import token_labels
from viz.style import COLORSCALE, category_axis, category_hover, finish_layout, unvalidated

ANNOTATE_TOKENS = 16  # at most this many tokens per axis: print each value in its cell


ROLLOUT_LABELS = {  # what each rollout of an encoder-decoder is (not one sub-layer: a product of them), rows → columns
    "encoder.self_attn": "Encoder (source → source)",
    "decoder.self_attn": "Decoder self-attention (output → output)",
    "decoder.cross_attn": "Decoder → source (through the encoder)",
}


def rollout_label(analysis: Analysis, attention: str) -> str:
    """What the rollout of `attention` is called: a language model's one attention by its own name, an encoder's
    or an encoder-decoder's by what it maps (ROLLOUT_LABELS)."""
    return ROLLOUT_LABELS[attention] if analysis.has_encoder else analysis.attention_label(attention)


def _axis(labels: list[str], title: str) -> dict[str, Any]:
    return {"title": {"text": title}, **category_axis(labels)}


def rollout_heatmap(
    rollout: np.ndarray,
    output_pieces: Sequence[str],
    input_pieces: Sequence[str],
    title: str = "Attention rollout",
) -> go.Figure:
    """Heatmap of one (outputs, inputs) rollout map on the fixed 0–1 cividis scale: row i, column j is how much
    output position i draws from input token j. The axes are positions labelled `12:▁cat` (viz.labels.token_labels),
    so repeated tokens stay apart; every cell's hover reads "output 3:▁on → input 1:▁The: value"; numbers in the
    cells up to 16 tokens a side (blank where exactly 0).
    Written as Plotly's JSON without validation (viz.style.unvalidated; tests/test_rollout.py validates it)."""
    z = check_attention(rollout, output_pieces, input_pieces)
    rows, cols = token_labels(output_pieces), token_labels(input_pieces)
    heatmap: dict[str, Any] = {"type": "heatmap", "z": z, "zmin": 0.0, "zmax": 1.0, "colorscale": COLORSCALE}
    heatmap |= {"x": cols, "y": rows}  # one category per token (viz.style.category_axis)
    heatmap["colorbar"] = {"title": {"text": "share"}, "thickness": 12}
    heatmap["hovertemplate"] = category_hover("output", "input") + ": %{z:.3f}<extra></extra>"
    if max(z.shape) <= ANNOTATE_TOKENS:  # masked cells (exactly 0: a causal model's future) stay blank
        heatmap["text"] = [["" if v == 0.0 else f"{v:.2f}" for v in row] for row in z.tolist()]
        heatmap["texttemplate"] = "%{text}"
        heatmap["textfont"] = {"size": 11}
    layout = {
        "xaxis": _axis(cols, "input token (drawn from)"),  # Plotly turns the labels only when they overlap
        "yaxis": {"autorange": "reversed", **_axis(rows, "output position")},
        **finish_layout(title, height=min(900, max(360, 22 * len(rows) + 160))),
    }
    return unvalidated([heatmap], layout)


def rollout_title(label: str, layer: int, heads: Sequence[int] | None, residual: bool) -> str:
    """The rollout's title: "Rollout: Encoder (source → source), layers 1–3, heads 1, 4" (`layer`, `heads`
    0-based; heads None: all; `residual` False adds ", raw")."""
    upto = "layer 1" if layer == 0 else f"layers 1–{layer + 1}"
    names = "all heads" if heads is None else "heads " + ", ".join(str(h + 1) for h in heads)
    return f"Rollout: {label}, {upto}, {names}" + ("" if residual else ", raw")


def rollout_view(
    maps: np.ndarray,
    output_pieces: Sequence[str],
    input_pieces: Sequence[str],
    label: str,
    layer: int,
    heads: Sequence[int] | None,
    residual: bool,
) -> go.Figure:
    """The rollout through `layer` (0-based) of a rollout's (L, outputs, inputs) maps, finished and titled: what the
    Attention rollout page draws and `atlas.rollout` returns."""
    return rollout_heatmap(maps[layer], output_pieces, input_pieces, rollout_title(label, layer, heads, residual))
