"""GPT-NeoX's parallel layer (Black et al. 2022, "GPT-NeoX-20B", section 2.1; GPT-J): attention and the
feed-forward network both read the layer's input, each through its own norm, and both outputs are added to it,
x + Attn(Norm₁(x)) + FFN(Norm₂(x)), in place of the paper's one-after-the-other sub-layers."""

from __future__ import annotations

from torch import Tensor, nn

from model.config import ModelConfig
from model.transformer import (
    NONE,
    Ablations,
    Activations,
    Decoder,
    DecoderLayer,
    DecoderOnlyLM,
    Parts,
    Records,
    paper_parts,
)


class ParallelDecoderLayer(DecoderLayer):
    """A decoder layer (no cross-attention) whose feed-forward network reads the layer's input, not the stream
    after attention. Its records keep the paper's names: `resid_mid` is x + Attn(Norm₁(x)), so that the stream
    still sums as resid_pre + self_attn.out + feed_forward.out = resid_post; the feed-forward's input is
    Norm₂(resid_pre)."""

    def __init__(self, config: ModelConfig, parts: Parts) -> None:
        super().__init__(config, parts, cross=False)

    def forward(
        self,
        x: Tensor,
        self_mask: Tensor,
        memory: Tensor | None,
        cross_mask: Tensor | None,
        past: Records,
        record: bool,
        ablate: Ablations = NONE,
        keep: bool = False,
    ) -> tuple[Tensor, Records, Activations]:
        if (patched := ablate.get("resid_pre")) is not None:
            x = patched.apply(x)
        attend, feed = self.sublayer
        h = attend.input(x)  # (B, T, d_model)
        attn, self_rec = self.self_attn(
            h, h, self_mask, past=past.get("self_attn"), record=record, ablate=ablate.get("self_attn")
        )
        mid = attend.output(x, attn)  # x + Attn(Norm₁(x))
        hidden = self.feed_forward.hidden(feed.input(x))  # (B, T, d_ff): the layer's input, not `mid`
        ff = self.feed_forward.output(hidden)  # (B, T, d_model)
        out = feed.output(mid, ff)  # x + Attn(Norm₁(x)) + FFN(Norm₂(x))
        acts = {"resid_pre": x, "self_attn.out": attn, "resid_mid": mid}
        acts |= {"feed_forward.hidden": hidden, "feed_forward.out": ff, "resid_post": out}
        return out, {"self_attn": self_rec}, acts if keep else {}


class ParallelDecoder(Decoder):
    """The decoder stack of parallel layers, with its final norm."""

    def __init__(self, config: ModelConfig, parts: Parts) -> None:
        nn.Module.__init__(self)
        self.layers = nn.ModuleList([ParallelDecoderLayer(config, parts) for _ in range(config.n_decoder_layers)])
        self.norm = parts.norm()


class ParallelDecoderLM(DecoderOnlyLM):
    """A decoder-only language model of parallel layers (GPT-NeoX, Pythia)."""

    def __init__(self, config: ModelConfig, parts: Parts | None = None) -> None:
        super().__init__(config, parts)
        self.decoder = ParallelDecoder(config, parts or paper_parts(config))
