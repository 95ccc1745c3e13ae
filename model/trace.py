"""The trace a forward pass returns: every attention block's record, the masks and the positions used."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from model.attention import AttentionRecord


@dataclass(frozen=True)
class BlockName:
    """`decoder.layers.1.cross_attn` parsed: stack, 0-based layer and attention type."""

    stack: str
    layer: int
    type: str

    @classmethod
    def parse(cls, name: str) -> BlockName:
        stack, layers, index, attn = name.split(".")
        if layers != "layers" or attn not in ("self_attn", "cross_attn"):
            raise ValueError(f"not an attention block name: {name!r}")
        return cls(stack, int(index), attn.removesuffix("_attn"))


@dataclass(frozen=True)
class Trace:
    """Everything one forward pass computed that a learner may want to see.

    source_ids: (B, S) encoder input ids, None for a decoder-only model.
    target_ids: (B, T) decoder input ids (for a language model, the text itself).
    positional: "encoder"/"decoder" → (T, d_model) positional-encoding rows added to the embeddings.
    masks:      "encoder.self_attn"/"decoder.self_attn"/"decoder.cross_attn" → (B, Tq, Tk) booleans.
    attention:  block name (`encoder.layers.0.self_attn`, …) → its record, in the order computed.
    query_offset: position of the first query (non-zero for a cached decoding step).
    """

    kind: str
    source_ids: Tensor | None
    target_ids: Tensor
    positional: dict[str, Tensor]
    masks: dict[str, Tensor]
    attention: dict[str, AttentionRecord] = field(default_factory=dict)
    query_offset: int = 0

    def names(self) -> list[str]:
        return list(self.attention)

    def stacked_weights(self, stack: str, type_: str = "self") -> Tensor:
        """Weights of every layer of one stack and type: (L, B, H, Tq, Tk)."""
        chosen = [
            r.weights for n, r in self.attention.items() if n.startswith(f"{stack}.") and n.endswith(f".{type_}_attn")
        ]
        if not chosen:
            raise KeyError(f"no {type_}-attention blocks in the {stack} stack of this trace")
        return torch.stack(chosen)
