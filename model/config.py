"""The model's configuration: the paper's hyperparameters, plus one optional group of switches that make it a
published model (BERT, GPT-2, Llama). Both are frozen dataclasses that validate themselves; saved as JSON beside
the weights."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal, get_args

from model.names import Capabilities

Kind = Literal["encoder-decoder", "decoder-only", "encoder-only"]
Positional = Literal["sinusoidal", "learned", "rotary"]
Norm = Literal["post", "pre"]
NormType = Literal["layer", "rms"]
Activation = Literal["relu", "gelu", "gelu_tanh", "swiglu"]
KINDS: tuple[str, ...] = get_args(Kind)
POSITIONAL: tuple[str, ...] = get_args(Positional)
NORMS: tuple[str, ...] = get_args(Norm)
NORM_TYPES: tuple[str, ...] = get_args(NormType)
ACTIVATIONS: tuple[str, ...] = get_args(Activation)

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
PUBLISHED_BOUNDS: dict[str, int] = {"n_kv_heads": 256, "n_token_types": 16}
# The sizes can each be in bounds and still multiply to far too much (d_model 8192 × d_ff 65536 × 128 layers
# is 137 billion weights): 2e9 parameters is 8 GB of float32, about what a laptop can still hold.
MAX_PARAMETERS = 2_000_000_000


class ConfigError(ValueError):
    """A configuration value is missing, of the wrong type or out of range."""


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {allowed}, got {value!r}")


def _flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {value!r}")


def _positive_number(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e9:
        raise ConfigError(f"{name} must be a positive number, got {value!r}")


def _count(name: str, value: Any, least: int, bound: int) -> None:
    """An integer of at least `least` and at most `bound`."""
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        what = "a non-negative" if least == 0 else "a positive"
        raise ConfigError(f"{name} must be {what} integer, got {value!r}")
    if value > bound:
        raise ConfigError(
            f"{name} is {value}, above its bound of {bound}: no model this app can run is that large; "
            "check the value for a typo or use a smaller model"
        )


def _fields_of(cls: type, data: dict[str, Any], what: str) -> dict[str, Any]:
    """`data` checked against the fields of dataclass `cls`: no unknown key, every field without a default."""
    fields = dataclasses.fields(cls)
    unknown = sorted(set(data) - {f.name for f in fields})
    if unknown:
        raise ConfigError(f"unknown {what} keys: {unknown}")
    missing = sorted(f.name for f in fields if f.name not in data and f.default is dataclasses.MISSING)
    if missing:
        raise ConfigError(f"missing {what} keys: {missing}")
    return data


@dataclass(frozen=True)
class Published:
    """The switches that make the paper's model a published one, each defaulting to the paper's choice.

    BERT: activation="gelu", norm_eps=1e-12, embed_scale=False, embed_norm=True, n_token_types=2, and
    mlm_head=True when its weights carry the masked-LM head. Llama: n_kv_heads < n_heads (grouped-query
    attention: each key/value head serves n_heads // n_kv_heads query heads), norm_type="rms",
    activation="swiglu", bias=False, embed_scale=False and its rope_base. GPT-2: activation="gelu_tanh" (GELU's tanh
    approximation, as GPT-2 was trained with) and embed_scale=False. Seed 003's centre-word predictor (a student
    report's 5-gram model): kind="encoder-only", embed_scale=False, sum_outputs=True and, for its shared layers,
    shared_layers=True. GPT-NeoX (Pythia): activation="gelu", embed_scale=False, rotary_fraction (its rotary_pct)
    and parallel_residual (its use_parallel_residual).
    """

    n_kv_heads: int | None = None  # None: one key/value head per query head (the paper's multi-head attention)
    norm_type: NormType = "layer"  # LayerNorm, or RMSNorm (gain only, no centring)
    norm_eps: float = 1e-5
    activation: Activation = "relu"
    bias: bool = True  # biases in the attention, feed-forward and output projections
    embed_scale: bool = True  # token embeddings multiplied by √d_model (section 3.4)
    embed_norm: bool = False  # a normalisation after embeddings + positions (BERT)
    n_token_types: int = 0  # BERT's segment embeddings; every token here is of type 0
    rope_base: float = 10000.0  # rotary positions: θ_i = rope_base^(-2i/d_head)
    mlm_head: bool = False  # BERT's masked-LM head: dense + activation + norm before the output projection
    sum_outputs: bool = False  # the outputs of every position summed into one prediction (seed 003's centre word)
    shared_layers: bool = False  # one encoder layer's weights applied n_encoder_layers times (seed 003, Appendix B)
    rotary_fraction: float = 1.0  # the share of each head's features rotary positions turn (GPT-NeoX: 0.25)
    parallel_residual: bool = False  # x + attn(norm₁(x)) + ffn(norm₂(x)): both read the layer's input (GPT-NeoX)

    def __post_init__(self) -> None:
        _choice("norm_type", self.norm_type, NORM_TYPES)
        _choice("activation", self.activation, ACTIVATIONS)
        for name in (
            "bias",
            "embed_scale",
            "embed_norm",
            "mlm_head",
            "sum_outputs",
            "shared_layers",
            "parallel_residual",
        ):
            _flag(name, getattr(self, name))
        for name in ("norm_eps", "rope_base", "rotary_fraction"):
            _positive_number(name, getattr(self, name))
        if self.rotary_fraction > 1:
            raise ConfigError(
                f"rotary_fraction is a share of each head's features: at most 1, got {self.rotary_fraction}"
            )
        if self.shared_layers and not self.sum_outputs:
            raise ConfigError("shared_layers belongs to the centre-word predictor: it needs sum_outputs=true")
        if self.sum_outputs and self.bert_input_or_output:
            raise ConfigError("sum_outputs replaces the output at each position: it cannot go with BERT's switches")
        if self.n_kv_heads is not None:
            _count("n_kv_heads", self.n_kv_heads, 1, PUBLISHED_BOUNDS["n_kv_heads"])
        _count("n_token_types", self.n_token_types, 0, PUBLISHED_BOUNDS["n_token_types"])

    @property
    def bert_input_or_output(self) -> bool:
        """Whether BERT's own embedding sum (token types, a norm over the sum) or its masked-LM head is switched on."""
        return bool(self.n_token_types) or self.embed_norm or self.mlm_head

    @classmethod
    def from_dict(cls, data: Any) -> Published:
        if not isinstance(data, dict):
            raise ConfigError(f"published must be a JSON object or null, got {type(data).__name__}")
        return cls(**_fields_of(cls, data, "published"))


PAPER = Published()  # every switch at the paper's choice
SWITCHES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Published))


@dataclass(frozen=True)
class ModelConfig(Capabilities):
    """Hyperparameters of an encoder-decoder, a decoder-only or an encoder-only Transformer.

    `norm="post"` is the paper's LayerNorm(x + Sublayer(x)); `norm="pre"` is the Annotated Transformer's
    x + Sublayer(LayerNorm(x)) with a final LayerNorm. One vocabulary serves source and target. `positional`
    "sinusoidal" (section 3.5) or "learned" adds a vector to each embedding; "rotary" (RoFormer, as Llama uses)
    adds nothing and turns each head's queries and keys instead, by published.rope_base.

    `published` is None for the paper's model; a published model's switches are the Published group (BERT:
    kind="encoder-only", positional="learned"; Llama: kind="decoder-only", positional="rotary", norm="pre";
    GPT-2: kind="decoder-only", positional="learned", norm="pre", with bos_id == eos_id: its one special token,
    <|endoftext|>, both starts and ends a text).
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
    positional: Positional = "sinusoidal"
    norm: Norm = "post"
    tie_embeddings: bool = True
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3
    published: Published | None = None

    def __post_init__(self) -> None:
        self._check_choices()
        self._check_sizes()
        self._check_stacks()
        self._check_heads_and_positions()
        self._check_special_ids()

    def _check_choices(self) -> None:
        _choice("kind", self.kind, KINDS)
        _choice("positional", self.positional, POSITIONAL)
        _choice("norm", self.norm, NORMS)
        _flag("tie_embeddings", self.tie_embeddings)
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, int | float) or not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be a number in [0, 1), got {self.dropout!r}")
        if self.published is not None and not isinstance(self.published, Published):
            raise ConfigError(f"published must be a Published group or None, got {type(self.published).__name__}")

    def _check_sizes(self) -> None:
        for name, bound in BOUNDS.items():
            least = 0 if name in ("n_encoder_layers", "n_decoder_layers") else 1
            _count(name, getattr(self, name), least, bound)
        if self.n_parameters > MAX_PARAMETERS:
            raise ConfigError(
                f"these sizes make {self.n_parameters:,} parameters, above the bound of {MAX_PARAMETERS:,} "
                f"({4 * MAX_PARAMETERS / 1e9:.0f} GB of float32); lower d_model, d_ff, the layer counts or vocab_size"
            )

    def _check_stacks(self) -> None:
        if self.has_encoder and self.n_encoder_layers < 1:
            raise ConfigError(f"an {self.kind} model needs n_encoder_layers >= 1")
        if self.has_decoder and self.n_decoder_layers < 1:
            raise ConfigError(f"a {self.kind} model needs n_decoder_layers >= 1")
        if self.has_decoder and self.switches.sum_outputs:
            raise ConfigError(f"sum_outputs sums an encoder's outputs: it needs kind='encoder-only', got {self.kind!r}")
        if self.has_decoder and self.switches.bert_input_or_output:
            raise ConfigError(
                "token types, an embedding norm and a masked-LM head are BERT's: they need kind='encoder-only', "
                f"got {self.kind!r}"
            )

    def _check_heads_and_positions(self) -> None:
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.n_heads % self.kv_heads:
            raise ConfigError(
                f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.kv_heads}): each key/value head "
                "serves the same number of query heads"
            )
        if self.positional == "rotary" and self.d_head % 2:
            raise ConfigError(f"rotary positions rotate pairs of features: d_head must be even, got {self.d_head}")
        if self.positional == "rotary" and (self.rotary_dims < 2 or self.rotary_dims % 2):
            raise ConfigError(
                f"rotary_fraction {self.switches.rotary_fraction} of d_head {self.d_head} turns {self.rotary_dims} "
                "features: rotary positions need an even number, at least 2"
            )
        if self.switches.parallel_residual and (self.has_encoder or not self.has_decoder or self.norm != "pre"):
            raise ConfigError(
                "parallel_residual is GPT-NeoX's pre-norm decoder layer: it needs a pre-norm decoder-only model"
            )
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ConfigError(f"sinusoidal positions need an even d_model, got {self.d_model}")

    def _check_special_ids(self) -> None:
        specials = {"pad_id": self.pad_id, "unk_id": self.unk_id, "bos_id": self.bos_id, "eos_id": self.eos_id}
        for name, value in specials.items():
            if not isinstance(value, int) or not 0 <= value < self.vocab_size:
                raise ConfigError(f"{name} must be an id below vocab_size ({self.vocab_size}), got {value!r}")
        # padding is masked by id and unknown pieces are flagged by id: those two ids must be nobody else's; one
        # token may both start and end a text (GPT-2's <|endoftext|>)
        if len({self.pad_id, self.unk_id, self.bos_id}) != 3 or len({self.pad_id, self.unk_id, self.eos_id}) != 3:
            raise ConfigError(f"pad and unk ids must differ from each other and from bos and eos, got {specials}")

    @property
    def switches(self) -> Published:
        """The published switches, or the paper's choices (PAPER) when there are none."""
        return PAPER if self.published is None else self.published

    @property
    def n_parameters(self) -> int:
        """The number of weights the model of this config has, computed from the sizes alone (nothing allocated)."""
        s = self.switches
        d, f, v, b = self.d_model, self.d_ff, self.vocab_size, int(s.bias)
        d_kv = self.kv_heads * self.d_head
        attention = 2 * (d * d + b * d) + 2 * (d * d_kv + b * d_kv)  # W_q, W_o; W_k, W_v (grouped: d_kv wide)
        n_in = 2 if s.activation == "swiglu" else 1  # SwiGLU has a gate and an up projection
        feed_forward = n_in * (d * f + b * f) + f * d + b * d
        norm = 2 * d if s.norm_type == "layer" else d  # LayerNorm gain and bias; RMSNorm gain only
        cross = 2 if self.has_cross_attention else 1  # a decoder layer with cross-attention: one more of each
        encoder_layer = attention + feed_forward + 2 * norm
        encoder_copies = 1 if s.shared_layers else self.n_encoder_layers  # shared: one layer's weights
        decoder_layer = cross * attention + feed_forward + (cross + 1) * norm
        layers = self.has_encoder * encoder_copies * encoder_layer
        layers += self.has_decoder * self.n_decoder_layers * decoder_layer
        final_norms = (self.has_encoder + self.has_decoder) * norm if self.norm == "pre" else 0
        positions = self.max_len * d if self.positional == "learned" else 0
        embeddings = v * d + positions + s.n_token_types * d + (norm if s.embed_norm else 0)
        generator = (0 if self.tie_embeddings else d * v) + b * v
        head = d * d + b * d + norm if s.mlm_head else 0
        return embeddings + layers + final_norms + head + generator

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def rotary_dims(self) -> int:
        """How many of each head's features rotary positions turn: the first int(d_head · rotary_fraction)."""
        return int(self.d_head * self.switches.rotary_fraction)

    @property
    def kv_heads(self) -> int:
        """The number of key/value heads: published.n_kv_heads, or n_heads (one per query head, the paper's)."""
        n_kv_heads = self.switches.n_kv_heads
        return self.n_heads if n_kv_heads is None else n_kv_heads

    def kv_head(self, head: int) -> int:
        """The key/value head query head `head` reads (grouped-query attention shares one per group)."""
        return head // (self.n_heads // self.kv_heads)

    def to_dict(self) -> dict[str, Any]:
        """The paper's fields, and `published`: None or an object of the switches."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """The config of `to_dict`'s form; or of the flat form, with every switch beside the paper's fields (as
        the shipped checkpoints' config.json files hold it): switches all at the paper's choice read as
        `published` None, any other as a Published group."""
        if not isinstance(data, dict):
            raise ConfigError(f"config must be a JSON object, got {type(data).__name__}")
        flat = {name: data[name] for name in SWITCHES if name in data}
        fields = {name: value for name, value in data.items() if name not in flat}
        if flat and "published" in fields:
            raise ConfigError(f"switches {sorted(flat)} given both beside the other fields and in published")
        _fields_of(cls, fields, "config")
        published = Published(**flat) if flat else fields.get("published")
        if published is not None and not isinstance(published, Published):
            published = Published.from_dict(published)
        return cls(**{**fields, "published": None if published == PAPER else published})
