"""BERT's input and output around the paper's encoder (Devlin et al. 2019): token types and a norm over the
embedding sum, and the masked-LM head."""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from model.attention import Linear
from model.config import ModelConfig
from model.transformer import EncoderOnly, Parts


class MaskedLMHead(nn.Module):
    """BERT's masked-LM head before the (tied) output projection: Norm(GELU(x W + b))."""

    def __init__(self, d_model: int, linear: Linear, norm: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.dense = linear(d_model, d_model)
        self.norm = norm()

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(F.gelu(self.dense(x)))  # (B, T, d_model)


class BertEncoder(EncoderOnly):
    """The encoder alone with BERT's input and output: the first token type's row (segment A: every token here)
    added to the embeddings and positions, a norm over that sum, and, with `mlm_head`, the masked-LM head before
    the output projection, whose logits then say what a [MASK] at each position should be."""

    def __init__(self, config: ModelConfig, parts: Parts) -> None:
        super().__init__(config, parts)
        switches = config.switches
        if switches.n_token_types:
            self.token_types = nn.Embedding(switches.n_token_types, config.d_model)
        self.embed_norm = parts.norm() if switches.embed_norm else nn.Identity()
        self.head = MaskedLMHead(config.d_model, parts.linear, parts.norm) if switches.mlm_head else nn.Identity()

    def with_positions(self, tokens: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        x, rows = self.positions(tokens, offset)  # (B, T, d_model), (T, d_model)
        if self.config.switches.n_token_types:
            x = x + self.token_types.weight[0]
        return self.dropout(self.embed_norm(x)), rows

    def logits(self, x: Tensor) -> Tensor:
        return self.generator(self.head(x))  # (B, T, vocab_size)
