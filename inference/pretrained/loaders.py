"""Published checkpoints loaded onto our instrumented model, as the same Checkpoint our own folders give.

Four sources, one result (inference.checkpoint.Checkpoint: model, tokenizer, config, card):
- a BERT: a folder or a zip holding Hugging Face's config.json, model.safetensors and tokenizer.json
  (all-MiniLM-L6-v2's package ships such a zip);
- a Llama-architecture GGUF file (SmolLM2's package ships one), dequantised to float32;
- a folder holding a Llama in Hugging Face's layout (config.json, model.safetensors, tokenizer.json);
- a folder holding a GPT-2 in the same layout, or with vocab.json and merges.txt instead of tokenizer.json.
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

from inference.loaded import Checkpoint, CheckpointError
from inference.pretrained.mapping import (
    BERT_NAMES,
    BERT_UNUSED,
    GPT2_NAMES,
    GPT2_UNUSED,
    LLAMA_NAMES,
    LLAMA_UNUSED,
    MLM_HEAD,
    NEOX_NAMES,
    NEOX_UNUSED,
    QWEN2_NAMES,
    MappingError,
    append_rows,
    bert_config,
    fill_model,
    gpt2_config,
    llama_config,
    neox_config,
    qwen2_config,
    rename,
    split_gpt2,
    split_neox,
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
# GPT-2's vocabulary in its first layout (tokenizer.json came later); its one special token; and the two we append
# (our model masks padding by id and flags unknown pieces by id: each needs a token of its own that no text makes).
GPT2_VOCAB, GPT2_MERGES, GPT2_END = "vocab.json", "merges.txt", "<|endoftext|>"
GPT2_APPENDED = {"pad_id": "<|pad|>", "unk_id": "<|unk|>"}


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


def _limit(raw: dict[str, Any], context: str, layers: str, heads: str) -> int:
    """traced_max_len of a config's context, layer and head counts, named by their keys (a missing or invalid field
    counts as 1 here: the mapping's config function reports it)."""
    sizes = (raw.get(k) if isinstance(raw.get(k), int) and raw.get(k) > 0 else 1 for k in (context, layers, heads))
    return traced_max_len(*sizes)


def _llama_limit(raw: dict[str, Any]) -> int:
    """traced_max_len of a Llama config."""
    return _limit(raw, "max_position_embeddings", "num_hidden_layers", "num_attention_heads")


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


def load_llama_folder(
    path: Path, name: str | None = None, card: dict[str, Any] | None = None, files: Files | None = None
) -> Checkpoint:
    """A Llama, Qwen2 or GPT-NeoX decoder in Hugging Face's layout (config.json, model.safetensors,
    tokenizer.json); bos and eos are the config's ids, pad the config's pad id when it differs from them, else the
    first other special token. `files`: the three files' contents from elsewhere (inference.pretrained.objects: a
    model in memory)."""
    files = files or Files(path)
    raw = files.config()
    model_type = raw.get("model_type")
    if model_type not in ("llama", "qwen2", "gpt_neox"):
        raise CheckpointError(
            f"{path}: {HF_CONFIG} model_type is {model_type!r}, expected 'llama', 'qwen2' or 'gpt_neox'"
        )
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
        raise CheckpointError(
            f"{path}: {HF_TOKENIZER} lacks the special tokens a {model_type} decoder needs ({exc})"
        ) from exc
    except Exception as exc:  # tokenizers raises its own Exception subclass with the parser's message
        raise CheckpointError(f"{path}: {HF_TOKENIZER} is not a tokenizer.json ({exc})") from exc
    tensors = files.tensors()

    qwen2 = model_type == "qwen2"  # a Llama with biased queries, keys and values (mapping.qwen2_config)

    def build(specials: dict[str, int]) -> tuple[Any, Any]:
        where = f"{path}: {HF_WEIGHTS}"
        if model_type == "gpt_neox":
            config = neox_config(raw, specials, f"{path}: {HF_CONFIG}", _llama_limit(raw))
            ours = rename(split_neox(tensors, config.n_heads, where), NEOX_NAMES, NEOX_UNUSED, where)
            return config, fill_model(config, ours, str(path))  # embed_out has no bias: the generator's is zero
        config = (qwen2_config if qwen2 else llama_config)(raw, specials, f"{path}: {HF_CONFIG}", _llama_limit(raw))
        ours = rename(tensors, QWEN2_NAMES if qwen2 else LLAMA_NAMES, LLAMA_UNUSED, where)
        return config, fill_model(config, ours, str(path), zero_biases=qwen2)

    task = {"qwen2": "Qwen2 decoder", "gpt_neox": "GPT-NeoX decoder"}.get(model_type, "Llama decoder")
    card = card or {"task": task, "source": str(path)}
    return _checkpoint(name or path.name, path, build, tokenizer, card)


def _gpt2_vocabulary(files: Files, path: Path) -> tuple[list[str], list[str]]:
    """vocab.json (piece → id) as the list of pieces by id, and merges.txt's merges ("a b"), without its
    "#version" line."""
    try:
        vocab = json.loads(files.read(GPT2_VOCAB))
        merges = files.read(GPT2_MERGES).decode("utf-8").splitlines()
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: {GPT2_VOCAB} or {GPT2_MERGES} is not readable text ({exc})") from exc
    if not isinstance(vocab, dict) or sorted(vocab.values()) != list(range(len(vocab))):
        raise CheckpointError(f"{path}: {GPT2_VOCAB} must map each piece to its id, the ids 0, 1, 2, … in turn")
    tokens = sorted(vocab, key=vocab.__getitem__)
    return tokens, [m for m in merges if m.strip() and not m.startswith("#version")]


def _gpt2_tokenizer(files: Files, raw: dict[str, Any], path: Path) -> PretrainedTokenizer:
    """tokenizer.json, else vocab.json + merges.txt (byte-level BPE, digits not split); bos and eos are the
    config's ids (both <|endoftext|> in GPT-2), pad and unk two special tokens appended after the vocabulary."""
    from tokenizers import AddedToken, Tokenizer

    source, appended, hf = f"{path}: tokenizer", list(GPT2_APPENDED.values()), None
    if files.has(HF_TOKENIZER):
        try:
            hf = Tokenizer.from_str(files.read(HF_TOKENIZER).decode("utf-8"))
        except Exception as exc:  # tokenizers raises its own Exception subclass with the parser's message
            raise CheckpointError(f"{path}: {HF_TOKENIZER} is not a tokenizer.json ({exc})") from exc
        hf.add_special_tokens([AddedToken(piece, special=True, normalized=False) for piece in appended])
        vocab = hf.get_vocab(with_added_tokens=True)
    elif files.has(GPT2_VOCAB) and files.has(GPT2_MERGES):
        tokens, merges = _gpt2_vocabulary(files, path)
        tokens += [piece for piece in appended if piece not in tokens]
        vocab = {piece: i for i, piece in enumerate(tokens)}
    else:
        raise CheckpointError(
            f"{path}: no tokenizer; a GPT-2 folder needs {HF_TOKENIZER}, or {GPT2_VOCAB} and {GPT2_MERGES}"
        )
    end = vocab.get(GPT2_END)
    bos = end if raw.get("bos_token_id") is None else raw["bos_token_id"]
    eos = end if raw.get("eos_token_id") is None else raw["eos_token_id"]
    eos = eos[0] if isinstance(eos, list) and eos else eos  # several end ids: the first ends text
    if not isinstance(bos, int) or not isinstance(eos, int):
        raise CheckpointError(f"{path}: {HF_CONFIG} has no bos_token_id and eos_token_id, the vocabulary no {GPT2_END}")
    specials = {name: vocab[piece] for name, piece in GPT2_APPENDED.items()} | {"bos_id": bos, "eos_id": eos}
    try:
        if hf is not None:
            return PretrainedTokenizer(hf, specials, source)
        control = sorted({i for i in (end, *specials.values()) if i is not None})
        return PretrainedTokenizer.byte_level_bpe(tokens, merges, control, specials, source, split_digits=False)
    except TokenizerError as exc:
        raise CheckpointError(str(exc)) from exc


def load_gpt2_folder(
    path: Path, name: str | None = None, card: dict[str, Any] | None = None, files: Files | None = None
) -> Checkpoint:
    """A GPT-2 in Hugging Face's layout (config.json, model.safetensors, and tokenizer.json or vocab.json +
    merges.txt), as GPT2LMHeadModel or GPT2Model saves it. <|endoftext|> is bos and eos; the pad and unk tokens our
    model needs are appended to the vocabulary, with zero embeddings and never predicted (mapping.append_rows).
    `files`: the files' contents from elsewhere (inference.pretrained.objects: a model in memory)."""
    files = files or Files(path)
    raw = files.config()
    if raw.get("model_type") != "gpt2":
        raise CheckpointError(f"{path}: {HF_CONFIG} model_type is {raw.get('model_type')!r}, expected 'gpt2'")
    tokenizer = _gpt2_tokenizer(files, raw, path)
    tensors = files.tensors()

    def build(specials: dict[str, int]) -> tuple[Any, Any]:
        n_vocab = raw.get("vocab_size")  # a missing or invalid one is named by gpt2_config
        rows = max(0, tokenizer.vocab_size - n_vocab) if isinstance(n_vocab, int) else 0
        limit = _limit(raw, "n_positions", "n_layer", "n_head")
        config = gpt2_config(raw, specials, f"{path}: {HF_CONFIG}", limit, rows)
        ours = rename(split_gpt2(tensors, f"{path}: {HF_WEIGHTS}"), GPT2_NAMES, GPT2_UNUSED, f"{path}: {HF_WEIGHTS}")
        if "positions.table" in ours:  # positions past max_len are never read: their rows are left out
            ours["positions.table"] = ours["positions.table"][: config.max_len]
        return config, fill_model(config, append_rows(ours, rows), str(path))

    card = card or {"task": "GPT-2 decoder", "source": str(path)}
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
    """Whichever loader fits `path`: a .gguf file, or a folder/zip whose config.json names bert, gpt2, llama,
    qwen2 or gpt_neox."""
    if path.suffix == ".gguf":
        return load_gguf(path, name, card)
    model_type = hf_model_type(path)
    if model_type == "bert":
        return load_bert(path, name, card)
    if model_type in ("llama", "qwen2", "gpt_neox"):
        return load_llama_folder(path, name, card)
    if model_type == "gpt2":
        return load_gpt2_folder(path, name, card)
    raise CheckpointError(
        f"{path}: not a checkpoint this app reads: expected our folder (model.safetensors, config.json, "
        f"tokenizer.model, card.json), a .gguf file, or a Hugging Face BERT/GPT-2/Llama/Qwen2/GPT-NeoX folder "
        f"({HF_CONFIG} model_type {model_type!r})"
    )
