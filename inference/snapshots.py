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

from inference.checkpoint import Checkpoint, CheckpointError, check_recorded, read_weights
from inference.quantized import GROUP, QUANTIZED, dequantize, quantize

__all__ = ["GROUP", "QUANTIZED", "dequantize", "quantize", "read_weights"]  # their home is inference.quantized

SNAPSHOTS, INDEX = "snapshots", "index.json"


@dataclass(frozen=True)
class Snapshot:
    """One saved step of the training run: its weights file (under snapshots/; None: the checkpoint's own
    weights) and its validation loss."""

    step: int
    valid_loss: float
    file: str | None


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
