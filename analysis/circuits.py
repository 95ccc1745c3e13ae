"""How attention heads compose, read from the weights alone (Elhage et al. 2021, "A Mathematical Framework for
Transformer Circuits", section "Virtual attention heads").

A head h reads the residual stream through its QK matrix W_QK^h = W_Q^h W_K^hᵀ (which tokens it attends to) and
writes through its OV matrix W_OV^h = W_V^h W_O^h (what it moves), both d_model × d_model, row vectors on the left
as TransformerLens writes them. A later head composes with an earlier one when it reads what the earlier one wrote:

    Q-composition   ‖W_OV^early · W_QK^late‖_F   / (‖W_OV^early‖_F ‖W_QK^late‖_F)    its queries
    K-composition   ‖W_OV^early · W_QK^lateᵀ‖_F  / (‖W_OV^early‖_F ‖W_QK^late‖_F)    its keys
    V-composition   ‖W_OV^early · W_OV^late‖_F   / (‖W_OV^early‖_F ‖W_OV^late‖_F)    its values

each between 0 and 1 (TransformerLens's `utils.composition_scores` on the same matrices). An induction head is a
K-composition: its keys read what a previous-token head wrote, so it finds the token after an earlier copy.

Computed in factored form, never building a d_model × d_model matrix: with A, C (d_model × d_head) and B, D (d_head
× d_model), ‖A B C D‖_F = ‖R_A B · C R_Dᵀ‖_F, R_A and R_D the d_head × d_head triangles of the QR factorisations
A = Q R_A and Dᵀ = Q' R_D (Q's orthonormal columns keep every norm). Each pair then costs one d_head × d_model by
d_model × d_head product, and every later head's goes into one matrix product per earlier head.

In a pre-norm model each head reads the stream through its layer's norm, whose gain is folded into its W_Q, W_K and
W_V (as TransformerLens's `fold_ln`); every bias is left out, as there. The LayerNorm's centring is folded into the
writing matrices W_O always (nothing reads the mean a later LayerNorm subtracts) and into the reading matrices with
`centre=True`, as `fold_ln` does. `baseline` gives each mode's mean score over heads of the same shapes with random
weights: a score near it is what chance gives. A post-norm model's heads read the stream after the previous layer's
norm: no gain is folded. Rotary positions turn queries and keys by position and are left out (the scores compare
the unturned projections); a grouped-query head uses its group's W_K and W_V.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from model.names import STACKS

MODES = ("Q", "K", "V")
MODE_NAMES = {"Q": "Q-composition (queries)", "K": "K-composition (keys)", "V": "V-composition (values)"}


@dataclass(frozen=True)
class HeadMatrices:
    """Every self-attention head of one stack, as (N, …) float64 arrays, N = layers × heads in layer order."""

    w_q: np.ndarray  # (N, d_model, d_head)
    w_k: np.ndarray  # (N, d_model, d_head)
    w_v: np.ndarray  # (N, d_model, d_head)
    w_o: np.ndarray  # (N, d_head, d_model)
    stack: str
    n_layers: int
    n_heads: int


@dataclass(frozen=True)
class Composition:
    """Composition scores of one stack's self-attention heads.

    scores: mode ("Q", "K", "V") → (L, H, L, H) float64, [earlier layer, earlier head, later layer, later head],
            counted from 0; NaN unless the later layer comes after the earlier one (a head reads only what earlier
            layers wrote).
    """

    stack: str
    n_layers: int
    n_heads: int
    scores: dict[str, np.ndarray]

    def top_sources(self, mode: str, layer: int, head: int, k: int = 3) -> list[tuple[int, int, float]]:
        """The `k` earlier heads that head (`layer`, `head`) composes with most: (layer, head, score), 0-based."""
        scores = self.scores[mode][:, :, layer, head]
        order = np.argsort(np.nan_to_num(-scores, nan=np.inf), axis=None)[:k]
        return [(int(i // self.n_heads), int(i % self.n_heads), float(scores.flat[i])) for i in order]


def _reading(linear: nn.Linear, heads: int, gain: torch.Tensor, centre: bool = False) -> torch.Tensor:
    """A projection that reads the stream (W_Q, W_K or W_V), per head: (heads, d_model, d_head), `gain` folded in
    (y = x Wᵀ, so the matrix of x ↦ y is Wᵀ); `centre`: each column's mean over d_model taken out, as
    TransformerLens's fold_ln does for a LayerNorm, whose output has mean 0 (nothing reads the all-ones
    direction)."""
    d_model = linear.weight.shape[1]
    w = gain[None, :, None] * linear.weight.detach().double().reshape(heads, -1, d_model).transpose(1, 2)
    return w - w.mean(dim=1, keepdim=True) if centre else w


def head_matrices(model: nn.Module, stack: str | None = None, centre: bool = False) -> HeadMatrices:
    """The W_Q, W_K, W_V and W_O of every self-attention head of `stack` (default: the model's first: the decoder
    of a language model, the encoder otherwise), the pre-norm gain folded in; `centre`: the reading matrices
    centred too where a head reads through a LayerNorm (fold_ln; an RMSNorm or a post-norm model: no change)."""
    config = model.config
    stack = stack or config.first_stack
    if stack not in STACKS or getattr(model, stack, None) is None:
        raise ValueError(f"this {config.kind} model has no {stack} stack")
    layers = getattr(model, stack).layers
    n_heads, d_head = config.n_heads, config.d_head
    centred = config.norm == "pre" and isinstance(layers[0].sublayer[0].norm, nn.LayerNorm)
    parts: dict[str, list[np.ndarray]] = {"w_q": [], "w_k": [], "w_v": [], "w_o": []}
    with torch.no_grad():
        for layer in layers:
            attn = layer.self_attn
            norm = layer.sublayer[0]
            gain = torch.ones(config.d_model, dtype=torch.float64, device=attn.w_q.weight.device)
            if norm.pre_norm and getattr(norm.norm, "weight", None) is not None:
                gain = norm.norm.weight.detach().double()
            kv_heads = getattr(attn, "n_kv_heads", n_heads)  # grouped-query: a key/value head per group
            group = n_heads // kv_heads
            c = centre and centred
            parts["w_q"].append(_reading(attn.w_q, n_heads, gain, c).cpu().numpy())
            parts["w_k"].append(_reading(attn.w_k, kv_heads, gain, c).repeat_interleave(group, dim=0).cpu().numpy())
            parts["w_v"].append(_reading(attn.w_v, kv_heads, gain, c).repeat_interleave(group, dim=0).cpu().numpy())
            w_o = attn.w_o.weight.detach().double()  # (d_model, H·d_head): out = heads W_Oᵀ
            if centred:  # what a later LayerNorm subtracts (each output's mean over d_model) no head reads
                w_o = w_o - w_o.mean(dim=0, keepdim=True)
            parts["w_o"].append(w_o.T.reshape(n_heads, d_head, config.d_model).cpu().numpy())
    arrays = {name: np.concatenate(chunks) for name, chunks in parts.items()}
    return HeadMatrices(**arrays, stack=stack, n_layers=len(layers), n_heads=n_heads)


def _shrunk(factor: np.ndarray) -> np.ndarray:
    """R of each (…, d_model, d_head) factor X = Q R: ‖M Xᵀ‖_F = ‖M Rᵀ‖_F for any M, as Q's columns are
    orthonormal. (…, d_head, d_head)."""
    # torch's batched QR: a stack of hundreds of heads' factors in one call
    return torch.linalg.qr(torch.from_numpy(np.ascontiguousarray(factor)), mode="r")[1].numpy()


def composition(model: nn.Module, stack: str | None = None, centre: bool = False) -> Composition:
    """Q-, K- and V-composition of every later self-attention head of `stack` with every earlier one; `centre`:
    the reading matrices centred as fold_ln does (head_matrices)."""
    return composition_of(head_matrices(model, stack, centre))


def random_like(m: HeadMatrices, seed: int) -> HeadMatrices:
    """Matrices of `m`'s shapes drawn from a standard normal (numpy, `seed`): heads that compose by chance only.
    Each score divides by the matrices' norms, so the scale of the draw does not matter."""
    rng = np.random.default_rng(seed)
    drawn = {name: rng.standard_normal(getattr(m, name).shape) for name in ("w_q", "w_k", "w_v", "w_o")}
    return HeadMatrices(**drawn, stack=m.stack, n_layers=m.n_layers, n_heads=m.n_heads)


def baseline(model: nn.Module, seed: int, stack: str | None = None) -> dict[str, float]:
    """Each mode's mean score over every pair of heads of a model of `model`'s shapes with random weights
    (`random_like`, seeded): what a score is by chance, to read the model's own against (Elhage et al. compare
    with the same)."""
    scores = composition_of(random_like(head_matrices(model, stack), seed)).scores
    return {mode: float(np.nanmean(s)) for mode, s in scores.items()}


GRAM_BYTES = 2**29  # the packed Gram matrices of every head's writing side (float64) stay within 512 MiB
LATE_CHUNK = 64  # later heads whose Gram matrices are built and scored together


def _packed(gram: np.ndarray, doubled: bool = False) -> np.ndarray:
    """(n, d, d) symmetric matrices → (n, d(d+1)/2): the upper triangle; `doubled`: its off-diagonal cells twice,
    so that the dot product of a doubled row with a plain one is Σ_ab G_ab H_ab = ⟨G, H⟩."""
    rows, cols = np.triu_indices(gram.shape[-1])
    packed = gram[:, rows, cols]
    return packed * np.where(rows == cols, 1.0, 2.0) if doubled else packed


def gram_fits(m: HeadMatrices) -> bool:
    """Whether composition_of scores `m` by Gram matrices: every head's packed d_model × d_model one within
    GRAM_BYTES (else pair by pair, in d_head × d_head products)."""
    n, d_model = m.n_layers * m.n_heads, m.w_o.shape[2]
    return n * d_model * (d_model + 1) // 2 * 8 <= GRAM_BYTES


def composition_of(m: HeadMatrices, gram: bool | None = None) -> Composition:
    """Q-, K- and V-composition of the heads whose matrices are `m`. `gram` (None: gram_fits): ‖E F‖²_F =
    ⟨EᵀE, F Fᵀ⟩, every pair of heads one dot product of two packed d_model × d_model Gram matrices (d_model² / 2
    multiplications against d_head² · d_model for E F itself), in one matrix product; False: pair by pair. Equal
    within float64 rounding (tests/test_circuits.py)."""
    n, layers, heads = m.n_layers * m.n_heads, m.n_layers, m.n_heads
    # the earlier head's OV = A B (A = W_V, B = W_O), shrunk to E = R_A B: ‖E M‖_F = ‖A B M‖_F
    early = _shrunk(m.w_v) @ m.w_o  # (N, dh, d_model)
    early_norm = np.linalg.norm(early, axis=(1, 2))  # ‖W_OV‖_F
    # the later head's right factor C D per mode, given as C and Dᵀ (both d_model × d_head)
    right = {
        "Q": (m.w_q, m.w_k),  # QK = W_Q W_Kᵀ
        "K": (m.w_k, m.w_q),  # QKᵀ = W_K W_Qᵀ
        "V": (m.w_v, np.swapaxes(m.w_o, 1, 2)),  # OV = W_V W_O
    }
    use_gram = gram_fits(m) if gram is None else gram
    written = _grams(early) if use_gram else None  # (N, d_model(d_model+1)/2): EᵀE of every head, packed
    later = np.arange(n)[None, :] // heads > np.arange(n)[:, None] // heads  # (N, N): j in a later layer than i
    scores = {}
    for mode, (c, d_t) in right.items():
        late = c @ np.swapaxes(_shrunk(d_t), 1, 2)  # (N, d_model, dh): F = C R_Dᵀ, ‖M F‖_F = ‖M C D‖_F
        late_norm = np.linalg.norm(late, axis=(1, 2))
        squared = _by_gram(written, late) if written is not None else _by_pairs(early, late, heads)
        out = np.sqrt(np.clip(squared, 0.0, None)) / (early_norm[:, None] * late_norm[None, :])
        scores[mode] = np.where(later, out, np.nan).reshape(layers, heads, layers, heads)
    return Composition(m.stack, layers, heads, scores)


def _grams(early: np.ndarray) -> np.ndarray:
    """(N, dh, d_model) → (N, d_model(d_model+1)/2): each EᵀE packed (doubled), built LATE_CHUNK heads at a time."""
    parts = np.array_split(early, -(-len(early) // LATE_CHUNK))
    chunks = [_packed(np.swapaxes(e, 1, 2) @ e, doubled=True) for e in parts]
    return np.concatenate(chunks)


def _by_gram(written: np.ndarray, late: np.ndarray) -> np.ndarray:
    """(N, N) ‖E_i F_j‖²_F = ⟨E_iᵀE_i, F_j F_jᵀ⟩ for every pair, LATE_CHUNK later heads a matrix product."""
    out = np.empty((written.shape[0], late.shape[0]))
    for first in range(0, late.shape[0], LATE_CHUNK):
        f = late[first : first + LATE_CHUNK]  # (chunk, d_model, dh)
        out[:, first : first + len(f)] = written @ _packed(f @ np.swapaxes(f, 1, 2)).T
    return out


def _by_pairs(early: np.ndarray, late: np.ndarray, heads: int) -> np.ndarray:
    """(N, N) ‖E_i F_j‖²_F for j in a later layer than i (NaN elsewhere), a d_head × d_head product a pair."""
    n, d_model, d_head = late.shape
    beside = np.ascontiguousarray(np.swapaxes(late, 0, 1)).reshape(d_model, n * d_head)  # every F side by side
    out = np.full((n, n), np.nan)
    for i in range(n - heads):  # the last layer's heads have no later head
        first = (i // heads + 1) * heads  # heads in layer order: every head from here on is in a later layer
        ef = (early[i] @ beside[:, first * d_head :]).reshape(d_head, -1, d_head)  # (dh, n_later, dh): E F_j
        out[i, first:] = np.einsum("ajb,ajb->j", ef, ef)  # ‖E F_j‖²_F = ‖W_OV W_late‖²_F
    return out
