"""The Analysis: one text analysed by one checkpoint, as plain data (numpy arrays and strings).

Produced once by `analysis.analyze.analyze`; export writes it, viz draws it, the pages show it. It imports
neither torch nor the model, so viz can read it without either. Sub-layers are keyed by the module path that
computed them (`encoder.layers.0.self_attn`, `decoder.layers.1.cross_attn`). Its `stack` is encoder or decoder,
its `type` self_attn or cross_attn, and its `attention` the path without the layer (`encoder.self_attn`,
`decoder.self_attn`, `decoder.cross_attn`): the name the pages, the URL and the trace's masks use for one kind
of attention across layers. Layers and heads are 0-based here and in files; labels add 1.

A sub-layer is the paper's word ("Each layer has two sub-layers", section 3.1) for one attention of one layer, named by
its module path; model/transformer.py's `layer.sublayer[i]` is the residual connection and norm around sub-layer i.
The names before it (`Block`, `Analysis.blocks`, `Analysis.block`) still answer, with a DeprecationWarning.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from inference.prediction import Prediction
from model.names import Capabilities, attention_type, parse_attention_type, parse_sublayer_name, sublayer_name

if TYPE_CHECKING:  # analysis.forced runs the model (torch): a record is read without it (tests/test_imported.py)
    from analysis.forced import ForcedRow

ATTENTION_LABELS = {
    "encoder.self_attn": "Encoder self-attention",
    "decoder.self_attn": "Decoder self-attention (masked)",
    "decoder.cross_attn": "Cross-attention (decoder → encoder)",
}
LM_ATTENTION_LABELS = {"decoder.self_attn": "Self-attention (masked)"}
ENCODER_ONLY_LABELS = {"encoder.self_attn": "Self-attention (bidirectional)"}


def query_key_pieces(
    name: str, source: tuple[str, ...] | None, target: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Which tokens are a sub-layer's queries and which its keys: the encoder reads the source; the decoder's
    queries are the target, its keys the target (self-attention) or the source (cross-attention)."""
    stack, _, type_ = parse_sublayer_name(name)
    if stack == "encoder" or type_ == "cross_attn":
        if source is None:
            raise ValueError(f"{name} needs source pieces (an encoder-decoder's input)")
    if stack == "encoder":
        return source, source  # type: ignore[return-value]
    return target, (source if type_ == "cross_attn" else target)  # type: ignore[return-value]


@dataclass(frozen=True)
class HeadDetail:
    """One head's raw scores and values in one sub-layer: what the attention-math page draws, computed on demand for
    the head it opens (analysis.analyze.head_detail) instead of kept for every head of every sub-layer."""

    sublayer: str  # module path of the sub-layer
    head: int  # the query head
    scores: np.ndarray  # (Tq, Tk) QKᵀ/√d_head before the mask
    values: np.ndarray  # (Tk, d_head) V as this head reads it (its group's shared one under grouped-query attention)


@dataclass(frozen=True)
class Sublayer:
    """One attention sub-layer of one input. Arrays are float32 (H, Tq, Tk) unless said otherwise."""

    name: str  # module path, e.g. "decoder.layers.1.cross_attn"
    query_pieces: tuple[str, ...]
    key_pieces: tuple[str, ...]
    scores: np.ndarray | None  # QKᵀ/√d_head before the mask; None in the pages' copy (see Analysis.for_pages)
    mask: np.ndarray  # (Tq, Tk) bool, True = may attend
    weights: np.ndarray  # after softmax; masked cells exactly 0
    values: np.ndarray | None  # (H, Tk, d_head) V of each head: the attention-math page's weighted sum; or None
    # (H, Tk) ‖v_j W_O^h‖: the length of what key j writes through head h per unit of weight (Kobayashi et al. 2020),
    # computed with the model's W_O; None where the attention came without values (a trace file, a model's outputs)
    value_norms: np.ndarray | None = None

    @property
    def stack(self) -> str:
        return parse_sublayer_name(self.name)[0]

    @property
    def layer(self) -> int:
        return parse_sublayer_name(self.name)[1]

    @property
    def type(self) -> str:
        """`self_attn` or `cross_attn`."""
        return parse_sublayer_name(self.name)[2]

    @property
    def attention(self) -> str:
        """`encoder.self_attn`, `decoder.self_attn` or `decoder.cross_attn`: the sub-layer's name without its layer."""
        return attention_type(self.name)

    @property
    def n_heads(self) -> int:
        return int(self.weights.shape[0])

    @property
    def arrays(self) -> list[np.ndarray]:
        return [a for a in (self.scores, self.mask, self.weights, self.values, self.value_norms) if a is not None]

    def value_weighted(self) -> Sublayer:
        """This sub-layer with each weight replaced by its key's share of what the query's row moves,
        ‖α_ij · v_j W_O^h‖ / Σ_j ‖α_ij · v_j W_O^h‖ (Kobayashi et al. 2020, "Attention is not only a weight"): a
        weight on a key whose value vector is near zero moves almost nothing, so its share falls. Rows still sum
        to 1, so every attention view draws it; the raw scores belong to the weights and are dropped."""
        if self.value_norms is None:
            raise ValueError(
                f"{self.name} holds no value norms: attention weights taken from outside (a trace file, a model's "
                "outputs with output_attentions, a TransformerLens cache) come without the values they weigh; "
                "analyse a model this app runs for them: atlas.load of a checkpoint or of a save_pretrained folder "
                "(a BERT, GPT-2, Llama, Qwen2 or GPT-NeoX), or a GPT-2, Llama, Qwen2 or GPT-NeoX object with its "
                "tokenizer"
            )
        moved = self.weights * self.value_norms[:, None, :]  # (H, Tq, Tk): α_ij ‖f(x_j)‖ = ‖α_ij f(x_j)‖, α ≥ 0
        total = moved.sum(axis=-1, keepdims=True)
        shares = np.divide(moved, total, out=np.zeros_like(moved), where=total > 0).astype(np.float32)
        return replace(self, weights=shares, scores=None)


BLANK_PIECE = "___"  # where a centre-word model's one prediction is made: between the halves of its input


@dataclass(frozen=True)
class Analysis(Capabilities):
    """Everything one run of one checkpoint on one text gives the pages, the export and the CLI. What the model can
    do is asked of it as of its config (model.names.Capabilities: `has_encoder`, `has_decoder`,
    `has_cross_attention`), never of its `kind`."""

    checkpoint: str
    kind: str  # "encoder-decoder", "decoder-only" or "encoder-only"
    text: str  # the cleaned input
    source_pieces: tuple[str, ...] | None  # encoder input (encoder-decoder and encoder-only)
    target_pieces: tuple[str, ...]  # decoder input (for a language model, the text; encoder-only: none)
    target_ids: tuple[int, ...]
    sublayers: dict[str, Sublayer]  # module path → sub-layer, in the order computed
    # "encoder"/"decoder" → (T, d_model) rows added to the embeddings; rotary positions (`positional` "rotary"):
    # (T, d_head) rows, the cos | sin of each position's angles, which turn queries and keys instead
    positional_encoding: dict[str, np.ndarray]
    # per decoder position its next-token top k; encoder-only: per encoder position, what its output scores
    # highest (a masked-LM head's prediction, or without one the closest token embeddings: the checkpoint's card)
    predictions: tuple[tuple[Prediction, ...], ...]
    output_text: str | None  # encoder-decoder: the decoder's text; language model: None
    positional: str  # the config's kind: "sinusoidal", "learned" (both added) or "rotary" (turns q and k)
    kv_heads: int  # key/value heads (the config's count): n_heads, or fewer shared by groups (grouped-query)
    notes: tuple[str, ...] = ()  # truncation, replaced or removed characters, unknown tokens
    unknown_pieces: tuple[str, ...] = field(default_factory=tuple)
    generated: int = 0  # language model: the last `generated` target tokens are its own continuation
    continuation: str | None = None  # language model: the text of that continuation (None: none was asked)
    blank: bool = False  # a centre-word model (seed 003's): one prediction, the word missing between its halves
    # a decoder's: how sure the traced pass was of each target token after the first (analysis.forced.rows_of)
    certainty: tuple[ForcedRow, ...] = ()

    @property
    def n_heads(self) -> int:
        """Query heads per sub-layer: every sub-layer of a model has the same, so the first sub-layer's count serves."""
        return next(iter(self.sublayers.values())).n_heads if self.sublayers else 0

    def kv_head(self, head: int) -> int:
        """The key/value head query head `head` reads: itself, or its group's shared one (grouped-query attention)."""
        return head // (self.n_heads // self.kv_heads)

    @property
    def attentions(self) -> list[str]:
        """The attentions present (`encoder.self_attn`, …), in model order."""
        return list(dict.fromkeys(b.attention for b in self.sublayers.values()))

    def attention_label(self, attention: str) -> str:
        """How the pages name `attention`: with its stack where the model has two, without where it has one."""
        if self.has_cross_attention:
            labels = ATTENTION_LABELS
        else:
            labels = ENCODER_ONLY_LABELS if self.has_encoder else LM_ATTENTION_LABELS
        return labels.get(attention, attention)

    def layers(self, attention: str) -> list[int]:
        return [b.layer for b in self.sublayers.values() if b.attention == attention]

    def sublayer(self, attention: str, layer: int) -> Sublayer:
        stack, type_ = parse_attention_type(attention)
        name = sublayer_name(stack, layer, type_)
        if name not in self.sublayers:
            raise KeyError(f"no {attention} sub-layer in layer {layer}")
        return self.sublayers[name]

    @property
    def blocks(self) -> dict[str, Sublayer]:
        """Deprecated: `sublayers`."""
        renamed("Analysis.blocks", "Analysis.sublayers")
        return self.sublayers

    def block(self, attention: str, layer: int) -> Sublayer:
        """Deprecated: `sublayer`."""
        renamed("Analysis.block", "Analysis.sublayer")
        return self.sublayer(attention, layer)

    def stacked(self, attention: str) -> np.ndarray:
        """Weights of every layer of one attention: (L, H, Tq, Tk)."""
        chosen = [b.weights for b in self.sublayers.values() if b.attention == attention]
        if not chosen:
            raise KeyError(f"no {attention} sub-layers in this analysis")
        return np.stack(chosen)

    @property
    def full(self) -> bool:
        """Whether the raw scores and value vectors are here (False in the pages' copy)."""
        return all(b.scores is not None and b.values is not None for b in self.sublayers.values())

    def for_pages(self) -> Analysis:
        """The copy the pages keep between reruns: every head's weights and masks, not the raw scores and value
        vectors of every sub-layer (only the attention-math page and the export read those, from the full one).
        Its arrays are read-only: one cached copy serves every session."""
        sublayers = {name: replace(b, scores=None, values=None) for name, b in self.sublayers.items()}
        light = replace(self, sublayers=sublayers)
        for array in light.arrays:
            array.flags.writeable = False
        return light

    @property
    def has_value_norms(self) -> bool:
        """Whether every sub-layer holds its value norms (an analysis the app ran, not one read from a file)."""
        return bool(self.sublayers) and all(b.value_norms is not None for b in self.sublayers.values())

    def value_weighted(self) -> Analysis:
        """This analysis with every sub-layer's weights replaced by `Sublayer.value_weighted`: what each key moves into
        each query's output, as a share, drawn by every attention view as it draws weights. ValueError when a
        sub-layer holds no value norms."""
        return replace(self, sublayers={name: b.value_weighted() for name, b in self.sublayers.items()})

    @property
    def arrays(self) -> list[np.ndarray]:
        return [a for b in self.sublayers.values() for a in b.arrays] + list(self.positional_encoding.values())

    @property
    def nbytes(self) -> int:
        """Bytes of its arrays (what a cache of analyses counts)."""
        return sum(a.nbytes for a in self.arrays)

    @property
    def prediction_pieces(self) -> tuple[str, ...]:
        """The tokens `predictions` are made at, one each: the decoder's (next-token guesses), or an encoder-only
        model's input (what each output vector scores highest: the card's "predictions" says what that is); a
        centre-word model's one guess is at the blank, `___`."""
        if self.blank:
            return (BLANK_PIECE,)
        return self.target_pieces if self.has_decoder else (self.source_pieces or ())

    @property
    def first_positional_encoding(self) -> np.ndarray:
        """The positional rows of the model's first stack: the encoder's, or the decoder's for an LM."""
        rows = self.positional_encoding
        return rows["encoder"] if "encoder" in rows else rows["decoder"]


@dataclass(frozen=True)
class DecodingSteps:
    """The decoding steps an analysis of written text holds, counted from 1 as Generate's slider shows them.

    Step s fed the token at position `first - 1 + (s - 1)` (its query) and wrote the one after it; the step after
    the last written token counts too when the model chose the end there, and does not when a language model
    stopped at the number of tokens it was asked for (20 tokens asked are 20 steps, though its next guess is the
    end)."""

    first: int  # the position of the first written token: 1 after a translator's <s>; after an LM's own text
    count: int  # the steps to show, 0 when the model wrote nothing

    @classmethod
    def of(cls, analysis: Analysis, eos_id: int, asked: int | None = None) -> DecodingSteps:
        """`asked`: the tokens a language model was asked to write (None: not known)."""
        lm = not analysis.has_encoder  # a language model writes after its own text
        first = len(analysis.target_pieces) - analysis.generated if lm else 1
        count = len(analysis.target_pieces) - first
        stopped_at_limit = lm and asked is not None and analysis.generated >= asked
        if analysis.predictions and analysis.predictions[-1][0].id == eos_id and not stopped_at_limit:
            count += 1
        return cls(first, max(0, count))

    def query(self, step: int) -> int:
        """The position (from 0) whose prediction is step `step`'s token: the token that step fed."""
        if not 1 <= step <= self.count:
            raise ValueError(f"step {step} outside 1..{self.count}")
        return self.first - 1 + (step - 1)

    def keys_held(self, step: int) -> int:
        """The positions the self-attention cache holds keys and values for after step `step`."""
        return self.query(step) + 1


@dataclass(frozen=True)
class BatchMasks:
    """Sentences tokenised as the model's first stack reads them, padded to one length, and their masks."""

    stack: str  # "encoder" or "decoder"
    causal: bool
    pieces: list[list[str]]  # per sentence, padded with the pad piece
    padding: np.ndarray  # (B, T) True at real tokens
    attention: np.ndarray  # (B, T, T) True = may attend (padding, and no-peek when causal)


def renamed(old: str, new: str) -> None:
    """Warn a caller of a name this module no longer uses (a notebook written before) which name to call instead."""
    message = f"{old} is now {new}: one attention sub-layer, as the paper names it"
    warnings.warn(message, DeprecationWarning, stacklevel=3)


def __getattr__(name: str) -> Any:
    if name == "Block":
        renamed("analysis.record.Block", "analysis.record.Sublayer")
        return Sublayer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
