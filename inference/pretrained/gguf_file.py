"""A Llama-architecture GGUF file (llama.cpp's format): its metadata as Llama config keys, its tensors dequantised
to float32 under Llama's Hugging Face names, and its own vocabulary and merges.

We parse the GGUF container ourselves (`read_container`: a few whole-array reads over the mapped file) because the
`gguf` package's GGUFReader builds a numpy view per element of every metadata array in its constructor (SmolLM2's
49,152 tokens, ~48k merges and token types: over a million views, 3 s of a cold start); the `gguf` package does the
dequantising (`gguf.quants.dequantize`), on the very arrays GGUFReader would hand it."""

from __future__ import annotations

import math
import mmap
import os
import re
import struct
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

# GGUF metadata value types (gguf.GGUFValueType) → struct/numpy codes, little-endian; 8 and 9 are string and array.
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY, UINT32 = 8, 9, 4
# Tensor types read as numbers (as GGUFReader reads them); every other type is blocks of bytes to dequantise.
PLAIN = {"F32": "f4", "F16": "f2", "F64": "f8", "I8": "i1", "I16": "i2", "I32": "i4", "I64": "i8"}


@dataclass(frozen=True)
class GGUFModel:
    """What one GGUF file holds: Llama config keys, metadata for the card, tensors and the tokenizer."""

    config: dict[str, Any]
    metadata: dict[str, Any]
    tensors: dict[str, Tensor]
    tokenizer: PretrainedTokenizer


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor as the file stores it: `shape` in numpy's order (the file lists dims innermost first) and `data`
    a read-only view of its bytes shaped as GGUFReader shapes it: numbers for F32/F16/…, else one row of bytes per
    row of quantised blocks, which is what `gguf.quants.dequantize` takes."""

    name: str
    tensor_type: Any  # gguf.GGMLQuantizationType
    shape: tuple[int, ...]
    data: np.ndarray


@dataclass(frozen=True)
class GGUFContainer:
    """Every metadata key with its value (what GGUFReader's `field.contents()` gives) and every tensor, in order."""

    fields: dict[str, Any]
    tensors: list[GGUFTensor]


class _UnreadableError(ValueError):
    """The bytes are not a GGUF file we can read; read_container names the file."""


class _Cursor:
    """Little-endian reads from `buf` onwards from `pos`; every read first checks that its bytes are there."""

    def __init__(self, buf: mmap.mmap) -> None:
        self.buf, self.size, self.pos, self.section = buf, len(buf), 0, "header"

    def ended(self) -> _UnreadableError:
        return _UnreadableError(f"it ends at byte {self.size}, inside its {self.section}")

    def take(self, n: int) -> int:
        """Skip `n` bytes and return where they start."""
        start = self.pos
        if start + n > self.size:
            raise self.ended()
        self.pos = start + n
        return start

    def scalar(self, code: str) -> Any:
        fmt = struct.Struct("<" + code)
        return fmt.unpack_from(self.buf, self.take(fmt.size))[0]

    def array(self, dtype: str, count: int) -> np.ndarray:
        little = np.dtype("<" + dtype)
        return np.frombuffer(self.buf, little, count, self.take(count * little.itemsize))

    def string(self) -> str:
        n = self.scalar("Q")
        start = self.take(n)
        return str(self.buf[start : start + n], "utf-8")

    def strings(self, count: int) -> list[str]:
        """`count` strings (a vocabulary: tens of thousands), in one tight loop."""
        buf, size, pos, length = self.buf, self.size, self.pos, struct.Struct("<Q").unpack_from
        out = []
        for _ in range(count):
            if pos + 8 > size:
                raise self.ended()
            end = pos + 8 + length(buf, pos)[0]
            if end > size:
                raise self.ended()
            out.append(str(buf[pos + 8 : end], "utf-8"))
            pos = end
        self.pos = pos
        return out

    def value(self, kind: int) -> Any:
        if kind in SCALARS:
            return self.scalar(SCALARS[kind])
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            item, count = self.scalar("I"), self.scalar("Q")
            if item == STRING:
                return self.strings(count)
            if item in SCALARS:
                return self.array(SCALARS[item], count).tolist()
            if item == ARRAY:
                return [self.value(ARRAY) for _ in range(count)]
            kind = item
        raise _UnreadableError(f"unknown value type {kind} at byte {self.pos}")


def read_container(path: Path) -> GGUFContainer:
    """Parse `path` as GGUF (versions 2 and 3, little-endian): header, metadata, tensor infos, then each tensor's
    bytes in the data section, which starts at the next multiple of `general.alignment` (32 if absent)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType  # the package itself: ImportError where it is missing

    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise _UnreadableError("the file is empty")
            c = _Cursor(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        c.take(4)
        if c.buf[:4] != b"GGUF":
            raise _UnreadableError(f"it starts with {c.buf[:4]!r}, not GGUF's magic")
        version = c.scalar("I")
        if version not in (2, 3):
            if version & 0xFFFF == 0:  # a small version number written big-endian
                raise _UnreadableError("it is big-endian; only little-endian GGUF files are read")
            raise _UnreadableError(f"GGUF version {version}; versions 2 and 3 are read")
        n_tensors, n_fields = c.scalar("Q"), c.scalar("Q")
        c.section = "metadata"
        fields: dict[str, Any] = {}
        for _ in range(n_fields):
            key, kind = c.string(), c.scalar("I")
            if key in fields:
                raise _UnreadableError(f"the key {key!r} appears twice")
            if key == "general.alignment" and kind != UINT32:
                raise _UnreadableError(f"general.alignment has value type {kind}, not uint32")
            fields[key] = c.value(kind)
        c.section = "tensor infos"
        infos = []
        for _ in range(n_tensors):
            name, n_dims = c.string(), c.scalar("I")
            dims = c.array("Q", n_dims).tolist()  # innermost first
            infos.append((name, tuple(reversed(dims)), GGMLQuantizationType(c.scalar("I")), c.scalar("Q")))
        alignment = fields.get("general.alignment", 32)
        if alignment == 0 or alignment & (alignment - 1):
            raise _UnreadableError(f"general.alignment {alignment} is not a power of two")
        start = c.pos + -c.pos % alignment
        c.section = "tensor data"
        tensors: dict[str, GGUFTensor] = {}
        for name, shape, ggml_type, offset in infos:
            if name in tensors:
                raise _UnreadableError(f"the tensor {name!r} appears twice")
            dtype, data_shape = PLAIN.get(ggml_type.name), shape
            if dtype is None:  # blocks of `block` values stored in `size` bytes
                block, size = GGML_QUANT_SIZES[ggml_type]
                if not shape or shape[-1] % block:
                    raise _UnreadableError(f"{name!r}: rows of shape {shape} are not whole {ggml_type.name} blocks")
                dtype, data_shape = "u1", (*shape[:-1], shape[-1] // block * size)
            c.pos = start + offset
            data = c.array(dtype, math.prod(data_shape)).reshape(data_shape)
            tensors[name] = GGUFTensor(name, ggml_type, shape, data)
    except (ValueError, KeyError, OSError) as exc:  # ours, bad UTF-8, an unknown tensor type or size, no file
        raise MappingError(f"{path}: not a readable GGUF file ({exc})") from exc
    return GGUFContainer(fields, list(tensors.values()))


def _value(file: GGUFContainer, key: str, source: str, default: Any = ...) -> Any:
    if key not in file.fields:
        if default is ...:
            raise MappingError(f"{source}: the GGUF metadata has no {key!r}")
        return default
    return file.fields[key]


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
    from gguf import quants

    source = str(path)
    file = read_container(path)
    arch = _value(file, "general.architecture", source)
    if arch != "llama":
        raise MappingError(f"{source}: general.architecture is {arch!r}; only 'llama' is supported")
    config: dict[str, Any] = {"hidden_act": "silu"}
    for key, ours in CONFIG_KEYS.items():
        config[ours] = _value(file, f"llama.{key}", source, None)
    tokens = _value(file, "tokenizer.ggml.tokens", source)
    config["vocab_size"] = config["vocab_size"] or len(tokens)
    config["rope_theta"] = config["rope_theta"] or 10000.0
    rope_dim = _value(file, "llama.rope.dimension_count", source, None)
    if rope_dim is not None and rope_dim * config["num_attention_heads"] != config["hidden_size"]:
        raise MappingError(f"{source}: llama.rope.dimension_count {rope_dim} is not the head size: partial RoPE")
    tensors: dict[str, Tensor] = {}
    for t in file.tensors:
        name = next((re.sub(p, ours, t.name) for p, ours in GGUF_NAMES if re.fullmatch(p, t.name)), None)
        if name is None:
            raise MappingError(f"{source}: tensor {t.name!r} has no place in a Llama model")
        try:
            weight = np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(t.shape)
        except NotImplementedError as exc:  # integer tensors, types newer than gguf's dequantisers
            raise MappingError(
                f"{source}: tensor {t.name!r} is {t.tensor_type.name}, which gguf cannot dequantise"
            ) from exc
        if name.endswith("q_proj.weight"):
            weight = unpermute(weight, config["num_attention_heads"])
        elif name.endswith("k_proj.weight"):
            weight = unpermute(weight, config["num_key_value_heads"] or config["num_attention_heads"])
        # No copy of what is ours (dequantised arrays are new; a copy would cost a large model seconds of its load).
        # The F32 tensors are read-only views of the mapped file, so they are copied.
        tensors[name] = torch.from_numpy(weight if weight.flags.writeable else weight.copy())
    config["tie_word_embeddings"] = "lm_head.weight" not in tensors
    types = _value(file, "tokenizer.ggml.token_type", source, [])
    control = [i for i, kind in enumerate(types) if kind == CONTROL]
    specials = {
        "unk_id": _value(file, "tokenizer.ggml.unknown_token_id", source, 0),
        "bos_id": _value(file, "tokenizer.ggml.bos_token_id", source),
        "eos_id": _value(file, "tokenizer.ggml.eos_token_id", source),
    }
    pad = _value(file, "tokenizer.ggml.padding_token_id", source, None)
    if pad is None or pad in specials.values():
        pad = next((i for i in control if i not in specials.values()), None)
        if pad is None:
            raise MappingError(f"{source}: no control token is free to serve as padding")
    specials["pad_id"] = pad
    model_type = _value(file, "tokenizer.ggml.model", source)
    if model_type != "gpt2":
        raise MappingError(f"{source}: tokenizer.ggml.model is {model_type!r}; only byte-level BPE ('gpt2') is read")
    merges = _value(file, "tokenizer.ggml.merges", source)
    tokenizer = PretrainedTokenizer.byte_level_bpe(tokens, merges, control, specials, source)
    metadata = {
        key: _value(file, key, source, None)
        for key in ("general.name", "general.license", "general.organization", "general.size_label")
    }
    metadata["quantisation"] = sorted({t.tensor_type.name for t in file.tensors})
    return GGUFModel(config, metadata, tensors, tokenizer)
