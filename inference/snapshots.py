"""A checkpoint's training snapshots: the same model at a handful of steps of its run, to watch heads form.

`training.train` keeps them in `<checkpoint>/snapshots/`: `step-NNNNNN.safetensors` (float16, the config
values recorded in the header as model.safetensors) and `index.json` listing each one's step and validation loss.
A snapshot shares everything but the weights with its checkpoint: config, tokenizer, card.

Where float16 snapshots would not fit the repository, `python -m training.snapshots` ships them in 4 bits
(QUANTIZED in the header): each matrix in groups of GROUP numbers along a row, each group its own float16 scale
and the numbers −7 … 7 (two to a byte), as GGUF's Q4_0 does; vectors stay float16. An index entry whose "file" is
null stands for the checkpoint's own weights (the run's last step, not stored twice).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file

from inference.checkpoint import (
    Checkpoint,
    CheckpointError,
    check_finite,
    check_recorded,
    model_from_safetensors,
    read_metadata,
)
from model.config import ModelConfig
from model.factory import build_model
from model.transformer import Model

SNAPSHOTS, INDEX = "snapshots", "index.json"
QUANTIZED, GROUP = "int4-groups-of-32", 32  # the header's "quantized" value; numbers per float16 scale
PACKED, SCALE = ".int4", ".int4_scale"  # a quantised matrix W is stored as W.int4 (uint8) and W.int4_scale


@dataclass(frozen=True)
class Snapshot:
    """One saved step of the training run: its weights file (under snapshots/; None: the checkpoint's own
    weights) and its validation loss."""

    step: int
    valid_loss: float
    file: str | None


def quantize(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """4-bit weights: every matrix whose rows split into groups of GROUP, as two numbers −7 … 7 per byte and a
    float16 scale per group (the group's largest magnitude / 7); everything else float16."""
    out = {}
    for name, tensor in tensors.items():
        tensor = tensor.detach().float().cpu()
        if tensor.dim() != 2 or tensor.shape[1] % GROUP:
            out[name] = tensor.half()
            continue
        rows, cols = tensor.shape
        groups = tensor.reshape(rows, cols // GROUP, GROUP)
        scale = (groups.abs().amax(dim=2, keepdim=True) / 7).half().float()
        codes = torch.where(scale > 0, groups / scale.clamp_min(1e-30), 0).round().clamp(-7, 7).to(torch.int16) + 8
        codes = codes.reshape(rows, cols).to(torch.uint8)
        out[name + PACKED] = (codes[:, 0::2] | (codes[:, 1::2] << 4)).contiguous()
        out[name + SCALE] = scale.reshape(rows, cols // GROUP).half()
    return out


def dequantize(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The float32 weights of :func:`quantize`'s output (and of any float tensors beside them)."""
    out = {}
    for name, tensor in tensors.items():
        if name.endswith(SCALE):
            continue
        if not name.endswith(PACKED):
            out[name] = tensor.float()
            continue
        base = name.removesuffix(PACKED)
        scale = tensors[base + SCALE].float()
        rows, half = tensor.shape
        codes = torch.stack(((tensor & 0x0F), (tensor >> 4)), dim=2).reshape(rows, 2 * half).float() - 8
        out[base] = (codes.reshape(rows, -1, GROUP) * scale.unsqueeze(2)).reshape(rows, 2 * half)
    return out


def read_weights(path: Path, config: ModelConfig) -> Model:
    """The model of a snapshot file, float16 or 4-bit (:data:`QUANTIZED`); CheckpointError names what is wrong."""
    if read_metadata(path).get("quantized") != QUANTIZED:
        return model_from_safetensors(path, config)
    model = build_model(config, init=False)  # every weight is read from the file: none is drawn
    try:
        weights = dequantize(load_file(str(path)))
        missing, unexpected = model.load_state_dict(weights, strict=False)
    except Exception as exc:  # safetensors' own errors for a damaged file; KeyError for a scale gone missing
        raise CheckpointError(f"{path}: its 4-bit weights cannot be read for this {config.kind} ({exc})") from exc
    state = model.state_dict(keep_vars=True)
    loaded = {state[k].data_ptr() for k in weights if k in state}
    untied = [k for k in missing if state[k].data_ptr() not in loaded]  # a tied copy was filled with its twin
    if untied or unexpected:
        raise CheckpointError(f"{path}: tensors missing {sorted(untied)[:5]} / unexpected {sorted(unexpected)[:5]}")
    check_finite(path, model)
    return model.eval()


def list_snapshots(directory: str | Path) -> list[Snapshot]:
    """The snapshots of the checkpoint in `directory`, earliest first; [] when it has none.

    An index that cannot be read, or that names a file that is not there, raises CheckpointError naming it.
    """
    index = Path(directory) / SNAPSHOTS / INDEX
    if not index.is_file():
        return []
    try:
        raw = json.loads(index.read_text(encoding="utf-8"))
        entries = raw["snapshots"]
        found = [
            Snapshot(int(e["step"]), float(e["valid_loss"]), None if e["file"] is None else str(e["file"]))
            for e in entries
        ]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f'{index}: expected {{"snapshots": [{{"step", "valid_loss", "file"}}, …]}} ({type(exc).__name__}: {exc})'
        ) from exc
    for snapshot in found:
        if snapshot.file is None:  # the checkpoint's own weights
            continue
        if Path(snapshot.file).name != snapshot.file or not snapshot.file.endswith(".safetensors"):
            raise CheckpointError(f"{index}: {snapshot.file!r} is not a .safetensors file name inside {SNAPSHOTS}/")
        if not (index.parent / snapshot.file).is_file():
            raise CheckpointError(f"{index}: lists {snapshot.file}, which is not in {index.parent}")
    steps = [s.step for s in found]
    if len(set(steps)) != len(steps):
        raise CheckpointError(f"{index}: a step is listed twice ({steps})")
    return sorted(found, key=lambda s: s.step)


def stored_as(directory: str | Path) -> str:
    """How the snapshots are stored, as their index says ("float16" when it does not say)."""
    index = Path(directory) / SNAPSHOTS / INDEX
    try:
        return str(json.loads(index.read_text(encoding="utf-8")).get("dtype", "float16"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return "float16"


def load_snapshot(ckpt: Checkpoint, step: int) -> Checkpoint:
    """The checkpoint with the weights it had at training step `step` (upcast to float32, eval mode, frozen)."""
    by_step = {s.step: s for s in list_snapshots(ckpt.path)}
    if step not in by_step:
        raise CheckpointError(f"{ckpt.path / SNAPSHOTS}: no snapshot of step {step} (it has {sorted(by_step)})")
    if by_step[step].file is None:
        return dataclasses.replace(ckpt, name=f"{ckpt.name}@{step}")
    path = ckpt.path / SNAPSHOTS / by_step[step].file
    check_recorded(path, ckpt.config)
    with torch.no_grad():
        model = read_weights(path, ckpt.config).float()
    for p in model.parameters():
        p.requires_grad_(False)
    return dataclasses.replace(ckpt, name=f"{ckpt.name}@{step}", model=model)
