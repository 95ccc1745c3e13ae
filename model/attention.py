"""Scaled dot-product multi-head attention that *returns* what it computed (section 3.2), and the masks it obeys.

Masks are boolean, True = may attend. The attention returns `(output, record)`: the record holds the mask, the
keys and values (which are also the cache an incremental decoder carries to its next step) and, unless the
fused path was asked for, the scores before the mask and the weights after softmax.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

Linear = Callable[[int, int], nn.Module]  # (d_in, d_out) → a projection x W + b


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
    """What one attention sub-layer computed for one batch.

    mask:    (B, Tq, Tk) booleans applied to every head, True = may attend.
    keys, values: (B, H, Tk, d_head) the projected K and V each query head read, every key so far (a variant
             may let the heads of a group read the same ones: model.components.grouped_query).
    scores:  (B, H, Tq, Tk) QKᵀ/√d_head *before* the mask; None on the fused path (record=False).
    weights: (B, H, Tq, Tk) softmax of the masked scores, masked cells exactly 0; None on the fused path.
    queries: (B, H, Tq, d_head) the projected Q of this pass's positions (after rotary, where the model turns them),
             the vectors the scores dot with the keys; None on the fused path.
    """

    mask: Tensor
    keys: Tensor
    values: Tensor
    scores: Tensor | None = None
    weights: Tensor | None = None
    queries: Tensor | None = None

    def select(self, rows: Tensor) -> AttentionRecord:
        """The same record for batch rows `rows` (beam search keeps its surviving hypotheses)."""
        pick = lambda t: None if t is None else t.index_select(0, rows)
        return AttentionRecord(
            *(pick(t) for t in (self.mask, self.keys, self.values, self.scores, self.weights, self.queries))
        )


@dataclass(frozen=True)
class Ablation:
    """Heads of one attention sub-layer switched off: their outputs (softmax(QKᵀ/√d_k)V of each head, before the
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


@dataclass(frozen=True)
class Patch:
    """Activations replaced in a forward pass: `values` written where `where` is True (activation patching: a
    run's activations put into another run), or with `added` added there (a zero tensor that needs a gradient
    then measures how the output depends on the activation: attribution patching). For a sub-layer's head outputs
    (in place of an Ablation) `values` is (B, H, Tq, d_head) and `where` (B, H), each head at every position; for
    a layer's input, the residual stream (`decoder.layers.{i}.resid_pre`, `encoder.layers.{i}.resid_pre`), (B, T,
    d_model) and (B, T).
    An argument of the forward pass, never state on the model."""

    values: Tensor
    where: Tensor
    added: bool = False

    def apply(self, x: Tensor, query_valid: Tensor | None = None) -> Tensor:
        """`x` with the patch applied (`query_valid`: unused, as an Ablation's apply takes it)."""
        where = self.where.reshape(*self.where.shape, *([1] * (x.dim() - self.where.dim())))
        if self.added:
            return x + where.to(x.dtype) * self.values.to(x.dtype)
        return torch.where(where, self.values.to(x.dtype), x)


class MultiHeadedAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = softmax(Q W_i^Q (K W_i^K)ᵀ / √d_k) V W_i^V.

    `record=True` computes every step explicitly so that the scores and weights exist to be shown;
    `record=False` calls the fused `scaled_dot_product_attention` kernel (as x-transformers' `flash=True`),
    which gives the same output (tests/test_attention.py) without materialising the weights.
    `linear(d_in, d_out)` makes each projection (nn.Linear: with biases, as in the paper).
    """

    def __init__(self, n_heads: int, d_model: int, dropout: float = 0.1, linear: Linear = nn.Linear) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.w_q = linear(d_model, d_model)
        self.w_k = linear(d_model, d_model)
        self.w_v = linear(d_model, d_model)
        self.w_o = linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def split_heads(self, x: Tensor) -> Tensor:
        b, t, width = x.shape
        return x.view(b, t, width // self.d_head, self.d_head).transpose(1, 2)  # (B, heads, T, d_head)

    def queries(self, query: Tensor, start: int) -> Tensor:
        """Q = query W^Q of `query` (B, Tq, d_model), split into heads: (B, H, Tq, d_head). `start` is the position
        of the first query: the paper's attention needs none (its positions are added to the embeddings)."""
        return self.split_heads(self.w_q(query))

    def new_keys_values(self, key_value: Tensor, start: int) -> tuple[Tensor, Tensor]:
        """K = key_value W^K and V = key_value W^V of `key_value` (B, Tk, d_model), split into heads:
        (B, H, Tk, d_head) each. `start` is the position of the first key, as in `queries`."""
        return self.split_heads(self.w_k(key_value)), self.split_heads(self.w_v(key_value))

    def forward(
        self,
        query: Tensor,
        key_value: Tensor | None,
        mask: Tensor,
        past: AttentionRecord | None = None,
        record: bool = True,
        ablate: Ablation | Patch | None = None,
    ) -> tuple[Tensor, AttentionRecord]:
        """Attend from `query` (B, Tq, d_model) to `key_value` (B, Tk, d_model) under `mask` (B, Tq, Tk).
        `ablate`: heads whose output is switched off (see Ablation) or patched (see Patch).

        With `past` (this sub-layer's record from the previous decoding step) its keys and values come first, and
        the new tokens' positions start after them; with `key_value=None` the past's keys and values are used
        as they are (cross-attention to an encoder memory projected once).
        """
        start = 0 if past is None else past.keys.shape[2]  # the position of the first new token
        q = self.queries(query, start)  # (B, H, Tq, d_head)
        if key_value is None:
            if past is None:
                raise ValueError("key_value=None needs the past record's keys and values")
            k, v = past.keys, past.values
        else:
            k, v = self.new_keys_values(key_value, start)  # (B, H, Tk_new, d_head)
            if past is not None:
                k, v = torch.cat([past.keys, k], dim=2), torch.cat([past.values, v], dim=2)  # (B, H, Tk, d_head)
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
        return out, AttentionRecord(mask, k, v, scores, weights, q if record else None)

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
        """softmax(QKᵀ/√d_k)V by the fused kernel; a query with no allowed key gets 0, as `masked_softmax` gives."""
        any_allowed = mask.any(dim=-1, keepdim=True)  # (B, Tq, 1)
        allowed = (mask | ~any_allowed).unsqueeze(1)  # (B, 1, Tq, Tk): an empty row would be NaN in the kernel
        p = self.dropout.p if self.training else 0.0
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)  # (B, H, Tq, d_head)
        return heads.masked_fill(~any_allowed.unsqueeze(1), 0.0)
