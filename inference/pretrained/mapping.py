"""Published architectures as our ModelConfig with its Published group of switches, and their tensor names mapped
onto our modules.

Four layouts, all as Hugging Face `transformers` writes them (config.json keys, state-dict names): BERT
(`BertModel`), GPT-2 (`GPT2LMHeadModel`, `GPT2Model`), Llama (`LlamaForCausalLM`) and GPT-NeoX
(`GPTNeoXForCausalLM`). The GGUF reader renames llama.cpp's tensors to the Llama names first, so one mapping
serves both files; GPT-2's and GPT-NeoX's fused attention weights are split into one tensor per projection first
(`split_gpt2`, `split_neox`). `fill_model` then checks every
tensor against the model the config builds and names the first one that is missing, unexpected or of the wrong
shape.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from model.config import ConfigError, ModelConfig, Published
from model.factory import build_model
from model.transformer import Model


class MappingError(ValueError):
    """A published checkpoint does not fit our model: the message names the first field or tensor that differs."""


def _field(config: Mapping[str, Any], key: str, source: str, default: Any = ...) -> Any:
    if key in config:
        return config[key]
    if default is ...:
        raise MappingError(f"{source}: config has no {key!r}")
    return default


def _count(config: Mapping[str, Any], key: str, source: str) -> int:
    """An integer field the mapping computes with (a context length to cut, a vocabulary to extend)."""
    value = _field(config, key, source)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MappingError(f"{source}: {key} must be an integer, got {value!r}")
    return value


def _require(config: Mapping[str, Any], key: str, expected: Any, source: str, default: Any = None) -> None:
    value = config.get(key, default)
    if value != expected:
        raise MappingError(f"{source}: {key} is {value!r}; only {expected!r} is supported")


def _make(source: str, switches: dict[str, Any], **fields: Any) -> ModelConfig:
    """The ModelConfig of `fields` with the Published group of `switches` (MappingError names what is wrong)."""
    try:
        return ModelConfig(**fields, published=Published(**switches))
    except ConfigError as exc:
        raise MappingError(f"{source}: {exc}") from exc


def bert_config(
    config: Mapping[str, Any],
    specials: Mapping[str, int],
    source: str = "config.json",
    max_len: int | None = None,
    mlm_head: bool = False,
) -> ModelConfig:
    """A BERT encoder's config.json (`BertConfig`) as our switches: encoder-only, post-norm LayerNorm with its eps,
    learned absolute positions, token types, GELU, biases, embeddings unscaled and normalised.
    `specials`: pad_id, unk_id, bos_id ([CLS]) and eos_id ([SEP]) from the tokenizer. `max_len`: read at most
    this many positions (None: all the model has; the loader then keeps that many rows of the learned table).
    `mlm_head`: the weights carry the masked-LM head (`BertForMaskedLM`: cls.predictions.*)."""
    _require(config, "hidden_act", "gelu", source)
    _require(config, "position_embedding_type", "absolute", source, "absolute")
    d_model, n_heads = _field(config, "hidden_size", source), _field(config, "num_attention_heads", source)
    switches = {
        "norm_eps": float(_field(config, "layer_norm_eps", source)),
        "activation": "gelu",
        "embed_scale": False,
        "embed_norm": True,
        "n_token_types": _field(config, "type_vocab_size", source),
        "mlm_head": mlm_head,
    }
    return _make(
        source,
        switches,
        kind="encoder-only",
        vocab_size=_field(config, "vocab_size", source),
        d_model=d_model,
        n_heads=n_heads,
        n_encoder_layers=_field(config, "num_hidden_layers", source),
        n_decoder_layers=0,
        d_ff=_field(config, "intermediate_size", source),
        dropout=0.0,
        max_len=min(_count(config, "max_position_embeddings", source), max_len or 2**31),
        positional="learned",
        norm="post",
        **specials,
    )


def _plain_rope(config: Mapping[str, Any], source: str) -> Mapping[str, Any]:
    """The config's rope parameters (transformers 5's `rope_parameters`, or none), refused unless plain RoPE."""
    rope = config.get("rope_parameters") or {}
    _require(rope, "rope_type", "default", source, "default")
    if config.get("rope_scaling"):
        raise MappingError(f"{source}: rope_scaling is {config['rope_scaling']!r}; only plain RoPE is supported")
    return rope


def _rotary_decoder(
    config: Mapping[str, Any],
    switches: dict[str, Any],
    specials: Mapping[str, int],
    source: str,
    max_len: int | None,
    d_model: int,
    n_heads: int,
) -> ModelConfig:
    """A pre-norm decoder-only model with rotary positions (a Llama's, a GPT-NeoX's) and `switches`: the sizes
    read from transformers' common keys, `max_len` as in llama_config."""
    return _make(
        source,
        switches,
        kind="decoder-only",
        vocab_size=_field(config, "vocab_size", source),
        d_model=d_model,
        n_heads=n_heads,
        n_encoder_layers=0,
        n_decoder_layers=_field(config, "num_hidden_layers", source),
        d_ff=_field(config, "intermediate_size", source),
        dropout=0.0,
        max_len=min(_count(config, "max_position_embeddings", source), max_len or 2**31),
        positional="rotary",
        norm="pre",
        tie_embeddings=bool(config.get("tie_word_embeddings", False)),
        **specials,
    )


def llama_config(
    config: Mapping[str, Any], specials: Mapping[str, int], source: str = "config.json", max_len: int | None = None
) -> ModelConfig:
    """A Llama decoder's config (`LlamaConfig` keys) as our switches: decoder-only, pre-RMSNorm, rotary positions,
    grouped-query attention, SwiGLU, no biases, embeddings unscaled. `specials`: pad/unk/bos/eos ids. `max_len`:
    read at most this many positions (None: the model's whole context; rotary positions have no table to cut)."""
    _require(config, "hidden_act", "silu", source, "silu")
    for key in ("attention_bias", "mlp_bias"):
        _require(config, key, False, source, False)
    rope = _plain_rope(config, source)
    d_model, n_heads = _field(config, "hidden_size", source), _field(config, "num_attention_heads", source)
    head_dim = config.get("head_dim") or d_model // n_heads
    if head_dim * n_heads != d_model:
        raise MappingError(f"{source}: head_dim {head_dim} × {n_heads} heads is not hidden_size {d_model}")
    switches = {
        "n_kv_heads": config.get("num_key_value_heads") or n_heads,
        "rope_base": float(rope.get("rope_theta", config.get("rope_theta", 10000.0))),
        "norm_type": "rms",
        "norm_eps": float(_field(config, "rms_norm_eps", source)),
        "activation": "swiglu",
        "bias": False,
        "embed_scale": False,
    }
    return _rotary_decoder(config, switches, specials, source, max_len, d_model, n_heads)


def qwen2_config(
    config: Mapping[str, Any], specials: Mapping[str, int], source: str = "config.json", max_len: int | None = None
) -> ModelConfig:
    """A Qwen2 decoder's config (`Qwen2Config`): a Llama (`llama_config`) whose queries, keys and values have
    biases. Our `bias` switch gives every projection one: the loader fills those Qwen2 has not (the output
    projection, the feed-forward, the generator) with zeros (`fill_model(zero_biases=True)`), which computes
    the same. Sliding-window attention (`use_sliding_window`) is refused: every layer here sees every key."""
    _require(config, "use_sliding_window", False, source, False)
    plain = {key: value for key, value in config.items() if key not in ("attention_bias", "mlp_bias")}
    llama = llama_config(plain, specials, source, max_len)
    try:
        return dataclasses.replace(llama, published=dataclasses.replace(llama.published, bias=True))
    except ConfigError as exc:
        raise MappingError(f"{source}: {exc}") from exc


def neox_config(
    config: Mapping[str, Any], specials: Mapping[str, int], source: str = "config.json", max_len: int | None = None
) -> ModelConfig:
    """A GPT-NeoX's config (`GPTNeoXConfig`, Pythia) as our switches: decoder-only, pre-LayerNorm with biases and
    its eps, rotary positions on the first rotary_pct of each head's features, GELU, biases, the output weights
    (`embed_out`) untied, embeddings unscaled, and `use_parallel_residual` as parallel_residual. `specials` and
    `max_len` as in llama_config."""
    activation = _field(config, "hidden_act", source, "gelu")
    if activation not in GPT2_ACTIVATIONS or activation == "relu":
        raise MappingError(f"{source}: hidden_act is {activation!r}; only the GELUs are supported")
    _require(config, "attention_bias", True, source, True)
    rope = _plain_rope(config, source)
    fraction = rope.get("partial_rotary_factor", config.get("rotary_pct", 0.25))
    switches = {
        "rope_base": float(rope.get("rope_theta", config.get("rotary_emb_base", 10000.0))),
        "rotary_fraction": float(fraction) if isinstance(fraction, int | float) else fraction,
        "parallel_residual": config.get("use_parallel_residual", True),
        "norm_eps": float(_field(config, "layer_norm_eps", source, 1e-5)),
        "activation": GPT2_ACTIVATIONS[activation],
        "embed_scale": False,
    }
    d_model, n_heads = _field(config, "hidden_size", source), _field(config, "num_attention_heads", source)
    return _rotary_decoder(config, switches, specials, source, max_len, d_model, n_heads)


# GPT-2 activations as ours: "gelu_new" is GELU's tanh approximation under its original name.
GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def gpt2_config(
    config: Mapping[str, Any],
    specials: Mapping[str, int],
    source: str = "config.json",
    max_len: int | None = None,
    extra_rows: int = 0,
) -> ModelConfig:
    """A GPT-2's config.json (`GPT2Config`) as our switches: decoder-only, pre-LayerNorm with a final LayerNorm,
    learned absolute positions, GELU's tanh approximation, biases, tied embeddings, embeddings unscaled.
    `specials`: pad/unk/bos/eos ids (GPT-2's bos and eos are both <|endoftext|>). `max_len`: read at most this
    many positions (None: all n_positions; the loader keeps that many rows of the table). `extra_rows`: rows the
    loader appends to the vocabulary (the pad and unk tokens GPT-2 has not: see `append_rows`).

    `reorder_and_upcast_attn` is accepted: it only reorders the scaling and computes in float32, as we do.
    What would change the sums (scores scaled by 1/layer, unscaled scores, cross-attention) is refused."""
    activation = _field(config, "activation_function", source, "gelu_new")
    if not isinstance(activation, str) or activation not in GPT2_ACTIVATIONS:
        raise MappingError(
            f"{source}: activation_function is {activation!r}; only {', '.join(map(repr, GPT2_ACTIVATIONS))} "
            "are supported"
        )
    _require(config, "scale_attn_weights", True, source, True)
    _require(config, "scale_attn_by_inverse_layer_idx", False, source, False)
    _require(config, "add_cross_attention", False, source, False)
    d_model = _count(config, "n_embd", source)
    switches = {
        "norm_eps": _field(config, "layer_norm_epsilon", source, 1e-5),
        "activation": GPT2_ACTIVATIONS[activation],
        "embed_scale": False,
    }
    return _make(
        source,
        switches,
        kind="decoder-only",
        vocab_size=_count(config, "vocab_size", source) + extra_rows,
        d_model=d_model,
        n_heads=_field(config, "n_head", source),
        n_encoder_layers=0,
        n_decoder_layers=_field(config, "n_layer", source),
        d_ff=config.get("n_inner") or 4 * d_model,  # None: four times n_embd, as GPT-2 builds it
        dropout=0.0,
        max_len=min(_count(config, "n_positions", source), max_len or 2**31),
        positional="learned",
        norm="pre",
        tie_embeddings=bool(config.get("tie_word_embeddings", True)),
        **specials,
    )


# (pattern of a published name, our name): \1 is the layer number.
BERT_NAMES: tuple[tuple[str, str], ...] = (
    (r"embeddings\.word_embeddings\.weight", "embed.lut.weight"),
    (r"embeddings\.position_embeddings\.weight", "positions.table"),
    (r"embeddings\.token_type_embeddings\.weight", "token_types.weight"),
    (r"embeddings\.LayerNorm\.(weight|bias)", r"embed_norm.\1"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.query\.(weight|bias)", r"encoder.layers.\1.self_attn.w_q.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.key\.(weight|bias)", r"encoder.layers.\1.self_attn.w_k.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.value\.(weight|bias)", r"encoder.layers.\1.self_attn.w_v.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.(weight|bias)", r"encoder.layers.\1.self_attn.w_o.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.(weight|bias)", r"encoder.layers.\1.sublayer.0.norm.\2"),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.(weight|bias)", r"encoder.layers.\1.feed_forward.w_1.\2"),
    (r"encoder\.layer\.(\d+)\.output\.dense\.(weight|bias)", r"encoder.layers.\1.feed_forward.w_2.\2"),
    (r"encoder\.layer\.(\d+)\.output\.LayerNorm\.(weight|bias)", r"encoder.layers.\1.sublayer.1.norm.\2"),
    (r"cls\.predictions\.transform\.dense\.(weight|bias)", r"head.dense.\1"),
    (r"cls\.predictions\.transform\.LayerNorm\.(weight|bias)", r"head.norm.\1"),
    (r"cls\.predictions\.decoder\.weight", "generator.weight"),
    (r"cls\.predictions\.(?:decoder\.)?bias", "generator.bias"),  # one tensor, saved under both names
)
# BERT's pooler turns [CLS] into a sentence vector for classification, and its next-sentence head classifies
# that: nothing a head view draws.
BERT_UNUSED = (r"pooler\..*", r"embeddings\.position_ids", r"cls\.seq_relationship\..*")
MLM_HEAD = "cls.predictions.transform.dense.weight"

LLAMA_NAMES: tuple[tuple[str, str], ...] = (
    (r"model\.embed_tokens\.weight", "embed.lut.weight"),
    (r"model\.layers\.(\d+)\.self_attn\.q_proj\.weight", r"decoder.layers.\1.self_attn.w_q.weight"),
    (r"model\.layers\.(\d+)\.self_attn\.k_proj\.weight", r"decoder.layers.\1.self_attn.w_k.weight"),
    (r"model\.layers\.(\d+)\.self_attn\.v_proj\.weight", r"decoder.layers.\1.self_attn.w_v.weight"),
    (r"model\.layers\.(\d+)\.self_attn\.o_proj\.weight", r"decoder.layers.\1.self_attn.w_o.weight"),
    (r"model\.layers\.(\d+)\.mlp\.gate_proj\.weight", r"decoder.layers.\1.feed_forward.w_1.weight"),
    (r"model\.layers\.(\d+)\.mlp\.down_proj\.weight", r"decoder.layers.\1.feed_forward.w_2.weight"),
    (r"model\.layers\.(\d+)\.mlp\.up_proj\.weight", r"decoder.layers.\1.feed_forward.w_3.weight"),
    (r"model\.layers\.(\d+)\.input_layernorm\.weight", r"decoder.layers.\1.sublayer.0.norm.weight"),
    (r"model\.layers\.(\d+)\.post_attention_layernorm\.weight", r"decoder.layers.\1.sublayer.1.norm.weight"),
    (r"model\.norm\.weight", "decoder.norm.weight"),
    (r"lm_head\.weight", "generator.weight"),
)
QWEN2_NAMES = LLAMA_NAMES + (
    (r"model\.layers\.(\d+)\.self_attn\.q_proj\.bias", r"decoder.layers.\1.self_attn.w_q.bias"),
    (r"model\.layers\.(\d+)\.self_attn\.k_proj\.bias", r"decoder.layers.\1.self_attn.w_k.bias"),
    (r"model\.layers\.(\d+)\.self_attn\.v_proj\.bias", r"decoder.layers.\1.self_attn.w_v.bias"),
)
LLAMA_UNUSED = (r"model\.rotary_emb\.inv_freq", r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq")

# The names `split_gpt2` gives (GPT2LMHeadModel's without "transformer.", c_attn split into c_attn_q/k/v).
GPT2_NAMES: tuple[tuple[str, str], ...] = (
    (r"wte\.weight", "embed.lut.weight"),
    (r"wpe\.weight", "positions.table"),
    (r"h\.(\d+)\.ln_1\.(weight|bias)", r"decoder.layers.\1.sublayer.0.norm.\2"),
    (r"h\.(\d+)\.attn\.c_attn_q\.(weight|bias)", r"decoder.layers.\1.self_attn.w_q.\2"),
    (r"h\.(\d+)\.attn\.c_attn_k\.(weight|bias)", r"decoder.layers.\1.self_attn.w_k.\2"),
    (r"h\.(\d+)\.attn\.c_attn_v\.(weight|bias)", r"decoder.layers.\1.self_attn.w_v.\2"),
    (r"h\.(\d+)\.attn\.c_proj\.(weight|bias)", r"decoder.layers.\1.self_attn.w_o.\2"),
    (r"h\.(\d+)\.ln_2\.(weight|bias)", r"decoder.layers.\1.sublayer.1.norm.\2"),
    (r"h\.(\d+)\.mlp\.c_fc\.(weight|bias)", r"decoder.layers.\1.feed_forward.w_1.\2"),
    (r"h\.(\d+)\.mlp\.c_proj\.(weight|bias)", r"decoder.layers.\1.feed_forward.w_2.\2"),
    (r"ln_f\.(weight|bias)", r"decoder.norm.\1"),
    (r"lm_head\.weight", "generator.weight"),
)
# The causal mask and its fill value, saved as buffers by older transformers: ours is built from the ids.
GPT2_UNUSED = (r"h\.\d+\.attn\.(?:bias|masked_bias)",)
GPT2_CONV1D = re.compile(r"h\.\d+\.(?:attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight")
GPT2_FUSED = re.compile(r"h\.\d+\.attn\.c_attn\.(?:weight|bias)")


def split_gpt2(tensors: Mapping[str, Tensor], source: str) -> dict[str, Tensor]:
    """GPT-2's tensors as one nn.Linear-shaped tensor per projection, under GPT-2's names without "transformer."
    (GPT2LMHeadModel saves it, GPT2Model not). GPT-2's `Conv1D` stores a weight as (in, out), the transpose of
    nn.Linear's (out, in); its c_attn computes queries, keys and values in one product, W_q | W_k | W_v side by
    side along the output: split here into c_attn_q, c_attn_k, c_attn_v for `rename` and GPT2_NAMES."""
    out: dict[str, Tensor] = {}
    for name, tensor in tensors.items():
        bare = name.removeprefix("transformer.")
        if GPT2_CONV1D.fullmatch(bare):
            if tensor.ndim != 2:
                raise MappingError(f"{source}: tensor {name!r} has shape {tuple(tensor.shape)}, not (in, out)")
            tensor = tensor.T  # (in, out) → (out, in)
        if not GPT2_FUSED.fullmatch(bare):
            out[bare] = tensor
            continue
        if tensor.ndim == 0 or tensor.shape[0] % 3:
            raise MappingError(
                f"{source}: tensor {name!r} has shape {tuple(tensor.shape)}: its outputs are not queries, keys and "
                "values of one width"
            )
        for part, piece in zip("qkv", tensor.chunk(3, dim=0), strict=True):  # (3·d_model, …) → 3 × (d_model, …)
            out[bare.replace("c_attn", f"c_attn_{part}")] = piece.contiguous()
    return out


# The names `split_neox` gives (GPTNeoXForCausalLM's, query_key_value split into query/key/value).
NEOX_NAMES: tuple[tuple[str, str], ...] = (
    (r"gpt_neox\.embed_in\.weight", "embed.lut.weight"),
    (r"gpt_neox\.layers\.(\d+)\.input_layernorm\.(weight|bias)", r"decoder.layers.\1.sublayer.0.norm.\2"),
    (r"gpt_neox\.layers\.(\d+)\.post_attention_layernorm\.(weight|bias)", r"decoder.layers.\1.sublayer.1.norm.\2"),
    (r"gpt_neox\.layers\.(\d+)\.attention\.query\.(weight|bias)", r"decoder.layers.\1.self_attn.w_q.\2"),
    (r"gpt_neox\.layers\.(\d+)\.attention\.key\.(weight|bias)", r"decoder.layers.\1.self_attn.w_k.\2"),
    (r"gpt_neox\.layers\.(\d+)\.attention\.value\.(weight|bias)", r"decoder.layers.\1.self_attn.w_v.\2"),
    (r"gpt_neox\.layers\.(\d+)\.attention\.dense\.(weight|bias)", r"decoder.layers.\1.self_attn.w_o.\2"),
    (r"gpt_neox\.layers\.(\d+)\.mlp\.dense_h_to_4h\.(weight|bias)", r"decoder.layers.\1.feed_forward.w_1.\2"),
    (r"gpt_neox\.layers\.(\d+)\.mlp\.dense_4h_to_h\.(weight|bias)", r"decoder.layers.\1.feed_forward.w_2.\2"),
    (r"gpt_neox\.final_layer_norm\.(weight|bias)", r"decoder.norm.\1"),
    (r"(?:embed_out|lm_head)\.weight", "generator.weight"),  # embed_out before transformers 5
)
# Buffers older transformers saved: the causal mask, its fill value, the rotary frequencies (ours are rebuilt).
NEOX_UNUSED = (
    r"gpt_neox\.layers\.\d+\.attention\.(?:bias|masked_bias)",
    r"gpt_neox\.(?:layers\.\d+\.attention\.)?rotary_emb\.inv_freq",
)
NEOX_FUSED = re.compile(r"gpt_neox\.layers\.\d+\.attention\.query_key_value\.(?:weight|bias)")


def split_neox(tensors: Mapping[str, Tensor], n_heads: int, source: str) -> dict[str, Tensor]:
    """GPT-NeoX's tensors with each fused query_key_value split into query, key and value. Its outputs are laid
    out per head, [n_heads, 3, d_head] (head 1's q, k, v, then head 2's …), not GPT-2's [3, n_heads, d_head]."""
    out: dict[str, Tensor] = {}
    for name, tensor in tensors.items():
        if not NEOX_FUSED.fullmatch(name):
            out[name] = tensor
            continue
        if tensor.ndim == 0 or tensor.shape[0] % (3 * n_heads):
            raise MappingError(
                f"{source}: tensor {name!r} has shape {tuple(tensor.shape)}: its outputs are not {n_heads} heads' "
                "queries, keys and values"
            )
        per_head = tensor.reshape(n_heads, 3, -1, *tensor.shape[1:])  # (H, 3, d_head, …)
        for i, part in enumerate(("query", "key", "value")):
            piece = per_head[:, i].reshape(-1, *tensor.shape[1:])  # (H·d_head, …)
            out[name.replace("query_key_value", part)] = piece.contiguous()
    return out


# The output bias of an appended token: exp(-1e4) is 0 in float32, so it is never predicted, and its
# log-probability stays finite (an infinite one would make 0 · log 0 a NaN in an entropy or a KL).
NEVER = -1e4


def append_rows(tensors: Mapping[str, Tensor], rows: int) -> dict[str, Tensor]:
    """`tensors` (our names) with `rows` tokens appended to the vocabulary: zero embeddings, zero output weights
    when untied, and an output bias of NEVER, so that the model reads them as nothing and never predicts them.
    For the pad and unk tokens a GPT-2 lacks: our model masks padding by its id, so pad must be a token no text
    produces (PretrainedTokenizer encodes typed specials as text)."""
    out = dict(tensors)
    embed = out.get("embed.lut.weight")
    if rows <= 0 or embed is None or embed.ndim != 2:
        return out  # a missing embedding, or one of another shape, is named by fill_model
    for name in ("embed.lut.weight", "generator.weight"):  # a tied copy of the embeddings stays equal to them
        weight = out.get(name)
        if weight is not None and weight.ndim == 2:
            out[name] = torch.cat([weight, weight.new_zeros(rows, weight.shape[1])])
    bias = out.get("generator.bias", torch.zeros(embed.shape[0]))
    out["generator.bias"] = torch.cat([bias, bias.new_full((rows,), NEVER)])
    return out


def rename(
    tensors: Mapping[str, Tensor], names: tuple[tuple[str, str], ...], unused: tuple[str, ...], source: str
) -> dict[str, Tensor]:
    """Published names → ours. A name that matches no pattern raises MappingError naming it; `unused` ones
    (a BERT pooler, a cached rotary table) are dropped."""
    out: dict[str, Tensor] = {}
    for name, tensor in tensors.items():
        bare = name.removeprefix("bert.")
        if any(re.fullmatch(p, bare) for p in unused):
            continue
        for pattern, ours in names:
            if re.fullmatch(pattern, bare):
                out[re.sub(pattern, ours, bare)] = tensor
                break
        else:
            raise MappingError(f"{source}: tensor {name!r} has no place in our model (unexpected layout)")
    return out


def fill_model(config: ModelConfig, tensors: Mapping[str, Tensor], source: str, zero_biases: bool = False) -> Model:
    """Our model built from `config` holding `tensors` (our names), in eval mode, as float32.

    Every parameter must be given, of its shape, finite; tied weights are given once. A generator bias with no
    tensor (BERT without a masked-LM head) is zero: the logits are then the output vectors' dot products with the
    token embeddings. `zero_biases`: any bias not given is zero (a Qwen2's, which has biases on its queries, keys and
    values only). MappingError names the first tensor that does not fit."""
    model = build_model(config, init=False)  # every weight is given here: none is drawn
    expected = dict(model.named_parameters())  # tied weights appear once
    if config.tie_embeddings and "generator.weight" in tensors:  # a tied copy saved as well (lm_head.weight)
        tensors = dict(tensors)
        head = tensors.pop("generator.weight")
        if "embed.lut.weight" in tensors and not torch.equal(head, tensors["embed.lut.weight"]):
            raise MappingError(f"{source}: the output weights differ from the token embeddings the config ties them to")
    for name, tensor in tensors.items():
        if name not in expected:
            raise MappingError(f"{source}: tensor {name!r} is not in a model of this config (layout differs)")
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise MappingError(
                f"{source}: tensor {name!r} has shape {tuple(tensor.shape)}, the config makes it "
                f"{tuple(expected[name].shape)}"
            )
    defaults: dict[str, Callable[[Tensor], Tensor]] = {"generator.bias": torch.zeros_like}
    with torch.no_grad():
        for name, param in expected.items():
            if name in tensors:
                value = tensors[name].to(torch.float32)
            elif name in defaults or (zero_biases and name.endswith(".bias")):
                value = torch.zeros_like(param) if name not in defaults else defaults[name](param)
            else:
                raise MappingError(f"{source}: tensor {name!r} is missing")
            if not torch.isfinite(value).all():
                raise MappingError(f"{source}: tensor {name!r} holds NaN or infinite values")
            param.data = value.contiguous()  # the given tensor becomes the weight: no second copy of the model
            param.requires_grad_(False)
    return model.eval()
