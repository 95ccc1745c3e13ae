"""Published feed-forward networks: the paper's with GELU in place of max(0, ·), and the gated SwiGLU unit."""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from model.attention import Linear
from model.transformer import FeedForward


class GELUFeedForward(FeedForward):
    """FFN(x) = GELU(x W1 + b1) W2 + b2: GELU(x) = x Φ(x), Φ the normal distribution's CDF (Hendrycks & Gimpel
    2016; BERT); `approximate="tanh"` is 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))), as GPT-2 was trained with."""

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        dropout: float,
        linear: Linear = nn.Linear,
        approximate: Literal["none", "tanh"] = "none",
    ) -> None:
        super().__init__(d_model, d_ff, dropout, linear)
        self.approximate = approximate

    def hidden(self, x: Tensor) -> Tensor:
        return F.gelu(self.w_1(x), approximate=self.approximate)  # (B, T, d_ff)


class GatedFeedForward(FeedForward):
    """SwiGLU (Shazeer 2020; Llama): FFN(x) = (SiLU(x W1) ⊙ x W3) W2, a third matrix W3 gating the hidden layer."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, linear: Linear = nn.Linear) -> None:
        super().__init__(d_model, d_ff, dropout, linear)
        self.w_3 = linear(d_model, d_ff)

    def hidden(self, x: Tensor) -> Tensor:
        return F.silu(self.w_1(x)) * self.w_3(x)  # (B, T, d_ff)
