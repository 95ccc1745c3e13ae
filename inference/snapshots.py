"""A checkpoint's training snapshots: the same model at a handful of steps of its run, to watch heads form.

`training.train` keeps them in `<checkpoint>/snapshots/`: `step-NNNNNN.safetensors` (float16, the config
values recorded in the header as model.safetensors) and `index.json` listing each one's step and validation loss.
A snapshot shares everything but the weights with its checkpoint: config, tokenizer, card.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from inference.checkpoint import Checkpoint, CheckpointError, check_recorded, fill_model

SNAPSHOTS, INDEX = "snapshots", "index.json"


@dataclass(frozen=True)
class Snapshot:
    """One saved step of the training run: its weights file (under snapshots/) and its validation loss."""

    step: int
    valid_loss: float
    file: str


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
        found = [Snapshot(int(e["step"]), float(e["valid_loss"]), str(e["file"])) for e in entries]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f'{index}: expected {{"snapshots": [{{"step", "valid_loss", "file"}}, …]}} ({type(exc).__name__}: {exc})'
        ) from exc
    for snapshot in found:
        if Path(snapshot.file).name != snapshot.file or not snapshot.file.endswith(".safetensors"):
            raise CheckpointError(f"{index}: {snapshot.file!r} is not a .safetensors file name inside {SNAPSHOTS}/")
        if not (index.parent / snapshot.file).is_file():
            raise CheckpointError(f"{index}: lists {snapshot.file}, which is not in {index.parent}")
    steps = [s.step for s in found]
    if len(set(steps)) != len(steps):
        raise CheckpointError(f"{index}: a step is listed twice ({steps})")
    return sorted(found, key=lambda s: s.step)


def load_snapshot(ckpt: Checkpoint, step: int) -> Checkpoint:
    """The checkpoint with the weights it had at training step `step` (upcast to float32, eval mode, frozen)."""
    by_step = {s.step: s for s in list_snapshots(ckpt.path)}
    if step not in by_step:
        raise CheckpointError(f"{ckpt.path / SNAPSHOTS}: no snapshot of step {step} (it has {sorted(by_step)})")
    path = ckpt.path / SNAPSHOTS / by_step[step].file
    check_recorded(path, ckpt.config)
    with torch.no_grad():
        model = fill_model(path, ckpt.config).float()
    for p in model.parameters():
        p.requires_grad_(False)
    return dataclasses.replace(ckpt, name=f"{ckpt.name}@{step}", model=model)
