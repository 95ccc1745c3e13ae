"""The Transformer of "Attention Is All You Need", instrumented: every forward returns `(logits, trace)`.

Read top to bottom: embeddings and positions, the two sub-layers, the encoder and decoder layers, then the
two models (encoder-decoder, decoder-only). Nothing is assigned on `self` in any `forward` and no hooks are
used, so one model object can serve many threads at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from model.attention import KV, AttentionRecord, MultiHeadedAttention
from model.config import ModelConfig
from model.functional import attention_mask, padding_mask, sinusoidal_table
from model.trace import Trace


class Embeddings(nn.Module):
    """Token embeddings multiplied by √d_model (section 3.4)."""

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, ids: Tensor) -> Tensor:
        return self.lut(ids) * math.sqrt(self.d_model)  # (B, T, d_model)


class PositionalEncoding(nn.Module):
    """Sinusoidal (section 3.5) or learned absolute positions; `rows` gives the ones a sequence uses."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.max_len = config.max_len
        self.learned = config.positional == "learned"
        if self.learned:
            self.table = nn.Parameter(torch.randn(config.max_len, config.d_model) * 0.02)
        else:  # a buffer, rebuilt from the formula, never saved with the weights
            self.register_buffer("table", sinusoidal_table(config.max_len, config.d_model), persistent=False)

    def rows(self, offset: int, length: int) -> Tensor:
        if offset + length > self.max_len:
            raise ValueError(f"sequence of {offset + length} positions exceeds max_len={self.max_len}")
        return self.table[offset : offset + length]  # (T, d_model)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (section 3.3)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(torch.relu(self.w_1(x))))


class Residual(nn.Module):
    """post: LayerNorm(x + Dropout(Sublayer(x))), the paper; pre: x + Dropout(Sublayer(LayerNorm(x)))."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def input(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.pre_norm else x

    def output(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        y = x + self.dropout(sublayer_out)
        return y if self.pre_norm else self.norm(y)


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each inside a residual connection."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        pre = config.norm == "pre"
        self.self_attn = MultiHeadedAttention(config.n_heads, config.d_model, config.dropout)
        self.feed_forward = FeedForward(config.d_model, config.d_ff, config.dropout)
        self.sublayer = nn.ModuleList([Residual(config.d_model, config.dropout, pre) for _ in range(2)])

    def forward(self, x: Tensor, mask: Tensor, record: bool) -> tuple[Tensor, AttentionRecord | None]:
        h = self.sublayer[0].input(x)
        attn, rec, _ = self.self_attn(h, h, mask, record=record)
        x = self.sublayer[0].output(x, attn)
        x = self.sublayer[1].output(x, self.feed_forward(self.sublayer[1].input(x)))
        return x, rec


@dataclass(frozen=True)
class LayerCache:
    """Keys and values one decoder layer has seen: its own past (self) and the encoder memory (cross)."""

    self_kv: KV
    cross_kv: KV | None = None


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder (encoder-decoder only), then feed-forward."""

    def __init__(self, config: ModelConfig, cross: bool) -> None:
        super().__init__()
        pre = config.norm == "pre"
        self.self_attn = MultiHeadedAttention(config.n_heads, config.d_model, config.dropout)
        self.cross_attn = MultiHeadedAttention(config.n_heads, config.d_model, config.dropout) if cross else None
        self.feed_forward = FeedForward(config.d_model, config.d_ff, config.dropout)
        n_sub = 3 if cross else 2
        self.sublayer = nn.ModuleList([Residual(config.d_model, config.dropout, pre) for _ in range(n_sub)])

    def forward(
        self,
        x: Tensor,
        self_mask: Tensor,
        memory: Tensor | None,
        cross_mask: Tensor | None,
        cache: LayerCache | None,
        record: bool,
    ) -> tuple[Tensor, dict[str, AttentionRecord | None], LayerCache]:
        h = self.sublayer[0].input(x)
        attn, self_rec, self_kv = self.self_attn(h, h, self_mask, past=cache.self_kv if cache else None, record=record)
        x = self.sublayer[0].output(x, attn)
        records: dict[str, AttentionRecord | None] = {"self_attn": self_rec}
        cross_kv = None
        if self.cross_attn is not None:
            h = self.sublayer[1].input(x)
            past = cache.cross_kv if cache else None
            source = None if past is not None else memory
            attn, cross_rec, cross_kv = self.cross_attn(h, source, cross_mask, past=past, record=record)
            x = self.sublayer[1].output(x, attn)
            records["cross_attn"] = cross_rec
        last = self.sublayer[-1]
        x = last.output(x, self.feed_forward(last.input(x)))
        return x, records, LayerCache(self_kv, cross_kv)


@dataclass(frozen=True)
class DecoderCache:
    """Everything incremental decoding carries from one step to the next."""

    layers: tuple[LayerCache, ...]
    target_valid: Tensor  # (B, T_so_far) booleans
    memory: Tensor | None = None  # (B, S, d_model), encoder-decoder only
    source_valid: Tensor | None = None  # (B, S)

    @property
    def length(self) -> int:
        return self.target_valid.shape[1]


class Decoder(nn.Module):
    """N decoder layers (plus a final LayerNorm for pre-norm) over embedded, position-encoded targets."""

    def __init__(self, config: ModelConfig, cross: bool) -> None:
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(config, cross) for _ in range(config.n_decoder_layers)])
        self.norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()

    def forward(
        self,
        x: Tensor,
        self_mask: Tensor,
        memory: Tensor | None,
        cross_mask: Tensor | None,
        caches: tuple[LayerCache, ...] | None,
        record: bool,
    ) -> tuple[Tensor, dict[str, AttentionRecord], tuple[LayerCache, ...]]:
        records: dict[str, AttentionRecord] = {}
        new_caches = []
        for i, layer in enumerate(self.layers):
            x, layer_records, cache = layer(x, self_mask, memory, cross_mask, caches[i] if caches else None, record)
            new_caches.append(cache)
            records.update({f"decoder.layers.{i}.{k}": r for k, r in layer_records.items() if r is not None})
        return self.norm(x), records, tuple(new_caches)


class Encoder(nn.Module):
    """N encoder layers (plus a final LayerNorm for pre-norm)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList([EncoderLayer(config) for _ in range(config.n_encoder_layers)])
        self.norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()

    def forward(self, x: Tensor, mask: Tensor, record: bool) -> tuple[Tensor, dict[str, AttentionRecord]]:
        records: dict[str, AttentionRecord] = {}
        for i, layer in enumerate(self.layers):
            x, rec = layer(x, mask, record)
            if rec is not None:
                records[f"encoder.layers.{i}.self_attn"] = rec
        return self.norm(x), records


class TransformerBase(nn.Module):
    """What both models share: embeddings, positions, the decoder and the output projection."""

    def __init__(self, config: ModelConfig, cross: bool) -> None:
        super().__init__()
        self.config = config
        self.embed = Embeddings(config.vocab_size, config.d_model)
        self.positions = PositionalEncoding(config)
        self.dropout = nn.Dropout(config.dropout)
        self.decoder = Decoder(config, cross)
        self.generator = nn.Linear(config.d_model, config.vocab_size)
        if config.tie_embeddings:
            self.generator.weight = self.embed.lut.weight
        self.apply(_init_weights)

    def embed_with_positions(self, ids: Tensor, offset: int = 0) -> tuple[Tensor, Tensor]:
        """Embedding · √d_model + PE rows; returns the sum (B, T, d_model) and the rows used (T, d_model)."""
        pe = self.positions.rows(offset, ids.shape[1])
        return self.dropout(self.embed(ids) + pe), pe

    def decode(
        self,
        target_ids: Tensor,
        cache: DecoderCache | None,
        memory: Tensor | None,
        source_valid: Tensor | None,
        record: bool,
    ) -> tuple[Tensor, dict[str, AttentionRecord], dict[str, Tensor], Tensor, DecoderCache]:
        offset = cache.length if cache else 0
        new_valid = padding_mask(target_ids, self.config.pad_id)  # (B, T_new)
        target_valid = torch.cat([cache.target_valid, new_valid], dim=1) if cache else new_valid
        self_mask = attention_mask(new_valid, target_valid, causal=True, query_offset=offset)  # (B, T_new, T)
        masks = {"decoder.self_attn": self_mask}
        cross_mask = None
        if source_valid is not None:
            cross_mask = attention_mask(new_valid, source_valid)  # (B, T_new, S)
            masks["decoder.cross_attn"] = cross_mask
        x, pe = self.embed_with_positions(target_ids, offset)
        x, records, layers = self.decoder(x, self_mask, memory, cross_mask, cache.layers if cache else None, record)
        new_cache = DecoderCache(layers, target_valid, memory, source_valid)
        return self.generator(x), records, masks, pe, new_cache


class EncoderDecoder(TransformerBase):
    """The paper's model: the encoder reads the source, the decoder writes the target one token at a time."""

    def __init__(self, config: ModelConfig) -> None:
        if not config.is_encoder_decoder:
            raise ValueError("EncoderDecoder needs a config with kind='encoder-decoder'")
        super().__init__(config, cross=True)
        self.encoder = Encoder(config)

    def encode(self, source_ids: Tensor, record: bool = True) -> tuple[Tensor, Tensor, dict, Tensor, Tensor]:
        """Source ids (B, S) → memory (B, S, d_model), source_valid, records, source mask, PE rows."""
        source_valid = padding_mask(source_ids, self.config.pad_id)  # (B, S)
        mask = attention_mask(source_valid, source_valid)  # (B, S, S)
        x, pe = self.embed_with_positions(source_ids)
        memory, records = self.encoder(x, mask, record)
        return memory, source_valid, records, mask, pe

    def forward(self, source_ids: Tensor, target_ids: Tensor, record: bool = True) -> tuple[Tensor, Trace]:
        """Teacher-forced pass: logits (B, T, vocab) for the next token after each target position."""
        memory, source_valid, enc_records, enc_mask, enc_pe = self.encode(source_ids, record)
        logits, dec_records, masks, dec_pe, _ = self.decode(target_ids, None, memory, source_valid, record)
        trace = Trace(
            kind=self.config.kind,
            source_ids=source_ids,
            target_ids=target_ids,
            positional={"encoder": enc_pe, "decoder": dec_pe},
            masks={"encoder.self_attn": enc_mask, **masks},
            attention={**enc_records, **dec_records},
        )
        return logits, trace

    def start_cache(self, source_ids: Tensor) -> tuple[DecoderCache, dict, Tensor, Tensor]:
        """Encode once and project every cross-attention's keys and values once, for incremental decoding."""
        memory, source_valid, enc_records, enc_mask, enc_pe = self.encode(source_ids)
        empty = memory.new_zeros(memory.shape[0], self.config.n_heads, 0, self.config.d_head)
        layers = tuple(LayerCache((empty, empty), layer.cross_attn.project_kv(memory)) for layer in self.decoder.layers)
        valid = torch.zeros(memory.shape[0], 0, dtype=torch.bool, device=memory.device)
        return DecoderCache(layers, valid, memory, source_valid), enc_records, enc_mask, enc_pe

    def step(self, target_ids: Tensor, cache: DecoderCache, record: bool = True) -> tuple[Tensor, Trace, DecoderCache]:
        """Decode new target tokens (B, T_new) after those in `cache`; logits equal a full recomputation."""
        logits, records, masks, pe, new_cache = self.decode(target_ids, cache, None, cache.source_valid, record)
        trace = Trace(self.config.kind, None, target_ids, {"decoder": pe}, masks, records, query_offset=cache.length)
        return logits, trace, new_cache


class DecoderOnlyLM(TransformerBase):
    """A language model: the decoder without cross-attention, predicting each next token."""

    def __init__(self, config: ModelConfig) -> None:
        if config.is_encoder_decoder:
            raise ValueError("DecoderOnlyLM needs a config with kind='decoder-only'")
        super().__init__(config, cross=False)

    def forward(self, ids: Tensor, record: bool = True) -> tuple[Tensor, Trace]:
        logits, trace, _ = self.step(ids, None, record)
        return logits, trace

    def step(self, ids: Tensor, cache: DecoderCache | None, record: bool = True) -> tuple[Tensor, Trace, DecoderCache]:
        """Process new tokens (B, T_new) after those in `cache` (None: from the start)."""
        logits, records, masks, pe, new_cache = self.decode(ids, cache, None, None, record)
        offset = cache.length if cache else 0
        return logits, Trace(self.config.kind, None, ids, {"decoder": pe}, masks, records, offset), new_cache


def _init_weights(module: nn.Module) -> None:
    """Xavier-uniform for matrices, as the Annotated Transformer does; small normal for embeddings."""
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=module.embedding_dim**-0.5)


def build_model(config: ModelConfig) -> EncoderDecoder | DecoderOnlyLM:
    """The model class the config names, freshly initialised."""
    return EncoderDecoder(config) if config.is_encoder_decoder else DecoderOnlyLM(config)
