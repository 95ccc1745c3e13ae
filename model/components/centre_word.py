"""Seed 003's centre-word predictor (a student report, "Assignment 2. Language models"): the four words around
the centre of a 5-gram, embedded with four learned positions, go through encoder layers without a mask; the
outputs of the four positions are summed into one vector, which the output projection scores against every word.
Its shared-layers variant applies one layer's weights twice (the report's Appendix B)."""

from __future__ import annotations

from torch import Tensor, nn

from model.attention import padding_mask
from model.config import ModelConfig
from model.names import layer_name, sublayer_name
from model.trace import Trace
from model.transformer import NONE, Ablations, Activations, Encoder, EncoderLayer, EncoderOnly, Parts, Records


class SharedEncoder(Encoder):
    """One encoder layer whose weights serve every one of the config's n_encoder_layers applications; each
    application is recorded under its own name (`encoder.layers.1.self_attn` is the layer's second use)."""

    def __init__(self, config: ModelConfig, parts: Parts) -> None:
        nn.Module.__init__(self)
        self.layers = nn.ModuleList([EncoderLayer(config, parts)])
        self.norm = parts.norm() if config.norm == "pre" else nn.Identity()
        self.applications = config.n_encoder_layers

    def forward(
        self, x: Tensor, mask: Tensor, record: bool, ablate: Ablations = NONE, keep: bool = False
    ) -> tuple[Tensor, Records, Activations]:
        records: Records = {}
        acts: Activations = {}
        for i in range(self.applications):
            name, sublayer = layer_name("encoder", i), sublayer_name("encoder", i, "self_attn")
            x, records[sublayer], mine = self.layers[0](x, mask, record, ablate.get(sublayer), keep)
            acts |= {f"{name}.{k}": t for k, t in mine.items()}
        x = self.norm(x)
        return x, records, (acts | {"encoder.output": x}) if keep else acts


class CentreWordPredictor(EncoderOnly):
    """The encoder over the context words, its outputs at the real positions summed, then the output projection:
    one prediction per input, the missing centre word (logits (B, 1, vocab_size))."""

    def __init__(self, config: ModelConfig, parts: Parts) -> None:
        super().__init__(config, parts)
        if config.switches.shared_layers:
            self.encoder = SharedEncoder(config, parts)

    def forward(
        self, ids: Tensor, record: bool = True, ablate: Ablations = NONE, activations: bool = False
    ) -> tuple[Tensor, Trace]:
        """Logits (B, 1, vocab) for the centre word between the halves of `ids` (B, T), and the trace (as
        EncoderOnly's); padding, were there any, adds nothing to the sum."""
        valid = padding_mask(ids, self.config.pad_id)  # (B, T)
        x, records, rows, acts = self.encode(ids, valid, record, ablate, activations)
        summed = (x * valid.unsqueeze(-1)).sum(dim=1, keepdim=True)  # (B, 1, d_model)
        trace = Trace(self.config.kind, ids, ids[:, :0], valid[:, :0], {"encoder": rows}, records, 0, acts)
        return self.logits(summed), trace
