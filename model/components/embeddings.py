"""Token embeddings as published models use them: the table's rows as they are, not multiplied by √d_model."""

from __future__ import annotations

from torch import Tensor

from model.transformer import Embeddings


class UnscaledEmbeddings(Embeddings):
    """The paper's Embeddings without the √d_model factor (BERT, GPT-2 and Llama learned their tables so)."""

    def forward(self, ids: Tensor) -> Tensor:
        return self.lut(ids)  # (B, T, d_model)
