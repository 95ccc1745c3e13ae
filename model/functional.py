"""Pure functions of the paper: the sinusoidal table and the two masks. Masks are boolean, True = may attend."""

from __future__ import annotations

import torch
from torch import Tensor


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    Section 3.5 of "Attention Is All You Need". Returns a float32 tensor of shape (max_len, d_model).
    """
    if d_model % 2:
        raise ValueError(f"the sinusoidal table needs an even d_model, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d_model/2,)
    angle = position / torch.pow(10000.0, two_i / d_model)  # (T, d_model/2)
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.float()


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
        q_pos = torch.arange(tq, device=mask.device).unsqueeze(1) + query_offset  # (Tq, 1)
        k_pos = torch.arange(tk, device=mask.device).unsqueeze(0)  # (1, Tk)
        mask = mask & (k_pos <= q_pos)
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
