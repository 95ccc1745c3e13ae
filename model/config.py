"""The model's configuration: one frozen, validated dataclass, saved as JSON beside the weights."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["encoder-decoder", "decoder-only"]
KINDS: tuple[str, ...] = ("encoder-decoder", "decoder-only")
POSITIONAL: tuple[str, ...] = ("sinusoidal", "learned")
NORMS: tuple[str, ...] = ("post", "pre")

# Upper bounds on every size, checked before anything is allocated: a typo in config.json (one zero too many)
# must be an error message, not a multi-terabyte allocation. Each is far above any model this app is meant to
# show (the shipped ones have d_model ≤ 256, d_ff ≤ 768, ≤ 4 layers, ≤ 6000 tokens) and at or above the sizes
# of a 70-billion-parameter published model (Llama 3 70B: d_model 8192, 64 heads, 80 layers, d_ff 28672).
BOUNDS: dict[str, int] = {
    "vocab_size": 1_000_000,
    "d_model": 8192,
    "n_heads": 256,
    "n_encoder_layers": 128,
    "n_decoder_layers": 128,
    "d_ff": 65536,
    "max_len": 65536,
}
# The sizes can each be in bounds and still multiply to far too much (d_model 8192 × d_ff 65536 × 128 layers
# is 137 billion weights): 2e9 parameters is 8 GB of float32, about what a laptop can still hold.
MAX_PARAMETERS = 2_000_000_000


class ConfigError(ValueError):
    """A configuration value is missing, of the wrong type or out of range."""


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of an encoder-decoder or a decoder-only Transformer.

    `norm="post"` is the paper's LayerNorm(x + Sublayer(x)); `norm="pre"` is the Annotated Transformer's
    x + Sublayer(LayerNorm(x)) with a final LayerNorm. One vocabulary serves source and target.
    """

    kind: Kind
    vocab_size: int
    d_model: int = 128
    n_heads: int = 4
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    d_ff: int = 512
    dropout: float = 0.1
    max_len: int = 512
    positional: Literal["sinusoidal", "learned"] = "sinusoidal"
    norm: Literal["post", "pre"] = "post"
    tie_embeddings: bool = True
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.positional not in POSITIONAL:
            raise ConfigError(f"positional must be one of {POSITIONAL}, got {self.positional!r}")
        if self.norm not in NORMS:
            raise ConfigError(f"norm must be one of {NORMS}, got {self.norm!r}")
        for name, bound in BOUNDS.items():
            value = getattr(self, name)
            least = 0 if name == "n_encoder_layers" else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                what = "a non-negative" if least == 0 else "a positive"
                raise ConfigError(f"{name} must be {what} integer, got {value!r}")
            if value > bound:
                raise ConfigError(
                    f"{name} is {value}, above its bound of {bound}: no model this app can run is that large; "
                    "check the value for a typo or use a smaller model"
                )
        if self.n_parameters > MAX_PARAMETERS:
            raise ConfigError(
                f"these sizes make {self.n_parameters:,} parameters, above the bound of {MAX_PARAMETERS:,} "
                f"({4 * MAX_PARAMETERS / 1e9:.0f} GB of float32); lower d_model, d_ff, the layer counts or vocab_size"
            )
        if self.kind == "encoder-decoder" and self.n_encoder_layers < 1:
            raise ConfigError("an encoder-decoder needs n_encoder_layers >= 1")
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ConfigError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, int | float) or not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be a number in [0, 1), got {self.dropout!r}")
        if not isinstance(self.tie_embeddings, bool):
            raise ConfigError(f"tie_embeddings must be true or false, got {self.tie_embeddings!r}")
        specials = {"pad_id": self.pad_id, "unk_id": self.unk_id, "bos_id": self.bos_id, "eos_id": self.eos_id}
        for name, value in specials.items():
            if not isinstance(value, int) or not 0 <= value < self.vocab_size:
                raise ConfigError(f"{name} must be an id below vocab_size ({self.vocab_size}), got {value!r}")
        if len(set(specials.values())) != len(specials):
            raise ConfigError(f"special ids must differ, got {specials}")

    @property
    def n_parameters(self) -> int:
        """The number of weights the model of this config has, computed from the sizes alone (nothing allocated)."""
        d, f, v = self.d_model, self.d_ff, self.vocab_size
        attention = 4 * (d * d + d)  # W_q, W_k, W_v, W_o with biases
        feed_forward = d * f + f + f * d + d
        norm = 2 * d  # LayerNorm gain and bias
        stacks = 2 if self.is_encoder_decoder else 1  # a decoder-only model builds no encoder
        encoder_layer = attention + feed_forward + 2 * norm
        decoder_layer = stacks * attention + feed_forward + (stacks + 1) * norm  # cross-attention: one more each
        n_encoder_layers = self.n_encoder_layers if self.is_encoder_decoder else 0
        layers = n_encoder_layers * encoder_layer + self.n_decoder_layers * decoder_layer
        final_norms = stacks * norm if self.norm == "pre" else 0
        positions = self.max_len * d if self.positional == "learned" else 0
        generator = (0 if self.tie_embeddings else d * v) + v
        return v * d + positions + layers + final_norms + generator

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def is_encoder_decoder(self) -> bool:
        return self.kind == "encoder-decoder"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        if not isinstance(data, dict):
            raise ConfigError(f"config must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config keys: {unknown}")
        missing = sorted(
            f.name for f in dataclasses.fields(cls) if f.name not in data and f.default is dataclasses.MISSING
        )
        if missing:
            raise ConfigError(f"missing config keys: {missing}")
        return cls(**data)
