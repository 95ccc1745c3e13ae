"""The Transformer of "Attention Is All You Need", instrumented: every forward returns `(logits, trace)`.

Read top to bottom: embeddings and positions, the feed-forward network and the residual connection, the parts a
model is assembled from, the encoder and decoder layers and stacks, the three models (encoder-decoder,
decoder-only, encoder-only), and how their weights start. Every class here is the paper's; a published model is
the same skeleton built from other parts (model/components/, chosen from the config by model.factory.build_model,
which also initialises the weights once every module exists).

Nothing is assigned on `self` in any `forward` and no hooks are used, so one model object can serve many threads
at once. Incremental decoding passes the previous trace back as `past`: its records hold every key and value so
far.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Literal

import torch
from torch import Tensor, nn

from model.attention import (
    Ablation,
    AttentionRecord,
    Linear,
    MultiHeadedAttention,
    Patch,
    attention_mask,
    padding_mask,
)
from model.config import ModelConfig
from model.names import layer_name, sublayer_name
from model.trace import Trace

Records = dict[str, AttentionRecord]
Activations = dict[str, Tensor]  # name → (B, T, ·): the residual stream and hidden layers (Trace.activations)
# sub-layer name (`decoder.layers.1.cross_attn`) → the heads switched off or patched there; a decoder layer's input
# (`decoder.layers.1.resid_pre`) → the stream patched there; a stack's token embeddings (`encoder.embed`,
# `decoder.embed`) → patched before the positions are added
Ablations = Mapping[str, Ablation | Patch]
NONE: Ablations = {}


def patched(patch: Ablation | Patch | None, x: Tensor) -> Tensor:
    """`x` with a Patch applied (a stack's token embeddings, under "encoder.embed" / "decoder.embed"); as it is
    without one."""
    if patch is None:
        return x
    if not isinstance(patch, Patch):
        raise ValueError("token embeddings are patched (model.attention.Patch), not ablated: an Ablation cuts heads")
    return patch.apply(x)


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    Section 3.5 of "Attention Is All You Need". Returns a float32 tensor of shape (max_len, d_model).
    """
    if d_model % 2:
        raise ValueError(f"the sinusoidal table needs an even d_model, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d_model/2,)
    angle = position / torch.pow(10000.0, two_i / d_model)  # (T, d_model/2)
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.float()


class Embeddings(nn.Module):
    """Token embeddings multiplied by √d_model (section 3.4)."""

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(d_model)

    def forward(self, ids: Tensor) -> Tensor:
        return self.lut(ids) * self.scale  # (B, T, d_model)


class PositionalEncoding(nn.Module):
    """Absolute positions added to the embeddings: the sinusoidal table of section 3.5, or a learned table (which
    the paper found to work as well). `rows` gives the ones a sequence uses."""

    def __init__(self, kind: Literal["sinusoidal", "learned"], max_len: int, d_model: int) -> None:
        super().__init__()
        if kind not in ("sinusoidal", "learned"):
            raise ValueError(f"PositionalEncoding adds sinusoidal or learned positions, not {kind!r}")
        self.max_len = max_len
        if kind == "learned":
            self.table = nn.Parameter(torch.empty(max_len, d_model))  # drawn by init_weights
        else:  # a buffer, rebuilt from the formula, never saved with the weights
            self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def rows(self, offset: int, length: int) -> Tensor:
        if offset + length > self.max_len:
            raise ValueError(f"sequence of {offset + length} positions exceeds max_len={self.max_len}")
        return self.table[offset : offset + length]  # (T, d_model)

    def forward(self, x: Tensor, offset: int = 0) -> tuple[Tensor, Tensor]:
        """`x` (B, T, d_model) plus the encodings of positions offset … offset + T - 1, and those rows."""
        rows = self.rows(offset, x.shape[1])
        return x + rows, rows


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (section 3.3), with dropout on the hidden layer. `linear(d_in, d_out)`
    makes each projection (nn.Linear, with biases, in the paper)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, linear: Linear = nn.Linear) -> None:
        super().__init__()
        self.w_1 = linear(d_model, d_ff)
        self.w_2 = linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def hidden(self, x: Tensor) -> Tensor:
        """The hidden layer, max(0, x W1 + b1): (B, T, d_ff)."""
        return torch.relu(self.w_1(x))

    def output(self, hidden: Tensor) -> Tensor:
        """The hidden layer projected back: (B, T, d_model)."""
        return self.w_2(self.dropout(hidden))

    def forward(self, x: Tensor) -> Tensor:
        return self.output(self.hidden(x))


class Residual(nn.Module):
    """post: LayerNorm(x + Dropout(Sublayer(x))), the paper (section 5.4); pre: x + Dropout(Sublayer(LayerNorm(x)))."""

    def __init__(self, norm: nn.Module, dropout: float, pre_norm: bool) -> None:
        super().__init__()
        self.norm = norm
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def input(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.pre_norm else x

    def output(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        y = x + self.dropout(sublayer_out)
        return y if self.pre_norm else self.norm(y)


@dataclass(frozen=True)
class Parts:
    """What a model is assembled from: each field makes a fresh module. `paper_parts(config)` gives the paper's;
    a published model swaps some for its own (model.factory.parts_for)."""

    embeddings: Callable[[], nn.Module]  # ids (B, T) → (B, T, d_model), its table named `lut`
    positions: Callable[[], nn.Module]  # (x, offset) → (x with its positions, the positional rows used)
    self_attention: Callable[[], nn.Module]  # as MultiHeadedAttention
    cross_attention: Callable[[], nn.Module]
    feed_forward: Callable[[], nn.Module]  # as FeedForward: hidden(x), output(hidden)
    norm: Callable[[], nn.Module]  # over the last axis, d_model wide
    linear: Linear  # (d_in, d_out) → a projection outside attention and feed-forward: the generator


def paper_parts(config: ModelConfig) -> Parts:
    """The paper's parts at `config`'s sizes: embeddings · √d_model, added positions, multi-head attention and a
    ReLU feed-forward network with biases, LayerNorm."""
    d_model = config.d_model
    attention = partial(MultiHeadedAttention, config.n_heads, d_model, config.dropout)
    return Parts(
        embeddings=partial(Embeddings, config.vocab_size, d_model),
        positions=partial(PositionalEncoding, config.positional, config.max_len, d_model),
        self_attention=attention,
        cross_attention=attention,
        feed_forward=partial(FeedForward, d_model, config.d_ff, config.dropout),
        norm=partial(nn.LayerNorm, d_model),
        linear=nn.Linear,
    )


def residual(config: ModelConfig, parts: Parts) -> Residual:
    return Residual(parts.norm(), config.dropout, pre_norm=config.norm == "pre")


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each inside a residual connection (section 3.1)."""

    def __init__(self, config: ModelConfig, parts: Parts) -> None:
        super().__init__()
        self.self_attn = parts.self_attention()
        self.feed_forward = parts.feed_forward()
        self.sublayer = nn.ModuleList([residual(config, parts) for _ in range(2)])

    def forward(
        self, x: Tensor, mask: Tensor, record: bool, ablate: Ablation | None = None, keep: bool = False
    ) -> tuple[Tensor, AttentionRecord, Activations]:
        """`keep`: also return the residual stream and each sub-layer's output, by name within the layer
        (Trace.activations); else {}."""
        h = self.sublayer[0].input(x)
        attn, rec = self.self_attn(h, h, mask, record=record, ablate=ablate)  # (B, T, d_model)
        mid = self.sublayer[0].output(x, attn)
        hidden = self.feed_forward.hidden(self.sublayer[1].input(mid))  # (B, T, d_ff)
        ff = self.feed_forward.output(hidden)  # (B, T, d_model)
        out = self.sublayer[1].output(mid, ff)
        acts = {"resid_pre": x, "self_attn.out": attn, "resid_mid": mid}
        acts |= {"feed_forward.hidden": hidden, "feed_forward.out": ff, "resid_post": out}
        return out, rec, acts if keep else {}


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder (encoder-decoder only), then feed-forward."""

    def __init__(self, config: ModelConfig, parts: Parts, cross: bool) -> None:
        super().__init__()
        self.self_attn = parts.self_attention()
        self.cross_attn = parts.cross_attention() if cross else None
        self.feed_forward = parts.feed_forward()
        self.sublayer = nn.ModuleList([residual(config, parts) for _ in range(3 if cross else 2)])

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
        """`past` holds this layer's records of the previous step ("self_attn", "cross_attn"), or nothing;
        `ablate` this layer's ablations, by the same keys, and a Patch of its input under "resid_pre"; `keep` as in
        EncoderLayer.

        Cross-attention projects the encoder `memory` once; with a past record its keys and values are reused.
        """
        if (patched := ablate.get("resid_pre")) is not None:
            x = patched.apply(x)
        h = self.sublayer[0].input(x)
        self_past, self_cut = past.get("self_attn"), ablate.get("self_attn")
        attn, self_rec = self.self_attn(h, h, self_mask, past=self_past, record=record, ablate=self_cut)
        mid = self.sublayer[0].output(x, attn)
        records = {"self_attn": self_rec}
        acts = {"resid_pre": x, "self_attn.out": attn, "resid_mid": mid}
        if self.cross_attn is not None:
            h = self.sublayer[1].input(mid)
            cached = past.get("cross_attn")
            source = memory if cached is None else None
            cross, records["cross_attn"] = self.cross_attn(
                h, source, cross_mask, past=cached, record=record, ablate=ablate.get("cross_attn")
            )
            mid = self.sublayer[1].output(mid, cross)
            acts |= {"cross_attn.out": cross, "resid_mid_cross": mid}
        last = self.sublayer[-1]
        hidden = self.feed_forward.hidden(last.input(mid))  # (B, T, d_ff)
        ff = self.feed_forward.output(hidden)  # (B, T, d_model)
        out = last.output(mid, ff)
        acts |= {"feed_forward.hidden": hidden, "feed_forward.out": ff, "resid_post": out}
        return out, records, acts if keep else {}


class Encoder(nn.Module):
    """N encoder layers (plus a final LayerNorm for pre-norm)."""

    def __init__(self, config: ModelConfig, parts: Parts) -> None:
        super().__init__()
        self.layers = nn.ModuleList([EncoderLayer(config, parts) for _ in range(config.n_encoder_layers)])
        self.norm = parts.norm() if config.norm == "pre" else nn.Identity()

    def forward(
        self, x: Tensor, mask: Tensor, record: bool, ablate: Ablations = NONE, keep: bool = False
    ) -> tuple[Tensor, Records, Activations]:
        records: Records = {}
        acts: Activations = {}
        for i, layer in enumerate(self.layers):
            name, sublayer = layer_name("encoder", i), sublayer_name("encoder", i, "self_attn")
            if (patched := ablate.get(f"{name}.resid_pre")) is not None:  # a Patch of the layer's input
                x = patched.apply(x)
            x, records[sublayer], mine = layer(x, mask, record, ablate.get(sublayer), keep)
            acts |= {f"{name}.{k}": t for k, t in mine.items()}
        x = self.norm(x)
        return x, records, (acts | {"encoder.output": x}) if keep else acts


class Decoder(nn.Module):
    """N decoder layers (plus a final LayerNorm for pre-norm) over embedded, position-encoded targets."""

    def __init__(self, config: ModelConfig, parts: Parts, cross: bool) -> None:
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(config, parts, cross) for _ in range(config.n_decoder_layers)])
        self.norm = parts.norm() if config.norm == "pre" else nn.Identity()

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
        records: Records = {}
        acts: Activations = {}
        for i, layer in enumerate(self.layers):
            name = layer_name("decoder", i)
            mine = {k.removeprefix(f"{name}."): r for k, r in past.items() if k.startswith(f"{name}.")}
            cut = {k.removeprefix(f"{name}."): a for k, a in ablate.items() if k.startswith(f"{name}.")}
            x, layer_records, layer_acts = layer(x, self_mask, memory, cross_mask, mine, record, cut, keep)
            records.update({f"{name}.{k}": r for k, r in layer_records.items()})
            acts |= {f"{name}.{k}": t for k, t in layer_acts.items()}
        x = self.norm(x)
        return x, records, (acts | {"decoder.output": x}) if keep else acts


class TransformerBase(nn.Module):
    """What the three models share: embeddings and positions, the encoder and the decoder their kind has (the
    decoder with cross-attention in an encoder-decoder), and the output projection (the generator).

    Built here from `parts` (default: the paper's) with PyTorch's own initial weights; model.factory.build_model
    builds a model from its config and initialises it once every module exists.
    """

    def __init__(self, config: ModelConfig, parts: Parts | None = None) -> None:
        super().__init__()
        parts = parts or paper_parts(config)
        self.config = config
        self.embed = parts.embeddings()
        self.positions = parts.positions()
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = Encoder(config, parts) if config.has_encoder else None
        self.decoder = Decoder(config, parts, config.has_cross_attention) if config.has_decoder else None
        self.generator = parts.linear(config.d_model, config.vocab_size)
        if config.tie_embeddings:  # section 3.4: one matrix embeds the tokens and scores them
            self.generator.weight = self.embed.lut.weight

    def with_positions(self, tokens: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        """The first layer's input, the token embeddings (B, T, d_model) plus their positions from `offset`, after
        dropout; and the positional rows used (T, d_model)."""
        x, rows = self.positions(tokens, offset)
        return self.dropout(x), rows

    def logits(self, x: Tensor) -> Tensor:
        """The output projection of the last stack's output: (B, T, vocab_size) (softmax gives probabilities)."""
        return self.generator(x)

    def encode(
        self, ids: Tensor, valid: Tensor, record: bool, ablate: Ablations, keep: bool
    ) -> tuple[Tensor, Records, Tensor, Activations]:
        """Encoder over `ids` (B, S), `valid` its real tokens: memory (B, S, d_model), records, PE rows, activations."""
        tokens = patched(ablate.get("encoder.embed"), self.embed(ids))  # (B, S, d_model)
        x, rows = self.with_positions(tokens, 0)
        memory, records, acts = self.encoder(x, attention_mask(valid, valid), record, ablate, keep)
        return memory, records, rows, ({"encoder.embed": tokens} | acts) if keep else acts

    def decode(
        self,
        target_ids: Tensor,
        past: Trace | None,
        memory: Tensor | None,
        source_valid: Tensor | None,
        record: bool,
        ablate: Ablations,
        keep: bool,
    ) -> tuple[Tensor, Tensor, Records, Tensor, Activations]:
        """Decoder over `target_ids` (B, T_new) after past's tokens: logits, target_valid, records, PE rows and
        activations."""
        offset = past.target_valid.shape[1] if past else 0
        new_valid = padding_mask(target_ids, self.config.pad_id)  # (B, T_new)
        target_valid = torch.cat([past.target_valid, new_valid], dim=1) if past else new_valid  # (B, T_all)
        self_mask = attention_mask(new_valid, target_valid, causal=True, query_offset=offset)  # (B, T_new, T_all)
        cross_mask = None if source_valid is None else attention_mask(new_valid, source_valid)  # (B, T_new, S)
        tokens = patched(ablate.get("decoder.embed"), self.embed(target_ids))  # (B, T_new, d_model)
        x, rows = self.with_positions(tokens, offset)
        past_records = past.attention if past else {}
        x, records, acts = self.decoder(x, self_mask, memory, cross_mask, past_records, record, ablate, keep)
        acts = ({"decoder.embed": tokens} | acts) if keep else acts
        return self.logits(x), target_valid, records, rows, acts


class EncoderDecoder(TransformerBase):
    """The paper's model: the encoder reads the source, the decoder writes the target one token at a time."""

    def __init__(self, config: ModelConfig, parts: Parts | None = None) -> None:
        if config.kind != "encoder-decoder":
            raise ValueError("EncoderDecoder needs a config with kind='encoder-decoder'")
        super().__init__(config, parts)

    def forward(
        self,
        source_ids: Tensor,
        target_ids: Tensor,
        past: Trace | None = None,
        record: bool = True,
        ablate: Ablations = NONE,
        activations: bool = False,
    ) -> tuple[Tensor, Trace]:
        """Logits (B, T, vocab) for the next token after each target position (teacher forcing), and the trace.
        `ablate`: heads switched off, by sub-layer name (model.attention.Ablation). `activations`: also record the
        residual stream and the feed-forward layers (Trace.activations).

        With `past`, the trace of the previous call on the same source, the encoder does not run again:
        the decoder continues after past's target tokens and reuses its keys and values.
        """
        source_valid = padding_mask(source_ids, self.config.pad_id)  # (B, S)
        memory, records, positional_encoding, acts = None, {}, {}, {}
        if past is None:
            memory, records, positional_encoding["encoder"], acts = self.encode(
                source_ids, source_valid, record, ablate, activations
            )
        logits, target_valid, dec_records, positional_encoding["decoder"], dec_acts = self.decode(
            target_ids, past, memory, source_valid, record, ablate, activations
        )
        offset = past.target_valid.shape[1] if past else 0
        trace = Trace(
            self.config.kind,
            source_ids,
            target_ids,
            target_valid,
            positional_encoding,
            records | dec_records,
            offset,
            acts | dec_acts,
        )
        return logits, trace


class DecoderOnlyLM(TransformerBase):
    """A language model: the decoder without cross-attention, predicting each next token."""

    def __init__(self, config: ModelConfig, parts: Parts | None = None) -> None:
        if config.kind != "decoder-only":
            raise ValueError("DecoderOnlyLM needs a config with kind='decoder-only'")
        super().__init__(config, parts)

    def forward(
        self,
        ids: Tensor,
        past: Trace | None = None,
        record: bool = True,
        ablate: Ablations = NONE,
        activations: bool = False,
    ) -> tuple[Tensor, Trace]:
        """Logits (B, T, vocab) for the token after each position of `ids`, continuing `past` if given;
        `ablate`: heads switched off, by sub-layer name (model.attention.Ablation); `activations`: also record the
        residual stream and the feed-forward layers (Trace.activations)."""
        logits, target_valid, records, rows, acts = self.decode(ids, past, None, None, record, ablate, activations)
        offset = past.target_valid.shape[1] if past else 0
        return logits, Trace(self.config.kind, None, ids, target_valid, {"decoder": rows}, records, offset, acts)


class EncoderOnly(TransformerBase):
    """The encoder alone, every token seeing every other: no decoder, nothing to continue.

    The generator reads the encoder's output at every position: with tied embeddings, the dot product of each
    output vector with every token embedding (which tokens the output vector lies closest to, not a prediction).
    """

    def __init__(self, config: ModelConfig, parts: Parts | None = None) -> None:
        if config.kind != "encoder-only":
            raise ValueError("EncoderOnly needs a config with kind='encoder-only'")
        super().__init__(config, parts)

    def forward(
        self, ids: Tensor, record: bool = True, ablate: Ablations = NONE, activations: bool = False
    ) -> tuple[Tensor, Trace]:
        """Logits (B, T, vocab) at every position of `ids` (B, T), and the trace; its source_ids are `ids` and
        it has no decoder tokens. `ablate`: heads switched off, by sub-layer name (model.attention.Ablation);
        `activations`: also record the residual stream and the feed-forward layers (Trace.activations)."""
        valid = padding_mask(ids, self.config.pad_id)  # (B, T)
        x, records, rows, acts = self.encode(ids, valid, record, ablate, activations)
        trace = Trace(self.config.kind, ids, ids[:, :0], valid[:, :0], {"encoder": rows}, records, 0, acts)
        return self.logits(x), trace


Model = EncoderDecoder | DecoderOnlyLM | EncoderOnly


def init_weights(module: nn.Module) -> None:
    """The initial weights, as the Annotated Transformer draws them: Xavier-uniform for every projection's matrix
    and zero biases; N(0, 1/d_model) for token embeddings (multiplied by √d_model, their rows start near unit
    length); N(0, 0.02²) for a learned positions table. Norms start as the identity (gain 1, bias 0) when built.
    Apply it to every module once all exist (model.factory.build_model)."""
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=module.embedding_dim**-0.5)
    elif isinstance(module, PositionalEncoding) and isinstance(module.table, nn.Parameter):
        nn.init.normal_(module.table, std=0.02)
