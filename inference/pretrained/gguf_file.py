"""A Llama-architecture GGUF file (llama.cpp's format) read with the `gguf` package: its metadata as Llama config
keys, its tensors dequantised to float32 under Llama's Hugging Face names, and its own vocabulary and merges."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from inference.pretrained.mapping import MappingError
from inference.pretrained.tokenizer import PretrainedTokenizer

# llama.cpp's tensor names → Llama's (\1: the layer).
GGUF_NAMES: tuple[tuple[str, str], ...] = (
    (r"token_embd\.weight", "model.embed_tokens.weight"),
    (r"output_norm\.weight", "model.norm.weight"),
    (r"output\.weight", "lm_head.weight"),
    (r"blk\.(\d+)\.attn_norm\.weight", r"model.layers.\1.input_layernorm.weight"),
    (r"blk\.(\d+)\.ffn_norm\.weight", r"model.layers.\1.post_attention_layernorm.weight"),
    (r"blk\.(\d+)\.attn_q\.weight", r"model.layers.\1.self_attn.q_proj.weight"),
    (r"blk\.(\d+)\.attn_k\.weight", r"model.layers.\1.self_attn.k_proj.weight"),
    (r"blk\.(\d+)\.attn_v\.weight", r"model.layers.\1.self_attn.v_proj.weight"),
    (r"blk\.(\d+)\.attn_output\.weight", r"model.layers.\1.self_attn.o_proj.weight"),
    (r"blk\.(\d+)\.ffn_gate\.weight", r"model.layers.\1.mlp.gate_proj.weight"),
    (r"blk\.(\d+)\.ffn_up\.weight", r"model.layers.\1.mlp.up_proj.weight"),
    (r"blk\.(\d+)\.ffn_down\.weight", r"model.layers.\1.mlp.down_proj.weight"),
)
# GGUF metadata (after `llama.`) → Llama config keys.
CONFIG_KEYS = {
    "embedding_length": "hidden_size",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "block_count": "num_hidden_layers",
    "feed_forward_length": "intermediate_size",
    "context_length": "max_position_embeddings",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "rope.freq_base": "rope_theta",
    "vocab_size": "vocab_size",
}
CONTROL = 3  # llama.cpp's token type of a control token (<|endoftext|>, <|im_start|>, …)


@dataclass(frozen=True)
class GGUFModel:
    """What one GGUF file holds: Llama config keys, metadata for the card, tensors and the tokenizer."""

    config: dict[str, Any]
    metadata: dict[str, Any]
    tensors: dict[str, Tensor]
    tokenizer: PretrainedTokenizer


def _value(reader: Any, key: str, source: str, default: Any = ...) -> Any:
    field = reader.fields.get(key)
    if field is None:
        if default is ...:
            raise MappingError(f"{source}: the GGUF metadata has no {key!r}")
        return default
    return field.contents()


def unpermute(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's reordering of W_q and W_k rows: its converter interleaves each head's two rotary halves
    (x_i, x_{i+d/2}) into adjacent rows; Llama's layout, which `model.attention.rotate` expects, keeps them apart."""
    rows = weight.shape[0]
    pairs = weight.reshape(n_heads, rows // n_heads // 2, 2, *weight.shape[1:])  # (H, d_head/2, 2, d_model)
    return pairs.swapaxes(1, 2).reshape(weight.shape)  # (H·d_head, d_model)


def read_gguf(path: Path) -> GGUFModel:
    """Read `path`: metadata, every tensor dequantised to float32 (Q4_1, Q8_0, …: `gguf.quants.dequantize`), the
    Q/K rows put back in Llama's order, and a byte-level BPE tokenizer from the file's tokens and merges.

    The file's pad id may be its end-of-text id (SmolLM2's is): our model masks padding by id, so pad is then the
    first control token that is not unk, bos or eos — text never produces a control token (PretrainedTokenizer).
    """
    from gguf import GGUFReader
    from gguf.quants import dequantize

    source = str(path)
    try:
        reader = GGUFReader(path)
    except Exception as exc:  # gguf raises ValueError/struct errors for foreign or truncated files
        raise MappingError(f"{source}: not a readable GGUF file ({exc})") from exc
    arch = _value(reader, "general.architecture", source)
    if arch != "llama":
        raise MappingError(f"{source}: general.architecture is {arch!r}; only 'llama' is supported")
    config: dict[str, Any] = {"hidden_act": "silu"}
    for key, ours in CONFIG_KEYS.items():
        config[ours] = _value(reader, f"llama.{key}", source, None)
    tokens = _value(reader, "tokenizer.ggml.tokens", source)
    config["vocab_size"] = config["vocab_size"] or len(tokens)
    config["rope_theta"] = config["rope_theta"] or 10000.0
    rope_dim = _value(reader, "llama.rope.dimension_count", source, None)
    if rope_dim is not None and rope_dim * config["num_attention_heads"] != config["hidden_size"]:
        raise MappingError(f"{source}: llama.rope.dimension_count {rope_dim} is not the head size: partial RoPE")
    tensors: dict[str, Tensor] = {}
    for t in reader.tensors:
        name = next((re.sub(p, ours, t.name) for p, ours in GGUF_NAMES if re.fullmatch(p, t.name)), None)
        if name is None:
            raise MappingError(f"{source}: tensor {t.name!r} has no place in a Llama model")
        weight = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        weight = weight.reshape(tuple(reversed([int(n) for n in t.shape])))  # GGUF lists dims innermost first
        if name.endswith("q_proj.weight"):
            weight = unpermute(weight, config["num_attention_heads"])
        elif name.endswith("k_proj.weight"):
            weight = unpermute(weight, config["num_key_value_heads"] or config["num_attention_heads"])
        tensors[name] = torch.tensor(weight)  # a copy: the F32 tensors are read-only views of the mapped file
    config["tie_word_embeddings"] = "lm_head.weight" not in tensors
    types = _value(reader, "tokenizer.ggml.token_type", source, [])
    control = [i for i, kind in enumerate(types) if kind == CONTROL]
    specials = {
        "unk_id": _value(reader, "tokenizer.ggml.unknown_token_id", source, 0),
        "bos_id": _value(reader, "tokenizer.ggml.bos_token_id", source),
        "eos_id": _value(reader, "tokenizer.ggml.eos_token_id", source),
    }
    pad = _value(reader, "tokenizer.ggml.padding_token_id", source, None)
    if pad is None or pad in specials.values():
        pad = next((i for i in control if i not in specials.values()), None)
        if pad is None:
            raise MappingError(f"{source}: no control token is free to serve as padding")
    specials["pad_id"] = pad
    model_type = _value(reader, "tokenizer.ggml.model", source)
    if model_type != "gpt2":
        raise MappingError(f"{source}: tokenizer.ggml.model is {model_type!r}; only byte-level BPE ('gpt2') is read")
    merges = _value(reader, "tokenizer.ggml.merges", source)
    tokenizer = PretrainedTokenizer.byte_level_bpe(tokens, merges, control, specials, source)
    metadata = {
        key: _value(reader, key, source, None)
        for key in ("general.name", "general.license", "general.organization", "general.size_label")
    }
    metadata["quantisation"] = sorted({t.tensor_type.name for t in reader.tensors})
    return GGUFModel(config, metadata, tensors, tokenizer)
