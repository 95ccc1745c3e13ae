"""The trace a forward pass returns: every attention block's record, keyed by module path, and the positions used."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from torch import Tensor

from model.attention import AttentionRecord


@dataclass(frozen=True)
class Trace:
    """Everything one forward pass computed that a learner may want to see.

    source_ids:   (B, S) encoder input ids; None for a decoder-only model.
    target_ids:   (B, T) decoder input ids of this pass (for a language model, the text itself; for an
                  encoder-only model, (B, 0): it has no decoder).
    target_valid: (B, T_all) which decoder positions so far hold real tokens: the keys of the next step.
    positional:   "encoder"/"decoder" → (T, d_model) positional-encoding rows added to the embeddings; with
                  rotary positions (T, d_head) rows, the cos | sin of the angles queries and keys were turned by.
    attention:    module path (`encoder.layers.0.self_attn`, `decoder.layers.1.cross_attn`, …) → its record,
                  in the order computed. A decoder pass that continues a `past` trace holds no encoder blocks.
    query_offset: position of the first query among the decoder's keys (non-zero after a `past`).

    A trace is also the cache of incremental decoding: pass it back as `past` and the next tokens reuse its
    keys and values instead of recomputing them.
    """

    kind: str
    source_ids: Tensor | None
    target_ids: Tensor
    target_valid: Tensor
    positional: dict[str, Tensor]
    attention: dict[str, AttentionRecord] = field(default_factory=dict)
    query_offset: int = 0

    @property
    def masks(self) -> dict[str, Tensor]:
        """One mask per attention type (`encoder.self_attn`, `decoder.self_attn`, `decoder.cross_attn`):
        every layer of a stack applies the same one."""
        masks: dict[str, Tensor] = {}
        for name, rec in self.attention.items():
            stack, _, _, type_ = name.split(".")
            masks.setdefault(f"{stack}.{type_}", rec.mask)
        return masks

    def select(self, rows: Tensor) -> Trace:
        """The trace of batch rows `rows` only (beam search keeps the surviving hypotheses' caches)."""
        source = None if self.source_ids is None else self.source_ids.index_select(0, rows)
        attention = {name: rec.select(rows) for name, rec in self.attention.items()}
        return replace(
            self,
            source_ids=source,
            target_ids=self.target_ids.index_select(0, rows),
            target_valid=self.target_valid.index_select(0, rows),
            attention=attention,
        )

    def encoder_part(self) -> Trace:
        """This trace as the `past` of a new decoder pass over the same source: the cross-attention keys and
        values (the encoder memory, projected once) and no decoder tokens, so the decoder starts from its first
        token and the encoder does not run again."""
        cross = {name: rec for name, rec in self.attention.items() if name.endswith(".cross_attn")}
        empty = self.target_valid[:, :0]
        return replace(self, target_ids=self.target_ids[:, :0], target_valid=empty, attention=cross, query_offset=0)
