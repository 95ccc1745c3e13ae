"""The Transformer of "Attention Is All You Need", instrumented: every forward returns `(logits, trace)`.

Read top to bottom: embeddings and positions, the two sub-layers, the encoder and decoder layers, then the
three models (encoder-decoder, decoder-only, encoder-only). The switches of ModelConfig after the paper's
hyperparameters (rotary positions, RMSNorm, GELU/SwiGLU, grouped-query attention, no biases, BERT's embedding
norm and token types) make the same classes a BERT or a Llama; their defaults are the 2017 model. Nothing is
assigned on `self` in any `forward` and no hooks are used, so one model object can serve many threads at once.
Incremental decoding passes the previous trace back as `past`: its records hold every key and value so far.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from model.attention import Ablation, AttentionRecord, MultiHeadedAttention, attention_mask, padding_mask, rotary_table
from model.config import ModelConfig
from model.trace import Trace

Records = dict[str, AttentionRecord]
Ablations = Mapping[str, Ablation]  # block name (`decoder.layers.1.cross_attn`) → the heads switched off there
NONE: Ablations = {}


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
    """Token embeddings multiplied by √d_model (section 3.4); `scale=False` leaves them as they are (BERT, Llama)."""

    def __init__(self, vocab_size: int, d_model: int, scale: bool = True) -> None:
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model
        self.scale = math.sqrt(d_model) if scale else 1.0

    def forward(self, ids: Tensor) -> Tensor:
        return self.lut(ids) * self.scale  # (B, T, d_model)


class PositionalEncoding(nn.Module):
    """Sinusoidal (section 3.5) or learned absolute positions, added to the embeddings; or rotary positions,
    which are not added but turn each head's queries and keys (model.attention.rotary_table): then the table's
    rows are the (cos | sin) of each position's angles, d_head wide. `rows` gives the ones a sequence uses."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.max_len = config.max_len
        self.learned = config.positional == "learned"
        self.rotary = config.positional == "rotary"
        if self.learned:
            self.table = nn.Parameter(torch.randn(config.max_len, config.d_model) * 0.02)
        elif self.rotary:  # a buffer, rebuilt from the formula, never saved with the weights
            table = rotary_table(torch.arange(config.max_len), config.d_head, config.rope_base)
            self.register_buffer("table", table, persistent=False)
        else:
            self.register_buffer("table", sinusoidal_table(config.max_len, config.d_model), persistent=False)

    def rows(self, offset: int, length: int) -> Tensor:
        if offset + length > self.max_len:
            raise ValueError(f"sequence of {offset + length} positions exceeds max_len={self.max_len}")
        return self.table[offset : offset + length]  # (T, d_model); rotary: (T, d_head)


def make_norm(config: ModelConfig) -> nn.Module:
    """LayerNorm (Ba et al. 2016), or RMSNorm (Zhang & Sennrich 2019: x / RMS(x) · g, no centring, no bias)."""
    if config.norm_type == "rms":
        return nn.RMSNorm(config.d_model, eps=config.norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (section 3.3); `activation="gelu"` uses GELU instead of max(0, ·)
    (BERT), `"gelu_tanh"` its tanh approximation (GPT-2); `"swiglu"` is W2 (SiLU(x W1) ⊙ x W3), a gated unit with
    a third matrix (Shazeer 2020; Llama)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d_model, d_ff, bias = config.d_model, config.d_ff, config.bias
        self.activation = config.activation
        self.w_1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)
        self.w_3 = nn.Linear(d_model, d_ff, bias=bias) if self.activation == "swiglu" else None
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        if self.activation == "swiglu":
            hidden = F.silu(self.w_1(x)) * self.w_3(x)
        elif self.activation == "gelu":
            hidden = F.gelu(self.w_1(x))  # x Φ(x), Φ the normal distribution's CDF (Hendrycks & Gimpel 2016)
        elif self.activation == "gelu_tanh":
            hidden = F.gelu(self.w_1(x), approximate="tanh")  # 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))
        else:
            hidden = torch.relu(self.w_1(x))
        return self.w_2(self.dropout(hidden))  # (B, T, d_model)


class Residual(nn.Module):
    """post: LayerNorm(x + Dropout(Sublayer(x))), the paper; pre: x + Dropout(Sublayer(LayerNorm(x)))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.norm = make_norm(config)
        self.dropout = nn.Dropout(config.dropout)
        self.pre_norm = config.norm == "pre"

    def input(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.pre_norm else x

    def output(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        y = x + self.dropout(sublayer_out)
        return y if self.pre_norm else self.norm(y)


def make_attention(config: ModelConfig) -> MultiHeadedAttention:
    return MultiHeadedAttention(config.n_heads, config.d_model, config.dropout, config.n_kv_heads, config.bias)


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each inside a residual connection."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.self_attn = make_attention(config)
        self.feed_forward = FeedForward(config)
        self.sublayer = nn.ModuleList([Residual(config) for _ in range(2)])

    def forward(
        self, x: Tensor, mask: Tensor, record: bool, ablate: Ablation | None = None, rotary: Tensor | None = None
    ) -> tuple[Tensor, AttentionRecord]:
        """`rotary`: the rotation rows of the positions (rotary positions only), else None."""
        h = self.sublayer[0].input(x)
        attn, rec = self.self_attn(h, h, mask, record=record, ablate=ablate, rotary=rotary)
        x = self.sublayer[0].output(x, attn)
        x = self.sublayer[1].output(x, self.feed_forward(self.sublayer[1].input(x)))
        return x, rec


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder (encoder-decoder only), then feed-forward."""

    def __init__(self, config: ModelConfig, cross: bool) -> None:
        super().__init__()
        self.self_attn = make_attention(config)
        self.cross_attn = make_attention(config) if cross else None
        self.feed_forward = FeedForward(config)
        n_sub = 3 if cross else 2
        self.sublayer = nn.ModuleList([Residual(config) for _ in range(n_sub)])

    def forward(
        self,
        x: Tensor,
        self_mask: Tensor,
        memory: Tensor | None,
        cross_mask: Tensor | None,
        past: Records,
        record: bool,
        ablate: Ablations = NONE,
        rotary: Tensor | None = None,
    ) -> tuple[Tensor, Records]:
        """`past` holds this layer's records of the previous step ("self_attn", "cross_attn"), or nothing;
        `ablate` this layer's ablations, by the same keys; `rotary` the new positions' rotation rows, or None.

        Cross-attention projects the encoder `memory` once; with a past record its keys and values are reused.
        """
        h = self.sublayer[0].input(x)
        self_past, self_cut = past.get("self_attn"), ablate.get("self_attn")
        attn, self_rec = self.self_attn(h, h, self_mask, past=self_past, record=record, ablate=self_cut, rotary=rotary)
        x = self.sublayer[0].output(x, attn)
        records = {"self_attn": self_rec}
        if self.cross_attn is not None:
            h = self.sublayer[1].input(x)
            cached = past.get("cross_attn")
            source = memory if cached is None else None
            attn, records["cross_attn"] = self.cross_attn(
                h, source, cross_mask, past=cached, record=record, ablate=ablate.get("cross_attn")
            )
            x = self.sublayer[1].output(x, attn)
        last = self.sublayer[-1]
        x = last.output(x, self.feed_forward(last.input(x)))
        return x, records


class Encoder(nn.Module):
    """N encoder layers (plus a final LayerNorm for pre-norm)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList([EncoderLayer(config) for _ in range(config.n_encoder_layers)])
        self.norm = make_norm(config) if config.norm == "pre" else nn.Identity()

    def forward(
        self, x: Tensor, mask: Tensor, record: bool, ablate: Ablations = NONE, rotary: Tensor | None = None
    ) -> tuple[Tensor, Records]:
        records: Records = {}
        for i, layer in enumerate(self.layers):
            name = f"encoder.layers.{i}.self_attn"
            x, records[name] = layer(x, mask, record, ablate.get(name), rotary)
        return self.norm(x), records


class Decoder(nn.Module):
    """N decoder layers (plus a final LayerNorm for pre-norm) over embedded, position-encoded targets."""

    def __init__(self, config: ModelConfig, cross: bool) -> None:
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(config, cross) for _ in range(config.n_decoder_layers)])
        self.norm = make_norm(config) if config.norm == "pre" else nn.Identity()

    def forward(
        self,
        x: Tensor,
        self_mask: Tensor,
        memory: Tensor | None,
        cross_mask: Tensor | None,
        past: Records,
        record: bool,
        ablate: Ablations = NONE,
        rotary: Tensor | None = None,
    ) -> tuple[Tensor, Records]:
        records: Records = {}
        for i, layer in enumerate(self.layers):
            name = f"decoder.layers.{i}"
            mine = {k.removeprefix(f"{name}."): r for k, r in past.items() if k.startswith(f"{name}.")}
            cut = {k.removeprefix(f"{name}."): a for k, a in ablate.items() if k.startswith(f"{name}.")}
            x, layer_records = layer(x, self_mask, memory, cross_mask, mine, record, cut, rotary)
            records.update({f"{name}.{k}": r for k, r in layer_records.items()})
        return self.norm(x), records


class MaskedLMHead(nn.Module):
    """BERT's masked-LM head before the (tied) output projection: LayerNorm(GELU(x W + b)) (Devlin et al. 2019)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.norm = make_norm(config)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(F.gelu(self.dense(x)))  # (B, T, d_model)


class TransformerBase(nn.Module):
    """What the models share: embeddings, positions, the decoder (none when `cross` is None: encoder-only) and
    the output projection."""

    def __init__(self, config: ModelConfig, cross: bool | None) -> None:
        super().__init__()
        self.config = config
        self.embed = Embeddings(config.vocab_size, config.d_model, config.embed_scale)
        self.positions = PositionalEncoding(config)
        if config.n_token_types:  # BERT's segment embeddings: row 0 (the first sentence) is added to every token
            self.token_types = nn.Embedding(config.n_token_types, config.d_model)
        self.embed_norm = make_norm(config) if config.embed_norm else nn.Identity()
        self.dropout = nn.Dropout(config.dropout)
        self.decoder = None if cross is None else Decoder(config, cross)
        self.head = MaskedLMHead(config) if config.mlm_head else nn.Identity()
        self.generator = nn.Linear(config.d_model, config.vocab_size, bias=config.bias)
        if config.tie_embeddings:
            self.generator.weight = self.embed.lut.weight
        self.apply(_init_weights)

    def embed_with_positions(self, ids: Tensor, offset: int = 0) -> tuple[Tensor, Tensor]:
        """Embedding (· √d_model) + PE rows; returns the sum (B, T, d_model) and the rows used (T, d_model).

        With rotary positions nothing is added: the rows returned are the (T, d_head) rotations that the
        attention applies to queries and keys."""
        pe = self.positions.rows(offset, ids.shape[1])
        x = self.embed(ids) if self.positions.rotary else self.embed(ids) + pe  # (B, T, d_model)
        if self.config.n_token_types:
            x = x + self.token_types.weight[0]
        return self.dropout(self.embed_norm(x)), pe

    def rotary(self, rows: Tensor) -> Tensor | None:
        """The rows to turn queries and keys by: `rows` for rotary positions, None when positions are added."""
        return rows if self.positions.rotary else None

    def decode(
        self,
        target_ids: Tensor,
        past: Trace | None,
        memory: Tensor | None,
        source_valid: Tensor | None,
        record: bool,
        ablate: Ablations = NONE,
    ) -> tuple[Tensor, Tensor, Records, Tensor]:
        """Decoder over `target_ids` (B, T_new) after past's tokens: logits, target_valid, records, PE rows."""
        offset = past.target_valid.shape[1] if past else 0
        new_valid = padding_mask(target_ids, self.config.pad_id)  # (B, T_new)
        target_valid = torch.cat([past.target_valid, new_valid], dim=1) if past else new_valid  # (B, T_all)
        self_mask = attention_mask(new_valid, target_valid, causal=True, query_offset=offset)  # (B, T_new, T_all)
        cross_mask = None if source_valid is None else attention_mask(new_valid, source_valid)  # (B, T_new, S)
        x, pe = self.embed_with_positions(target_ids, offset)
        past_records = past.attention if past else {}
        x, records = self.decoder(x, self_mask, memory, cross_mask, past_records, record, ablate, self.rotary(pe))
        return self.generator(self.head(x)), target_valid, records, pe


class EncoderDecoder(TransformerBase):
    """The paper's model: the encoder reads the source, the decoder writes the target one token at a time."""

    def __init__(self, config: ModelConfig) -> None:
        if not config.is_encoder_decoder:
            raise ValueError("EncoderDecoder needs a config with kind='encoder-decoder'")
        super().__init__(config, cross=True)
        self.encoder = Encoder(config)

    def forward(
        self,
        source_ids: Tensor,
        target_ids: Tensor,
        past: Trace | None = None,
        record: bool = True,
        ablate: Ablations = NONE,
    ) -> tuple[Tensor, Trace]:
        """Logits (B, T, vocab) for the next token after each target position (teacher forcing), and the trace.
        `ablate`: heads switched off, by block name (model.attention.Ablation).

        With `past`, the trace of the previous call on the same source, the encoder does not run again:
        the decoder continues after past's target tokens and reuses its keys and values.
        """
        source_valid = padding_mask(source_ids, self.config.pad_id)  # (B, S)
        memory, records, positional = None, {}, {}
        if past is None:
            x, pe = self.embed_with_positions(source_ids)
            positional["encoder"] = pe
            memory, records = self.encoder(
                x, attention_mask(source_valid, source_valid), record, ablate, self.rotary(pe)
            )
        logits, target_valid, dec_records, positional["decoder"] = self.decode(
            target_ids, past, memory, source_valid, record, ablate
        )
        offset = past.target_valid.shape[1] if past else 0
        trace = Trace(self.config.kind, source_ids, target_ids, target_valid, positional, records | dec_records, offset)
        return logits, trace


class DecoderOnlyLM(TransformerBase):
    """A language model: the decoder without cross-attention, predicting each next token."""

    def __init__(self, config: ModelConfig) -> None:
        if config.is_encoder_decoder:
            raise ValueError("DecoderOnlyLM needs a config with kind='decoder-only'")
        super().__init__(config, cross=False)

    def forward(
        self, ids: Tensor, past: Trace | None = None, record: bool = True, ablate: Ablations = NONE
    ) -> tuple[Tensor, Trace]:
        """Logits (B, T, vocab) for the token after each position of `ids`, continuing `past` if given;
        `ablate`: heads switched off, by block name (model.attention.Ablation)."""
        logits, target_valid, records, pe = self.decode(ids, past, None, None, record, ablate)
        offset = past.target_valid.shape[1] if past else 0
        return logits, Trace(self.config.kind, None, ids, target_valid, {"decoder": pe}, records, offset)


class EncoderOnly(TransformerBase):
    """The encoder alone, every token seeing every other (BERT): no decoder, nothing to continue.

    The generator reads the encoder's output at every position: with `mlm_head`, the masked-LM head's logits
    (what a [MASK] there should be); without it, with tied embeddings, the dot product of each output vector
    with every token embedding (which tokens the output vector lies closest to, not a prediction).
    """

    def __init__(self, config: ModelConfig) -> None:
        if config.kind != "encoder-only":
            raise ValueError("EncoderOnly needs a config with kind='encoder-only'")
        super().__init__(config, cross=None)
        self.encoder = Encoder(config)
        self.encoder.apply(_init_weights)

    def forward(self, ids: Tensor, record: bool = True, ablate: Ablations = NONE) -> tuple[Tensor, Trace]:
        """Logits (B, T, vocab) at every position of `ids` (B, T), and the trace; its source_ids are `ids` and
        it has no decoder tokens. `ablate`: heads switched off, by block name (model.attention.Ablation)."""
        valid = padding_mask(ids, self.config.pad_id)  # (B, T)
        x, pe = self.embed_with_positions(ids)
        x, records = self.encoder(x, attention_mask(valid, valid), record, ablate, self.rotary(pe))
        trace = Trace(self.config.kind, ids, ids[:, :0], valid[:, :0], {"encoder": pe}, records)
        return self.generator(self.head(x)), trace


Model = EncoderDecoder | DecoderOnlyLM | EncoderOnly


def _init_weights(module: nn.Module) -> None:
    """Xavier-uniform for matrices, as the Annotated Transformer does; small normal for embeddings."""
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=module.embedding_dim**-0.5)


def build_model(config: ModelConfig) -> Model:
    """The model class the config names, freshly initialised."""
    models = {"encoder-decoder": EncoderDecoder, "decoder-only": DecoderOnlyLM, "encoder-only": EncoderOnly}
    return models[config.kind](config)
