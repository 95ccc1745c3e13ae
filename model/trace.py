"""The trace a forward pass returns: every attention sub-layer's record, keyed by module path, the positions used and,
on request, the residual stream."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from torch import Tensor

from model.attention import AttentionRecord
from model.names import attention_type


@dataclass(frozen=True)
class Trace:
    """Everything one forward pass computed that a learner may want to see.

    source_ids:   (B, S) encoder input ids; None for a decoder-only model.
    target_ids:   (B, T) decoder input ids of this pass (for a language model, the text itself; for an
                  encoder-only model, (B, 0): it has no decoder).
    target_valid: (B, T_all) which decoder positions so far hold real tokens: the keys of the next step.
    positional_encoding: "encoder"/"decoder" → (T, d_model) rows added to the embeddings; with
                  rotary positions (T, d_head) rows, the cos | sin of the angles queries and keys were turned by.
    attention:    module path (`encoder.layers.0.self_attn`, `decoder.layers.1.cross_attn`, …) → its record,
                  in the order computed. A decoder pass that continues a `past` trace holds no encoder sub-layers.
    query_offset: position of the first query among the decoder's keys (non-zero after a `past`).
    activations:  empty unless the forward was called with `activations=True`; then name → tensor of this pass's
                  positions (B, T, d_model), named by module path as TransformerLens's `blocks.0.hook_resid_mid`.
                  For each stack ("encoder", "decoder") and layer i of it, in the order computed:
                    {stack}.embed                          the token embeddings, before positions are added
                    {stack}.layers.{i}.resid_pre           the layer's input (layer 0: embeddings + positions)
                    {stack}.layers.{i}.self_attn.out       the self-attention sub-layer's output, Sublayer(x)
                    {stack}.layers.{i}.resid_mid           the residual stream after the self-attention sub-layer
                    decoder.layers.{i}.cross_attn.out      encoder-decoder only: the cross-attention's output
                    decoder.layers.{i}.resid_mid_cross     encoder-decoder only: the stream after cross-attention
                    {stack}.layers.{i}.feed_forward.hidden the feed-forward's hidden layer after its activation
                                                           (B, T, d_ff): feed_forward.w_2 of it is .out
                    {stack}.layers.{i}.feed_forward.out    the feed-forward sub-layer's output
                    {stack}.layers.{i}.resid_post          the layer's output: resid_pre of layer i + 1
                    {stack}.output                         the stack's output (after the final norm of a
                                                           pre-norm model): what the generator or cross-attention
                                                           reads
                  A sub-layer's output is what enters the residual connection: x + out (pre-norm), or
                  Norm(x + out) (post-norm). A pass that continues a `past` holds the new positions only.
                  E.g. `_, trace = model(ids, activations=True)`, then
                  `trace.activations["decoder.layers.0.feed_forward.hidden"][0]`: (T, d_ff) of the first text.

    A trace is also the cache of incremental decoding: pass it back as `past` and the next tokens reuse its
    keys and values instead of recomputing them.
    """

    kind: str
    source_ids: Tensor | None
    target_ids: Tensor
    target_valid: Tensor
    positional_encoding: dict[str, Tensor]
    attention: dict[str, AttentionRecord] = field(default_factory=dict)
    query_offset: int = 0
    activations: dict[str, Tensor] = field(default_factory=dict)

    @property
    def masks(self) -> dict[str, Tensor]:
        """One mask per attention type (`encoder.self_attn`, `decoder.self_attn`, `decoder.cross_attn`):
        every layer of a stack applies the same one."""
        masks: dict[str, Tensor] = {}
        for name, rec in self.attention.items():
            masks.setdefault(attention_type(name), rec.mask)
        return masks

    def select(self, rows: Tensor, same_sources: bool = False) -> Trace:
        """The trace of batch rows `rows` only (beam search keeps the surviving hypotheses' caches).

        same_sources: each new row has the source the old row in its place had (a text's hypotheses reordered among
        themselves, as many as before): the source and the cross-attention records, the same for every row of one
        source, are kept as they are instead of copied."""
        keep = same_sources and rows.shape[0] == self.target_ids.shape[0]
        source = self.source_ids if keep or self.source_ids is None else self.source_ids.index_select(0, rows)
        attention = {
            name: rec if keep and name.endswith(".cross_attn") else rec.select(rows)
            for name, rec in self.attention.items()
        }
        return replace(
            self,
            source_ids=source,
            target_ids=self.target_ids.index_select(0, rows),
            target_valid=self.target_valid.index_select(0, rows),
            attention=attention,
            activations={name: tensor.index_select(0, rows) for name, tensor in self.activations.items()},
        )

    def encoder_part(self) -> Trace:
        """This trace as the `past` of a new decoder pass over the same source: the cross-attention keys and
        values (the encoder memory, projected once) and no decoder tokens, so the decoder starts from its first
        token and the encoder does not run again."""
        cross = {name: rec for name, rec in self.attention.items() if name.endswith(".cross_attn")}
        empty = self.target_valid[:, :0]
        return replace(
            self, target_ids=self.target_ids[:, :0], target_valid=empty, attention=cross, query_offset=0, activations={}
        )
