"""Rotary positions (Su et al. 2021, "RoFormer"): nothing is added to the embeddings; each self-attention turns
its queries and keys by their positions, so that a score depends on how far apart two tokens are."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from model.attention import Linear
from model.components.grouped_query import GroupedQueryAttention


def rotary_table(positions: Tensor, d_head: int, base: float = 10000.0) -> Tensor:
    """RoPE (RoFormer, eq. 34): position m turns feature pair i by the angle m·θ_i, θ_i = base^(-2i/d_head).
    Returns (T, d_head) rows [cos(m·θ) | sin(m·θ)], d_head/2 of each, float32.

    The pairs are (x_i, x_{i + d_head/2}), the layout of Llama's Hugging Face weights (`rotate_half`)."""
    if d_head % 2:
        raise ValueError(f"rotary positions need an even d_head, got {d_head}")
    theta = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)  # (d_head/2,)
    angle = positions.to(torch.float64).unsqueeze(1) * theta  # (T, d_head/2)
    return torch.cat([angle.cos(), angle.sin()], dim=-1).float()  # (T, d_head)


def rotate(x: Tensor, rows: Tensor) -> Tensor:
    """Rotate each feature pair (x_i, x_{i+d/2}) of `x` (B, H, T, d_head) by its row of `rows` (T, d): the scores
    q_m·k_n of rotated vectors then depend on the positions only through m - n. With d < d_head (GPT-NeoX's
    partial rotary) only the first d features turn, paired within them; the rest pass unchanged."""
    d = rows.shape[-1]
    half = d // 2
    cos, sin = rows[:, :half], rows[:, half:]  # (T, d/2) each
    x1, x2, rest = x[..., :half], x[..., half:d], x[..., d:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def _rows(table: Tensor, start: int, length: int) -> Tensor:
    if start + length > table.shape[0]:
        raise ValueError(f"sequence of {start + length} positions exceeds max_len={table.shape[0]}")
    return table[start : start + length]  # (T, d_head)


class RotaryPositions(nn.Module):
    """The positions part of a rotary model: it adds nothing to the embeddings. The rows a sequence uses are
    still given, for the trace: the (cos | sin) of each position's angles, d_head wide."""

    def __init__(self, max_len: int, d_head: int, base: float) -> None:
        super().__init__()
        self.max_len = max_len  # a buffer, rebuilt from the formula, never saved with the weights
        self.register_buffer("table", rotary_table(torch.arange(max_len), d_head, base), persistent=False)

    def rows(self, offset: int, length: int) -> Tensor:
        return _rows(self.table, offset, length)

    def forward(self, x: Tensor, offset: int = 0) -> tuple[Tensor, Tensor]:
        """`x` (B, T, d_model) unchanged, and the rotations of positions offset … offset + T - 1 (T, d_head)."""
        return x, self.rows(offset, x.shape[1])


class RotaryAttention(GroupedQueryAttention):
    """Self-attention that turns its queries and new keys by their positions, from its own table: the first new
    token's position is the number of keys the past record holds. (Its keys are stored turned, so a past's are
    not turned again.) Grouped-query attention with n_kv_heads == n_heads is the paper's full set of heads;
    `rotary_dims` < d_head turns only that many leading features of each head (GPT-NeoX's rotary_pct)."""

    def __init__(
        self,
        n_heads: int,
        d_model: int,
        dropout: float,
        n_kv_heads: int,
        max_len: int,
        base: float,
        linear: Linear = nn.Linear,
        rotary_dims: int | None = None,
    ) -> None:
        super().__init__(n_heads, d_model, dropout, n_kv_heads, linear)
        dims = rotary_dims or self.d_head  # fewer: only the first `rotary_dims` features of each head turn
        self.register_buffer("table", rotary_table(torch.arange(max_len), dims, base), persistent=False)

    def queries(self, query: Tensor, start: int) -> Tensor:
        q = super().queries(query, start)  # (B, H, Tq, d_head)
        return rotate(q, _rows(self.table, start, q.shape[2]))

    def new_keys_values(self, key_value: Tensor, start: int) -> tuple[Tensor, Tensor]:
        k, v = super().new_keys_values(key_value, start)  # (B, H, Tk, d_head)
        return rotate(k, _rows(self.table, start, k.shape[2])), v
