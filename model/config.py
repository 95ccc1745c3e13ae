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
        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "max_len", "n_decoder_layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.n_encoder_layers, int) or self.n_encoder_layers < 0:
            raise ConfigError(f"n_encoder_layers must be a non-negative integer, got {self.n_encoder_layers!r}")
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
