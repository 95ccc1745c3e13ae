"""Grouped-query attention (Ainslie et al. 2023, "GQA"): the query heads share fewer key/value heads."""

from __future__ import annotations

from torch import Tensor, nn

from model.attention import Linear, MultiHeadedAttention


class GroupedQueryAttention(MultiHeadedAttention):
    """Multi-head attention with n_kv_heads key/value heads for its n_heads query heads: query head h reads
    key/value head h // (n_heads // n_kv_heads), as Llama's `repeat_kv` arranges. W^K and W^V project to
    n_kv_heads · d_head features instead of d_model; n_kv_heads == n_heads is the paper's attention."""

    def __init__(self, n_heads: int, d_model: int, dropout: float, n_kv_heads: int, linear: Linear = nn.Linear) -> None:
        super().__init__(n_heads, d_model, dropout, linear)
        if n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(f"n_heads ({n_heads}) must be a multiple of n_kv_heads ({n_kv_heads})")
        self.n_kv_heads = n_kv_heads
        d_kv = n_kv_heads * self.d_head
        self.w_k = linear(d_model, d_kv)  # in place of the d_model-wide projections: the same names
        self.w_v = linear(d_model, d_kv)

    def new_keys_values(self, key_value: Tensor, start: int) -> tuple[Tensor, Tensor]:
        """K and V of `key_value` (B, Tk, d_model) for every query head: (B, H, Tk, d_head) each."""
        k, v = super().new_keys_values(key_value, start)  # (B, H_kv, Tk, d_head)
        group = self.n_heads // self.n_kv_heads
        return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, H, Tk, d_head)
