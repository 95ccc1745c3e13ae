"""Published checkpoints loaded onto our instrumented model, as the same Checkpoint our own folders give.

Three sources, one result (inference.checkpoint.Checkpoint: model, tokenizer, config, card):
- a BERT: a folder or a zip holding Hugging Face's config.json, model.safetensors and tokenizer.json
  (all-MiniLM-L6-v2's package ships such a zip);
- a Llama-architecture GGUF file (SmolLM2's package ships one), dequantised to float32;
- a folder holding a Llama in Hugging Face's layout (config.json, model.safetensors, tokenizer.json).
Every problem is a CheckpointError naming the file and the first field or tensor that does not fit.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as load_safetensors

from inference.checkpoint import Checkpoint, CheckpointError
from inference.pretrained.mapping import (
    BERT_NAMES,
    BERT_UNUSED,
    LLAMA_NAMES,
    LLAMA_UNUSED,
    MLM_HEAD,
    MappingError,
    bert_config,
    fill_model,
    llama_config,
    rename,
)
from inference.pretrained.tokenizer import PretrainedTokenizer
from inference.tokenizer import TokenizerError

HF_CONFIG, HF_WEIGHTS, HF_TOKENIZER = "config.json", "model.safetensors", "tokenizer.json"
# One recorded tensor (the scores, or the weights) of every head of every layer stays within this: the trace of a
# 135M-parameter model at its whole context (SmolLM2: 8192 tokens, 30 × 9 heads) would be 270 GB.
TRACE_BYTES = 128 * 2**20


def traced_max_len(context: int, layers: int, heads: int) -> int:
    """The longest input the app reads: the model's context, cut to the largest power of two at which one recorded
    (layers, heads, T, T) float32 tensor fits in TRACE_BYTES (SmolLM2: 256; all-MiniLM-L6-v2: its own 512)."""
    fit = math.isqrt(TRACE_BYTES // (4 * layers * heads))
    return min(context, 1 << (fit.bit_length() - 1))


BERT_SPECIAL_PIECES = {"pad_id": "[PAD]", "unk_id": "[UNK]", "bos_id": "[CLS]", "eos_id": "[SEP]"}


class Files:
    """The three files of a Hugging Face checkpoint, from a folder or from a zip (read without extracting)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._names: list[str] | None = None
        self._prefix = ""
        if path.is_file():
            with zipfile.ZipFile(path) as zf:
                self._names = zf.namelist()
            configs = [n for n in self._names if n.endswith(HF_CONFIG)]  # the files may sit in a folder inside
            self._prefix = min(configs, key=len).removesuffix(HF_CONFIG) if configs else ""

    def has(self, name: str) -> bool:
        if self._names is not None:
            return self._prefix + name in self._names
        return (self.path / name).is_file()

    def read(self, name: str) -> bytes:
        if not self.has(name):
            raise CheckpointError(
                f"{self.path}: {name} not found; a checkpoint in this layout needs "
                f"{HF_CONFIG}, {HF_WEIGHTS} and {HF_TOKENIZER}"
            )
        if self._names is not None:
            with zipfile.ZipFile(self.path) as zf:
                return zf.read(self._prefix + name)
        return (self.path / name).read_bytes()

    def config(self) -> dict[str, Any]:
        try:
            data = json.loads(self.read(HF_CONFIG))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CheckpointError(f"{self.path}: {HF_CONFIG} is not valid JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise CheckpointError(f"{self.path}: {HF_CONFIG} must be a JSON object")
        return data

    def tensors(self) -> dict[str, torch.Tensor]:
        try:
            return load_safetensors(self.read(HF_WEIGHTS))
        except Exception as exc:  # safetensors raises its own error types for truncated or foreign files
            raise CheckpointError(f"{self.path}: {HF_WEIGHTS} is not a readable safetensors file ({exc})") from exc


def hf_model_type(path: Path) -> str | None:
    """The `model_type` of a Hugging Face config.json in `path` (a folder or a zip), or None when there is none."""
    try:
        files = Files(path)
        return str(files.config().get("model_type")) if files.has(HF_CONFIG) else None
    except (CheckpointError, zipfile.BadZipFile, OSError):
        return None


def _checkpoint(name: str, path: Path, build: Any, tokenizer: PretrainedTokenizer, card: dict[str, Any]) -> Checkpoint:
    """Build the model (MappingError → CheckpointError) and check the tokenizer fits its vocabulary."""
    specials = {k: getattr(tokenizer, k) for k in ("pad_id", "unk_id", "bos_id", "eos_id")}
    try:
        with torch.no_grad():
            config, model = build(specials)
    except MappingError as exc:
        raise CheckpointError(str(exc)) from exc
    if tokenizer.vocab_size > config.vocab_size:
        raise CheckpointError(
            f"{path}: the tokenizer has {tokenizer.vocab_size} tokens, the model's embeddings {config.vocab_size}"
        )
    card = {**card, "tokenizer_sha256": tokenizer.sha256, "parameters": config.n_parameters, "max_len": config.max_len}
    return Checkpoint(name, path, model, tokenizer, config, card)


def _llama_limit(raw: dict[str, Any]) -> int:
    """traced_max_len of a Llama config (a missing field is reported by llama_config, not here)."""
    sizes = (raw.get(k) or 1 for k in ("max_position_embeddings", "num_hidden_layers", "num_attention_heads"))
    return traced_max_len(*sizes)


def load_bert(path: Path, name: str | None = None, card: dict[str, Any] | None = None) -> Checkpoint:
    """A BERT encoder from a folder or zip (config.json, model.safetensors, tokenizer.json); its specials are
    [PAD], [UNK], [CLS] (our bos: first) and [SEP] (our eos: last). When the weights carry the masked-LM head
    (BertForMaskedLM), its predictions are the fill-mask top-k and a typed [MASK] is the mask token."""
    try:
        files = Files(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise CheckpointError(f"{path}: not a readable zip or folder ({exc})") from exc
    raw = files.config()
    if raw.get("model_type") != "bert":
        raise CheckpointError(f"{path}: {HF_CONFIG} model_type is {raw.get('model_type')!r}, expected 'bert'")
    tensors = files.tensors()
    mlm_head = any(name.removeprefix("bert.") == MLM_HEAD for name in tensors)
    mask = "[MASK]" if mlm_head else None
    try:
        data, source = files.read(HF_TOKENIZER), f"{path}: {HF_TOKENIZER}"
        tokenizer = PretrainedTokenizer.from_json(data, BERT_SPECIAL_PIECES, source, mask)
    except TokenizerError as exc:
        raise CheckpointError(str(exc)) from exc

    def build(specials: dict[str, int]) -> tuple[Any, Any]:
        layers, heads = raw.get("num_hidden_layers", 1), raw.get("num_attention_heads", 1)
        limit = traced_max_len(raw.get("max_position_embeddings", 512), layers, heads)
        config = bert_config(raw, specials, f"{path}: {HF_CONFIG}", limit, mlm_head)
        ours = rename(tensors, BERT_NAMES, BERT_UNUSED, f"{path}: {HF_WEIGHTS}")
        if "positions.table" in ours:  # positions past max_len are never read: their rows are left out
            ours["positions.table"] = ours["positions.table"][: config.max_len]
        return config, fill_model(config, ours, str(path))

    task = "BERT encoder with its masked-LM head" if mlm_head else "BERT encoder (no masked-LM head)"
    return _checkpoint(name or path.stem, path, build, tokenizer, card or {"task": task, "source": str(path)})


def load_llama_folder(path: Path, name: str | None = None, card: dict[str, Any] | None = None) -> Checkpoint:
    """A Llama decoder in Hugging Face's layout (config.json, model.safetensors, tokenizer.json); bos and eos are
    the config's ids, pad the config's pad id when it differs from them, else the first other special token."""
    files = Files(path)
    raw = files.config()
    if raw.get("model_type") != "llama":
        raise CheckpointError(f"{path}: {HF_CONFIG} model_type is {raw.get('model_type')!r}, expected 'llama'")
    try:
        from tokenizers import Tokenizer

        hf = Tokenizer.from_str(files.read(HF_TOKENIZER).decode("utf-8"))
        added = sorted(hf.get_added_tokens_decoder())
        bos, eos = raw.get("bos_token_id"), raw.get("eos_token_id")
        eos = eos[0] if isinstance(eos, list) and eos else eos  # Llama 3 lists several end ids: the first ends text
        pad = raw.get("pad_token_id")
        unk = next((i for i in added if i not in (bos, eos)), 0)
        if pad is None or pad in (bos, eos, unk):
            pad = next(i for i in added if i not in (bos, eos, unk))
        specials = {"pad_id": pad, "unk_id": unk, "bos_id": bos, "eos_id": eos}
        tokenizer = PretrainedTokenizer(hf, specials, f"{path}: tokenizer")
    except (TokenizerError, StopIteration, TypeError) as exc:
        raise CheckpointError(f"{path}: {HF_TOKENIZER} lacks the special tokens a Llama needs ({exc})") from exc
    except Exception as exc:  # tokenizers raises its own Exception subclass with the parser's message
        raise CheckpointError(f"{path}: {HF_TOKENIZER} is not a tokenizer.json ({exc})") from exc
    tensors = files.tensors()

    def build(specials: dict[str, int]) -> tuple[Any, Any]:
        config = llama_config(raw, specials, f"{path}: {HF_CONFIG}", _llama_limit(raw))
        names = f"{path}: {HF_WEIGHTS}"
        return config, fill_model(config, rename(tensors, LLAMA_NAMES, LLAMA_UNUSED, names), str(path))

    card = card or {"task": "Llama decoder", "source": str(path)}
    return _checkpoint(name or path.name, path, build, tokenizer, card)


def load_gguf(path: Path, name: str | None = None, card: dict[str, Any] | None = None) -> Checkpoint:
    """A Llama-architecture GGUF file: tensors dequantised to float32, the tokenizer from its own vocabulary."""
    from inference.pretrained.gguf_file import read_gguf

    try:
        gguf = read_gguf(path)
    except (MappingError, TokenizerError) as exc:
        raise CheckpointError(str(exc)) from exc

    def build(specials: dict[str, int]) -> tuple[Any, Any]:
        config = llama_config(gguf.config, specials, f"{path}: metadata", _llama_limit(gguf.config))
        return config, fill_model(config, rename(gguf.tensors, LLAMA_NAMES, LLAMA_UNUSED, str(path)), str(path))

    card = card or {"task": "Llama decoder (GGUF)", "source": str(path)}
    return _checkpoint(name or path.stem, path, build, gguf.tokenizer, {**card, "gguf": gguf.metadata})


def load_pretrained(path: Path, name: str | None = None, card: dict[str, Any] | None = None) -> Checkpoint:
    """Whichever loader fits `path`: a .gguf file, or a folder/zip whose config.json names bert or llama."""
    if path.suffix == ".gguf":
        return load_gguf(path, name, card)
    model_type = hf_model_type(path)
    if model_type == "bert":
        return load_bert(path, name, card)
    if model_type == "llama":
        return load_llama_folder(path, name, card)
    raise CheckpointError(
        f"{path}: not a checkpoint this app reads: expected our folder (model.safetensors, config.json, "
        f"tokenizer.model, card.json), a .gguf file, or a Hugging Face BERT/Llama folder ({HF_CONFIG} "
        f"model_type {model_type!r})"
    )
