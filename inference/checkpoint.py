"""A checkpoint is a directory: model.safetensors, config.json, tokenizer.model and card.json. No pickle.

`load_checkpoint` reads one, or hands a published model's file or folder to inference.pretrained; both give an
inference.loaded.Checkpoint (also importable from here, as is CheckpointError)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, load_model, save_file, save_model

from inference.jsonfile import JsonFileError, read_json
from inference.loaded import Checkpoint, CheckpointError
from inference.pretrained.packages import load_path
from inference.quantized import QUANTIZED, QUANTIZED_8, STORED_AS, dequantize, quantize, quantize_8
from inference.tokenizer import Tokenizer, TokenizerError
from model.config import ConfigError, ModelConfig
from model.factory import build_model
from model.transformer import Model

WEIGHTS, CONFIG, TOKENIZER, CARD = "model.safetensors", "config.json", "tokenizer.model", "card.json"
FORMAT = 1
CARD_KEYS = ("task", "data", "hyperparameters", "metrics", "command", "tokenizer_sha256")
# Config values the weights' shapes cannot prove (n_heads splits d_model without changing any tensor), recorded
# in the safetensors header at save and compared with config.json at load; the others make the message precise.
RECORDED = ("kind", "d_model", "n_heads", "n_encoder_layers", "n_decoder_layers")


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise CheckpointError(f"{path}: file not found; a checkpoint needs {WEIGHTS}, {CONFIG}, {TOKENIZER}, {CARD}")
    try:
        return read_json(path)
    except JsonFileError as exc:
        raise CheckpointError(str(exc)) from exc


def save_checkpoint(
    directory: str | Path,
    model: Model,
    tokenizer_bytes: bytes,
    card: dict[str, Any],
    bits: int = 32,
) -> Path:
    """Write the four files; the tokenizer's sha256 goes into both config.json and the card.

    `bits`: 32 stores float32, 16 float16 (half the bytes in the repository), 8 or 4 the matrices in groups with a
    scale each (inference.quantized: about a quarter or an eighth); loading turns each back into float32.
    """
    if bits not in (32, 16, 8, 4):
        raise ValueError(f"bits must be 32, 16, 8 or 4, not {bits}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(tokenizer_bytes)
    (directory / TOKENIZER).write_bytes(tokenizer_bytes)
    config = {"format": FORMAT, "model": model.config.to_dict(), "tokenizer_sha256": tokenizer.sha256}
    (directory / CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if bits in (8, 4):  # a tied matrix once: loading fills its twin
        state, seen = {}, set()
        for name, tensor in model.state_dict().items():
            if tensor.data_ptr() not in seen:
                state[name], _ = tensor, seen.add(tensor.data_ptr())
        meta = {**recorded(model.config), "quantized": QUANTIZED if bits == 4 else QUANTIZED_8}
        save_file((quantize if bits == 4 else quantize_8)(state), str(directory / WEIGHTS), metadata=meta)
    else:
        kept = copy.deepcopy(model).half() if bits == 16 else model
        save_model(kept, str(directory / WEIGHTS), metadata=recorded(model.config))
    card = {**card, "tokenizer_sha256": tokenizer.sha256}
    (directory / CARD).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return directory


def load_config(directory: Path) -> tuple[ModelConfig, str]:
    raw = _read_json(directory / CONFIG)
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("model"), dict):
        raise CheckpointError(f'{directory / CONFIG}: expected an object with "format": {FORMAT} and a "model" object')
    try:
        config = ModelConfig.from_dict(raw["model"])
    except (ConfigError, TypeError) as exc:
        raise CheckpointError(f"{directory / CONFIG}: {exc}") from exc
    sha = raw.get("tokenizer_sha256")
    if not isinstance(sha, str) or len(sha) != 64:
        raise CheckpointError(f'{directory / CONFIG}: "tokenizer_sha256" must be a 64-character hex string')
    return config, sha


def load_card(directory: Path) -> dict[str, Any]:
    card = _read_json(directory / CARD)
    if not isinstance(card, dict):
        raise CheckpointError(f"{directory / CARD}: expected a JSON object")
    missing = [k for k in CARD_KEYS if k not in card]
    if missing:
        raise CheckpointError(f"{directory / CARD}: missing keys {missing}")
    return card


def load_tokenizer(directory: Path, config: ModelConfig, expected_sha: str) -> Tokenizer:
    path = directory / TOKENIZER
    try:
        tokenizer = Tokenizer.from_file(path)
    except TokenizerError as exc:
        raise CheckpointError(str(exc)) from exc
    if tokenizer.sha256 != expected_sha:
        raise CheckpointError(
            f"{path}: sha256 {tokenizer.sha256[:12]}… does not match {CONFIG} ({expected_sha[:12]}…); "
            "the tokenizer was replaced — restore the one the model was trained with"
        )
    ids = (tokenizer.vocab_size, tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id)
    expected = (config.vocab_size, config.pad_id, config.unk_id, config.bos_id, config.eos_id)
    if ids != expected:
        raise CheckpointError(f"{path}: vocab size and special ids {ids} differ from {CONFIG} {expected}")
    return tokenizer


def recorded(config: ModelConfig) -> dict[str, str]:
    """The safetensors metadata save_checkpoint writes: the RECORDED config values, as strings."""
    return {key: str(getattr(config, key)) for key in RECORDED}


def read_metadata(path: Path) -> dict[str, str]:
    """The safetensors header's metadata, read without loading (or unpickling) any tensor."""
    try:
        with safe_open(str(path), "pt") as file:
            return file.metadata() or {}
    except Exception as exc:  # safetensors raises its own error types for truncated or foreign files
        raise CheckpointError(f"{path}: not a readable safetensors file ({exc})") from exc


def check_recorded(path: Path, config: ModelConfig) -> None:
    """The weights were saved for the config.json beside them: same kind, d_model, heads and layer counts."""
    metadata = read_metadata(path)
    missing = [key for key in RECORDED if key not in metadata]
    if missing:
        raise CheckpointError(
            f"{path}: the header does not record {', '.join(missing)}, so {CONFIG} cannot be checked against it; "
            "re-save it with inference.checkpoint.save_checkpoint, or, if you are sure config.json is the one it "
            f"was trained with, run `python -m inference.checkpoint {path.parent}` to record config.json's values"
        )
    differ = [
        f"{key}={metadata[key]} ({CONFIG} says {value})"
        for key, value in recorded(config).items()
        if metadata[key] != value
    ]
    if differ:
        raise CheckpointError(
            f"{path}: was saved with {', '.join(differ)}; the weights were trained with those values: "
            f"put them back in {CONFIG}"
        )


WEIGHT_DTYPES = ("F16", "F32", "F64")  # safetensors' names; loading would cast anything else to float silently


def check_dtypes(path: Path) -> None:
    """Every tensor of a weights file is float16, float32 or float64: integers or booleans where weights belong
    load as numbers without a word and the model writes nonsense ("bbbb…")."""
    try:
        with safe_open(str(path), framework="pt") as file:
            for name in file.keys():  # safe_open has keys(), not iteration
                dtype = file.get_slice(name).get_dtype()
                if dtype not in WEIGHT_DTYPES:
                    raise CheckpointError(
                        f"{path}: tensor {name} is stored as {dtype}; weights must be float16, float32 or float64"
                    )
    except CheckpointError:
        raise
    except Exception as exc:  # safetensors raises its own error types for truncated or foreign files
        raise CheckpointError(f"{path}: not a readable safetensors file ({exc})") from exc


def check_finite(path: Path, model: Model) -> None:
    """NaN or Inf in any weight would turn every output into NaN (and the trace into invalid JSON)."""
    for name, tensor in model.state_dict().items():
        bad = int((~torch.isfinite(tensor)).sum()) if tensor.is_floating_point() else 0
        if bad:
            raise CheckpointError(
                f"{path}: tensor {name} holds {bad} NaN or infinite values of {tensor.numel()}; the weights are "
                "damaged (or training diverged) — restore the file or retrain"
            )


def load_weights(directory: Path, config: ModelConfig) -> Model:
    path = directory / WEIGHTS
    if not path.is_file():
        raise CheckpointError(f"{path}: file not found")
    check_recorded(path, config)
    return read_weights(path, config)


def read_weights(path: Path, config: ModelConfig) -> Model:
    """The model of a weights file, float or quantised (:data:`QUANTIZED`, :data:`QUANTIZED_8`); CheckpointError
    names what is wrong."""
    kind = read_metadata(path).get("quantized")
    if kind not in (QUANTIZED, QUANTIZED_8):
        return model_from_safetensors(path, config)
    bits = 4 if kind == QUANTIZED else 8
    model = build_model(config, init=False)  # every weight is read from the file: none is drawn
    try:
        stored = load_file(str(path))
        for name, tensor in stored.items():
            suffix = "." + name.rsplit(".", 1)[-1]
            expected = STORED_AS[suffix] if suffix in STORED_AS else torch.float16
            if tensor.dtype != expected:
                raise CheckpointError(
                    f"{path}: tensor {name} is stored as {tensor.dtype}; {bits}-bit files hold {expected}"
                )
        weights = dequantize(stored)
        missing, unexpected = model.load_state_dict(weights, strict=False)
    except CheckpointError:
        raise
    except Exception as exc:  # safetensors' own errors for a damaged file; KeyError for a scale gone missing
        raise CheckpointError(f"{path}: its {bits}-bit weights cannot be read for this {config.kind} ({exc})") from exc
    state = model.state_dict(keep_vars=True)
    loaded = {state[k].data_ptr() for k in weights if k in state}
    untied = [k for k in missing if state[k].data_ptr() not in loaded]  # a tied copy was filled with its twin
    if untied or unexpected:
        raise CheckpointError(f"{path}: tensors missing {sorted(untied)[:5]} / unexpected {sorted(unexpected)[:5]}")
    check_finite(path, model)
    return model.eval()


def model_from_safetensors(path: Path, config: ModelConfig) -> Model:
    """A model built from `config` with the weights of the safetensors file `path`: every tensor present, fitting
    and finite."""
    check_dtypes(path)
    model = build_model(config, init=False)  # every weight is read from the file: none is drawn
    try:
        missing, unexpected = load_model(model, str(path), strict=False)
    except Exception as exc:  # safetensors raises its own error types for truncated or foreign files
        raise CheckpointError(f"{path}: not a readable safetensors file matching {CONFIG} ({exc})") from exc
    if missing or unexpected:
        raise CheckpointError(f"{path}: tensors missing {sorted(missing)[:5]} / unexpected {sorted(unexpected)[:5]}")
    check_finite(path, model)
    return model.eval()


def is_published(path: Path) -> bool:
    """Whether `path` is a published model's file or folder (a .gguf, a zip, or a config.json naming a Hugging
    Face `model_type`) rather than a folder in our layout."""
    if path.is_file():
        return True
    try:
        raw = read_json(path / CONFIG)
    except JsonFileError:
        return False
    return isinstance(raw, dict) and "model_type" in raw and "format" not in raw


def load_checkpoint(directory: str | Path) -> Checkpoint:
    """Load and validate every file; any problem raises CheckpointError naming the file.

    A .gguf file, a zip, or a folder in Hugging Face's BERT/Llama/GPT-2 layout (config.json with a model_type, no
    card.json) is loaded by inference.pretrained onto the same model, with the same checks."""
    directory = Path(directory)
    if is_published(directory):
        return load_path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: checkpoint directory not found")
    config, sha = load_config(directory)
    card = load_card(directory)
    if card["tokenizer_sha256"] != sha:
        raise CheckpointError(f"{directory / CARD}: tokenizer_sha256 differs from {CONFIG}")
    tokenizer = load_tokenizer(directory, config, sha)
    with torch.no_grad():
        model = load_weights(directory, config)
    for p in model.parameters():
        p.requires_grad_(False)
    return Checkpoint(directory.name, directory, model, tokenizer, config, card)


def record_config(directory: str | Path) -> Path:
    """Write config.json's RECORDED values into the header of a model.safetensors saved without them.

    For checkpoints saved before the header recorded them. The tensors are read as stored and written back
    unchanged (same dtype, same bytes); only the header's metadata grows. It trusts config.json's n_heads —
    the shapes cannot tell — so run it only on a checkpoint whose config.json is the one it was trained with.
    """
    directory = Path(directory)
    config, _ = load_config(directory)
    path = directory / WEIGHTS
    if not path.is_file():
        raise CheckpointError(f"{path}: file not found")
    metadata = read_metadata(path)
    if any(key in metadata for key in RECORDED):
        check_recorded(path, config)  # a record that disagrees stays: it is the evidence
    model_from_safetensors(path, config)  # every tensor present, fitting config.json and finite
    tensors = load_file(str(path))
    partial = path.with_name(path.name + ".partial")
    save_file(tensors, str(partial), metadata={**metadata, **recorded(config)})
    partial.replace(path)
    return path


if __name__ == "__main__":
    import sys

    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print("usage: python -m inference.checkpoint CHECKPOINT_DIR...\n" + record_config.__doc__, file=sys.stderr)
        sys.exit(2)
    for argument in sys.argv[1:]:
        try:
            print(f"recorded {', '.join(RECORDED)} in {record_config(argument)}")
        except CheckpointError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)
