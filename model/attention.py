"""Multi-head scaled dot-product attention that *returns* what it computed (section 3.2 of the paper)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from model.functional import masked_softmax

KV = tuple[Tensor, Tensor]


@dataclass(frozen=True)
class AttentionRecord:
    """What one attention block computed for one batch.

    scores:  (B, H, Tq, Tk) QKᵀ/√d_head *before* the mask.
    mask:    (B, Tq, Tk) booleans applied to every head, True = may attend.
    weights: (B, H, Tq, Tk) softmax of the masked scores; masked cells exactly 0.
    queries, keys, values: (B, H, T, d_head) the projected Q, K and V of each head.
    """

    scores: Tensor
    mask: Tensor
    weights: Tensor
    queries: Tensor
    keys: Tensor
    values: Tensor


class MultiHeadedAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = softmax(Q W_i^Q (K W_i^K)ᵀ / √d_k) V W_i^V.

    Computed explicitly, not with a fused kernel, so the weights exist to be shown. `forward` returns
    `(output, record, (keys, values))`; the keys and values are the cache for incremental decoding.
    """

    def __init__(self, n_heads: int, d_model: int, dropout: float = 0.1) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def split_heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, T, d_head)

    def project_kv(self, x: Tensor) -> KV:
        """Keys and values of a (B, Tk, d_model) input, each (B, H, Tk, d_head)."""
        return self.split_heads(self.w_k(x)), self.split_heads(self.w_v(x))

    def forward(
        self,
        query: Tensor,
        key_value: Tensor | None,
        mask: Tensor,
        past: KV | None = None,
        record: bool = True,
    ) -> tuple[Tensor, AttentionRecord | None, KV]:
        """Attend from `query` (B, Tq, d_model) to `key_value` (B, Tk, d_model) under `mask` (B, Tq, Tk).

        With `past`, its keys and values come first; with `key_value=None`, `past` is used as it is (the
        encoder memory of cross-attention, projected once).
        """
        q = self.split_heads(self.w_q(query))  # (B, H, Tq, d_head)
        if key_value is None:
            if past is None:
                raise ValueError("key_value=None needs past keys and values")
            k, v = past
        else:
            k, v = self.project_kv(key_value)  # (B, H, Tk_new, d_head)
            if past is not None:
                k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        if mask.shape != (q.shape[0], q.shape[2], k.shape[2]):
            raise ValueError(
                f"mask shape {tuple(mask.shape)} does not match (B, Tq, Tk) = {(q.shape[0], q.shape[2], k.shape[2])}"
            )
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, Tq, Tk)
        weights = masked_softmax(scores, mask.unsqueeze(1))  # (B, H, Tq, Tk)
        heads = self.dropout(weights) @ v  # (B, H, Tq, d_head)
        b, _, tq, _ = heads.shape
        out = self.w_o(heads.transpose(1, 2).reshape(b, tq, self.n_heads * self.d_head))  # (B, Tq, d_model)
        rec = AttentionRecord(scores, mask, weights, q, k, v) if record else None
        return out, rec, (k, v)
