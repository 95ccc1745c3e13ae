"""Scaled dot-product multi-head attention that *returns* what it computed (section 3.2), and the masks it obeys.

Masks are boolean, True = may attend. The attention returns `(output, record)`: the record holds the mask, the
keys and values (which are also the cache an incremental decoder carries to its next step) and, unless the
fused path was asked for, the scores before the mask and the weights after softmax.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """(B, T) token ids → (B, T) booleans, True at real tokens and False at padding."""
    return ids != pad_id


def subsequent_mask(size: int, device: torch.device | None = None) -> Tensor:
    """The no-peek mask: (size, size) booleans, True on and below the diagonal (query i sees keys ≤ i)."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def attention_mask(query_valid: Tensor, key_valid: Tensor, causal: bool = False, query_offset: int = 0) -> Tensor:
    """Combine padding of queries and keys (and optionally the no-peek rule) into (B, Tq, Tk) booleans.

    A padding query gets an all-False row: nothing is drawn for it and its weights are all zero.
    `query_offset` is the position of the first query among the keys (non-zero when decoding with a cache).
    """
    mask = query_valid.unsqueeze(2) & key_valid.unsqueeze(1)  # (B, Tq, Tk)
    if causal:
        tq, tk = mask.shape[1], mask.shape[2]
        no_peek = subsequent_mask(tk, mask.device)[query_offset : query_offset + tq]  # (Tq, Tk)
        mask = mask & no_peek
    return mask


def rotary_table(positions: Tensor, d_head: int, base: float = 10000.0) -> Tensor:
    """RoPE (Su et al. 2021, "RoFormer", eq. 34): position m turns feature pair i by the angle m·θ_i,
    θ_i = base^(-2i/d_head). Returns (T, d_head) rows [cos(m·θ) | sin(m·θ)], d_head/2 of each, float32.

    The pairs are (x_i, x_{i + d_head/2}), the layout of Llama's Hugging Face weights (`rotate_half`)."""
    if d_head % 2:
        raise ValueError(f"rotary positions need an even d_head, got {d_head}")
    theta = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)  # (d_head/2,)
    angle = positions.to(torch.float64).unsqueeze(1) * theta  # (T, d_head/2)
    return torch.cat([angle.cos(), angle.sin()], dim=-1).float()  # (T, d_head)


def rotate(x: Tensor, rows: Tensor) -> Tensor:
    """Rotate each feature pair (x_i, x_{i+d/2}) of `x` (B, H, T, d_head) by its row of `rows` (T, d_head):
    the scores q_m·k_n of rotated vectors then depend on the positions only through m - n."""
    half = x.shape[-1] // 2
    cos, sin = rows[:, :half], rows[:, half:]  # (T, d_head/2) each
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last axis where `mask` is True; masked weights are exactly 0, empty rows all 0.

    Masked cells are filled with -inf before the softmax (not -1e20 as some tutorials do, which leaks weight
    when every cell is masked); rows with no allowed key are zeroed instead of turning into NaN.
    """
    any_allowed = mask.any(dim=-1, keepdim=True)
    filled = scores.masked_fill(~mask, float("-inf"))
    filled = torch.where(any_allowed, filled, torch.zeros_like(filled))
    weights = torch.softmax(filled, dim=-1)
    return weights.masked_fill(~mask, 0.0)


@dataclass(frozen=True)
class AttentionRecord:
    """What one attention block computed for one batch.

    mask:    (B, Tq, Tk) booleans applied to every head, True = may attend.
    keys, values: (B, H, Tk, d_head) the projected K and V each query head read, every key so far (with
             grouped-query attention the heads of one group read the same key/value head: ModelConfig.kv_head).
    scores:  (B, H, Tq, Tk) QKᵀ/√d_head *before* the mask; None on the fused path (record=False).
    weights: (B, H, Tq, Tk) softmax of the masked scores, masked cells exactly 0; None on the fused path.
    """

    mask: Tensor
    keys: Tensor
    values: Tensor
    scores: Tensor | None = None
    weights: Tensor | None = None

    def select(self, rows: Tensor) -> AttentionRecord:
        """The same record for batch rows `rows` (beam search keeps its surviving hypotheses)."""
        pick = lambda t: None if t is None else t.index_select(0, rows)
        return AttentionRecord(*(pick(t) for t in (self.mask, self.keys, self.values, self.scores, self.weights)))


@dataclass(frozen=True)
class Ablation:
    """Heads of one attention block switched off: their outputs (softmax(QKᵀ/√d_k)V of each head, before the
    heads are concatenated and projected by W^O) become zeros, or, with mode "mean", each head's mean over the
    real query positions of the pass. The recorded weights stay what the head computed: only its output is cut.
    An argument of the forward pass, never state on the model."""

    heads: tuple[int, ...]
    mode: str = "zero"

    def __post_init__(self) -> None:
        if self.mode not in ("zero", "mean"):
            raise ValueError(f"ablation mode must be 'zero' or 'mean', got {self.mode!r}")

    def apply(self, heads: Tensor, query_valid: Tensor) -> Tensor:
        """`heads` (B, H, Tq, d_head) with the chosen heads replaced; `query_valid` (B, Tq) marks real queries."""
        if not self.heads:
            return heads
        if not all(0 <= h < heads.shape[1] for h in self.heads):
            raise ValueError(f"heads {self.heads} outside 0..{heads.shape[1] - 1}")
        out = heads.clone()
        chosen = list(self.heads)
        if self.mode == "zero":
            out[:, chosen] = 0.0
        else:
            w = query_valid[:, None, :, None].to(heads.dtype)  # (B, 1, Tq, 1)
            mean = (heads[:, chosen] * w).sum(dim=2, keepdim=True) / w.sum(dim=2, keepdim=True).clamp(min=1.0)
            out[:, chosen] = mean.expand(-1, -1, heads.shape[2], -1)
        return out


class MultiHeadedAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = softmax(Q W_i^Q (K W_i^K)ᵀ / √d_k) V W_i^V.

    `record=True` computes every step explicitly so that the scores and weights exist to be shown;
    `record=False` calls the fused `scaled_dot_product_attention` kernel (as x-transformers' `flash=True`),
    which gives the same output (tests/test_attention.py) without materialising the weights.
    """

    def __init__(
        self, n_heads: int, d_model: int, dropout: float = 0.1, n_kv_heads: int | None = None, bias: bool = True
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        self.d_head = d_model // n_heads
        d_kv = self.n_kv_heads * self.d_head
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_kv, bias=bias)
        self.w_v = nn.Linear(d_model, d_kv, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def split_heads(self, x: Tensor) -> Tensor:
        b, t, width = x.shape
        return x.view(b, t, width // self.d_head, self.d_head).transpose(1, 2)  # (B, H or H_kv, T, d_head)

    def new_keys_values(self, key_value: Tensor, rotary: Tensor | None) -> tuple[Tensor, Tensor]:
        """K and V of `key_value` (B, Tk, d_model) for every query head: (B, H, Tk, d_head) each.

        Grouped-query attention projects only n_kv_heads keys and values; query head h reads key/value head
        h // (n_heads // n_kv_heads), so each is repeated for its group (as Llama's `repeat_kv`).
        """
        k, v = self.split_heads(self.w_k(key_value)), self.split_heads(self.w_v(key_value))  # (B, H_kv, Tk, d_head)
        if rotary is not None:
            k = rotate(k, rotary)
        group = self.n_heads // self.n_kv_heads
        return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, H, Tk, d_head)

    def forward(
        self,
        query: Tensor,
        key_value: Tensor | None,
        mask: Tensor,
        past: AttentionRecord | None = None,
        record: bool = True,
        ablate: Ablation | None = None,
        rotary: Tensor | None = None,
    ) -> tuple[Tensor, AttentionRecord]:
        """Attend from `query` (B, Tq, d_model) to `key_value` (B, Tk, d_model) under `mask` (B, Tq, Tk).
        `ablate`: heads whose output is switched off (see Ablation). `rotary`: (Tq, d_head) rotation rows of the
        new positions (rotary_table), applied to queries and new keys of self-attention; None for added positions.

        With `past` (this block's record from the previous decoding step) its keys and values come first;
        with `key_value=None` they are used as they are (cross-attention to an encoder memory projected once).
        """
        q = self.split_heads(self.w_q(query))  # (B, H, Tq, d_head)
        if rotary is not None:
            q = rotate(q, rotary)
        if key_value is None:
            if past is None:
                raise ValueError("key_value=None needs the past record's keys and values")
            k, v = past.keys, past.values
        else:
            k, v = self.new_keys_values(key_value, rotary)  # (B, H, Tk, d_head)
            if past is not None:
                k, v = torch.cat([past.keys, k], dim=2), torch.cat([past.values, v], dim=2)
        if mask.shape != (q.shape[0], q.shape[2], k.shape[2]):
            raise ValueError(
                f"mask shape {tuple(mask.shape)} does not match (B, Tq, Tk) = {(q.shape[0], q.shape[2], k.shape[2])}"
            )
        scores = weights = None
        if record:
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, Tq, Tk)
            weights = masked_softmax(scores, mask.unsqueeze(1))  # (B, H, Tq, Tk)
            heads = self.dropout(weights) @ v  # (B, H, Tq, d_head)
        else:
            heads = self.fused(q, k, v, mask)
        if ablate is not None:
            heads = ablate.apply(heads, mask.any(dim=-1))
        b, _, tq, _ = heads.shape
        out = self.w_o(heads.transpose(1, 2).reshape(b, tq, self.n_heads * self.d_head))  # (B, Tq, d_model)
        return out, AttentionRecord(mask, k, v, scores, weights)

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
        """softmax(QKᵀ/√d_k)V by the fused kernel; a query with no allowed key gets 0, as `masked_softmax` gives."""
        any_allowed = mask.any(dim=-1, keepdim=True)  # (B, Tq, 1)
        allowed = (mask | ~any_allowed).unsqueeze(1)  # (B, 1, Tq, Tk): an empty row would be NaN in the kernel
        p = self.dropout.p if self.training else 0.0
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)  # (B, H, Tq, d_head)
        return heads.masked_fill(~any_allowed.unsqueeze(1), 0.0)
