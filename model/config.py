"""The model's configuration: one frozen, validated dataclass, saved as JSON beside the weights."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["encoder-decoder", "decoder-only", "encoder-only"]
KINDS: tuple[str, ...] = ("encoder-decoder", "decoder-only", "encoder-only")
POSITIONAL: tuple[str, ...] = ("sinusoidal", "learned", "rotary")
NORMS: tuple[str, ...] = ("post", "pre")
NORM_TYPES: tuple[str, ...] = ("layer", "rms")
ACTIVATIONS: tuple[str, ...] = ("relu", "gelu", "gelu_tanh", "swiglu")

# Upper bounds on every size, checked before anything is allocated: a typo in config.json (one zero too many)
# must be an error message, not a multi-terabyte allocation. Each is far above any model this app is meant to
# show (the shipped ones have d_model ≤ 256, d_ff ≤ 768, ≤ 4 layers, ≤ 6000 tokens) and at or above the sizes
# of a 70-billion-parameter published model (Llama 3 70B: d_model 8192, 64 heads, 80 layers, d_ff 28672).
BOUNDS: dict[str, int] = {
    "vocab_size": 1_000_000,
    "d_model": 8192,
    "n_heads": 256,
    "n_kv_heads": 256,
    "n_token_types": 16,
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
    """Hyperparameters of an encoder-decoder, a decoder-only or an encoder-only Transformer.

    `norm="post"` is the paper's LayerNorm(x + Sublayer(x)); `norm="pre"` is the Annotated Transformer's
    x + Sublayer(LayerNorm(x)) with a final LayerNorm. One vocabulary serves source and target.

    The fields after `eos_id` are switches for published models, each defaulting to the 2017 paper:
    BERT is kind="encoder-only", positional="learned", n_token_types=2, embed_scale=False, embed_norm=True,
    activation="gelu", norm_eps=1e-12, and mlm_head=True when its weights carry the masked-LM head; a Llama is
    kind="decoder-only", positional="rotary", norm="pre", norm_type="rms", activation="swiglu", bias=False,
    embed_scale=False and n_kv_heads < n_heads (grouped-query attention: each key/value head serves
    n_heads // n_kv_heads query heads); a GPT-2 is kind="decoder-only", positional="learned", norm="pre",
    activation="gelu_tanh" (GELU's tanh approximation, as GPT-2 was trained with) and embed_scale=False, with
    bos_id == eos_id (its one special token, <|endoftext|>, both starts and ends a text).
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
    n_kv_heads: int | None = None  # None: one key/value head per query head (the paper's multi-head attention)
    norm_type: Literal["layer", "rms"] = "layer"  # LayerNorm, or RMSNorm (gain only, no centring)
    norm_eps: float = 1e-5
    activation: Literal["relu", "gelu", "gelu_tanh", "swiglu"] = "relu"
    bias: bool = True  # biases in the attention, feed-forward and output projections
    embed_scale: bool = True  # token embeddings multiplied by √d_model (section 3.4)
    embed_norm: bool = False  # a normalisation after embeddings + positions (BERT)
    n_token_types: int = 0  # BERT's segment embeddings; every token here is of type 0
    rope_base: float = 10000.0  # rotary positions: θ_i = rope_base^(-2i/d_head)
    mlm_head: bool = False  # BERT's masked-LM head: dense + activation + norm before the output projection

    def __post_init__(self) -> None:
        choices = {
            "kind": KINDS,
            "positional": POSITIONAL,
            "norm": NORMS,
            "norm_type": NORM_TYPES,
            "activation": ACTIVATIONS,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("bias", "embed_scale", "embed_norm", "mlm_head"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("norm_eps", "rope_base"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e9:
                raise ConfigError(f"{name} must be a positive number, got {value!r}")
        for name, bound in BOUNDS.items():
            value = getattr(self, name)
            if name == "n_kv_heads" and value is None:
                continue
            least = 0 if name in ("n_encoder_layers", "n_decoder_layers", "n_token_types") else 1
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
        if self.kind != "decoder-only" and self.n_encoder_layers < 1:
            raise ConfigError(f"an {self.kind} model needs n_encoder_layers >= 1")
        if self.kind != "encoder-only" and self.n_decoder_layers < 1:
            raise ConfigError(f"a {self.kind} model needs n_decoder_layers >= 1")
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.n_heads % self.kv_heads:
            raise ConfigError(
                f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.kv_heads}): each key/value head "
                "serves the same number of query heads"
            )
        if self.positional == "rotary" and self.d_head % 2:
            raise ConfigError(f"rotary positions rotate pairs of features: d_head must be even, got {self.d_head}")
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
        # padding is masked by id and unknown pieces are flagged by id: those two ids must be nobody else's; one
        # token may both start and end a text (GPT-2's <|endoftext|>)
        if len({self.pad_id, self.unk_id, self.bos_id}) != 3 or len({self.pad_id, self.unk_id, self.eos_id}) != 3:
            raise ConfigError(f"pad and unk ids must differ from each other and from bos and eos, got {specials}")

    @property
    def n_parameters(self) -> int:
        """The number of weights the model of this config has, computed from the sizes alone (nothing allocated)."""
        d, f, v, b = self.d_model, self.d_ff, self.vocab_size, int(self.bias)
        d_kv = self.kv_heads * self.d_head
        attention = 2 * (d * d + b * d) + 2 * (d * d_kv + b * d_kv)  # W_q, W_o; W_k, W_v (grouped: d_kv wide)
        n_in = 2 if self.activation == "swiglu" else 1  # SwiGLU has a gate and an up projection
        feed_forward = n_in * (d * f + b * f) + f * d + b * d
        norm = 2 * d if self.norm_type == "layer" else d  # LayerNorm gain and bias; RMSNorm gain only
        has_encoder = self.kind != "decoder-only"
        has_decoder = self.kind != "encoder-only"
        cross = 2 if self.is_encoder_decoder else 1  # a decoder layer with cross-attention: one more of each
        encoder_layer = attention + feed_forward + 2 * norm
        decoder_layer = cross * attention + feed_forward + (cross + 1) * norm
        layers = (
            has_encoder * self.n_encoder_layers * encoder_layer + has_decoder * self.n_decoder_layers * decoder_layer
        )
        final_norms = (has_encoder + has_decoder) * norm if self.norm == "pre" else 0
        positions = self.max_len * d if self.positional == "learned" else 0
        embeddings = v * d + positions + self.n_token_types * d + (norm if self.embed_norm else 0)
        generator = (0 if self.tie_embeddings else d * v) + b * v
        head = d * d + b * d + norm if self.mlm_head else 0
        return embeddings + layers + final_norms + head + generator

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """The number of key/value heads: n_kv_heads, or n_heads when it is None."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    def kv_head(self, head: int) -> int:
        """The key/value head query head `head` reads (grouped-query attention shares one per group)."""
        return head // (self.n_heads // self.kv_heads)

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
