"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"): which input tokens
each output position draws from, through every layer, as products of per-layer attention matrices.

Numpy only. Notation after the paper: A_l is layer l's attention, averaged over heads (Tq, Tk), rows summing to
1. The residual connection x_l = x_{l-1} + Attn(x_{l-1}) keeps half of each position's own state, so the paper
models a layer as Ā_l = 0.5·A_l + 0.5·I, rows renormalised to 1 ("raw" attention leaves out the 0.5·I).

Order: position i after layer l is the mixture x_l[i] = Σ_j Ā_l[i, j] · x_{l-1}[j], so after layers 1..l

    R_l = Ā_l · Ā_{l-1} · … · Ā_1        (R_l = Ā_l · R_{l-1}, R_0 = I)

and R_l[i, j] is how much output position i draws from input token j: rows are outputs, columns inputs, and
each row is a probability distribution (a product of row-stochastic matrices is row-stochastic). Masked cells
are exactly 0 in every A_l, so they stay exactly 0: a causal model's rollout is lower-triangular. The Analysis
holds unpadded sub-layers, so no padding enters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.record import Analysis

RESIDUAL = 0.5  # the paper's weight of the identity (the residual connection) in each layer
ATTENTIONS = ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")  # the attentions a rollout follows


def head_mean(weights: np.ndarray, heads: Sequence[int] | None = None) -> np.ndarray:
    """A_l = (1/|S|) Σ_{h∈S} A_{l,h}: the mean over the heads S (all heads when `heads` is None) of (L, H, Tq, Tk)
    weights, as float64 (L, Tq, Tk). Rows still sum to 1; ValueError for an empty or out-of-range choice."""
    arr = np.asarray(weights, dtype=np.float64)
    if arr.ndim != 4:
        raise ValueError(f"expected (layers, heads, queries, keys) weights, got shape {arr.shape}")
    if heads is None:
        return arr.mean(axis=1)
    chosen = sorted(set(int(h) for h in heads))
    if not chosen:
        raise ValueError("choose at least one head")
    if chosen[0] < 0 or chosen[-1] >= arr.shape[1]:
        raise ValueError(f"heads {[h + 1 for h in chosen]} are not all among heads 1–{arr.shape[1]}")
    return arr[:, chosen].mean(axis=1)


def normalise_rows(a: np.ndarray) -> np.ndarray:
    """Each row divided by its sum (a row of zeros stays zeros)."""
    sums = a.sum(axis=-1, keepdims=True)
    return np.divide(a, sums, out=np.zeros_like(a), where=sums > 0)


def with_residual(attention: np.ndarray, residual: float = RESIDUAL) -> np.ndarray:
    """Ā = normalise_rows((1 − r)·A + r·I) for square (…, T, T) attention; r = 0.5 in the paper, r = 0 is raw A."""
    a = np.asarray(attention, dtype=np.float64)
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(f"a residual needs square self-attention, got shape {a.shape}")
    return normalise_rows((1.0 - residual) * a + residual * np.eye(a.shape[-1]))


def rollout(layers: np.ndarray, residual: float = RESIDUAL) -> np.ndarray:
    """The cumulative rollouts of (L, T, T) head-averaged self-attention: out[l] = R_{l+1} = Ā_{l+1}·…·Ā_1
    (0-based index, 1-based layer), Ā from `with_residual`. residual = 0: the raw product A_{l+1}·…·A_1.
    Every row of every out[l] sums to 1; out[-1] is the rollout through the whole stack."""
    a_bar = with_residual(layers, residual)
    out = np.empty_like(a_bar)
    current = np.eye(a_bar.shape[-1])
    for layer, a in enumerate(a_bar):
        current = out[layer] = a @ current
    return out


def cross_rollout(
    self_layers: np.ndarray, cross_layers: np.ndarray, encoder: np.ndarray, residual: float = RESIDUAL
) -> np.ndarray:
    """Rollout from the source tokens to each decoder position, through the encoder and the decoder's layers.

    A decoder position's state is a mixture of the decoder's input tokens (D, Tt × Tt) and the source tokens
    (X, Tt × Ts); D_0 = I, X_0 = 0. Decoder layer l has two residual sublayers. Self-attention S̄_l (with the
    residual, as `with_residual`) mixes decoder positions: D ← S̄_l·D, X ← S̄_l·X. Cross-attention C_l (Tt × Ts,
    head-averaged) reads the encoder's output, whose position k draws E[k, ·] from the source tokens
    (`encoder` = the encoder's rollout R_enc, Ts × Ts); the residual r keeps r of the state:
    D ← r·D, X ← r·X + (1 − r)·C_l·E. Rows of [D | X] sum to 1 after every layer, and every row of X sums to
    1 − r^l: the same share of every position comes from the source, so only how X splits it is news.

    Returns the cumulative maps like `rollout`: out[l] = X_{l+1} with rows renormalised to 1 (Tt × Ts): of what
    decoder position i draws from the source, the part from each source token. Raw (r = 0):
    out[l] = C_{l+1}·E, the layer's cross-attention seen through the encoder's raw rollout.
    """
    s_bar = with_residual(self_layers, residual)
    cross = np.asarray(cross_layers, dtype=np.float64)
    if cross.shape[:2] != s_bar.shape[:2]:
        raise ValueError(f"cross-attention {cross.shape} does not match decoder self-attention {s_bar.shape}")
    if encoder.shape != (cross.shape[-1], cross.shape[-1]):
        raise ValueError(f"encoder rollout {encoder.shape} does not match cross-attention {cross.shape}")
    x = np.zeros(cross.shape[1:])  # D is left out: only its row sums r^l enter X, and they do not change X's split
    out = np.empty_like(cross)
    for layer in range(len(cross)):
        x = residual * (s_bar[layer] @ x) + (1.0 - residual) * (cross[layer] @ encoder)
        out[layer] = normalise_rows(x)
    return out


@dataclass(frozen=True)
class Rollout:
    """The cumulative rollouts of one attention of one Analysis: maps[l] is through layers 1..l+1 (0-based)."""

    attention: str  # "encoder.self_attn", "decoder.self_attn" or "decoder.cross_attn"
    residual: bool  # with the paper's 0.5·I, else the raw product
    heads: tuple[int, ...] | None  # the heads averaged (0-based); None = all
    maps: np.ndarray  # (L, Tq, Tk) float32, rows sum to 1: rows output positions, columns input tokens
    query_pieces: tuple[str, ...]  # the output positions (rows)
    key_pieces: tuple[str, ...]  # the input tokens (columns)

    @property
    def n_layers(self) -> int:
        return int(self.maps.shape[0])


def analysis_rollout(
    analysis: Analysis, attention: str, residual: bool = True, heads: Sequence[int] | None = None
) -> Rollout:
    """The rollout of `attention` in `analysis`: `encoder.self_attn` or `decoder.self_attn` (the self-attention
    of that stack alone: rollout of its head-averaged sub-layers), or `decoder.cross_attn` (an encoder-decoder's
    decoder positions × source tokens: `cross_rollout` through the encoder's rollout). `heads`: the heads to
    average in every sub-layer used (0-based), None for all. KeyError for an attention the analysis lacks."""
    if attention not in ATTENTIONS:
        raise ValueError(f"no rollout for {attention!r}; choose one of {', '.join(ATTENTIONS)}")
    if attention not in analysis.attentions:
        raise KeyError(f"this {analysis.kind} model has no {analysis.attention_label(attention)}")
    r = RESIDUAL if residual else 0.0
    picked = None if heads is None else tuple(sorted(set(int(h) for h in heads)))
    sublayer = analysis.sublayer(attention, analysis.layers(attention)[0])
    if attention == "decoder.cross_attn":
        encoder = rollout(head_mean(analysis.stacked("encoder.self_attn"), picked), r)[-1]
        decoder = head_mean(analysis.stacked("decoder.self_attn"), picked)
        maps = cross_rollout(decoder, head_mean(analysis.stacked(attention), picked), encoder, r)
    else:
        maps = rollout(head_mean(analysis.stacked(attention), picked), r)
    return Rollout(attention, residual, picked, maps.astype(np.float32), sublayer.query_pieces, sublayer.key_pieces)
