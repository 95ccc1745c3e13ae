"""What every way of loading a model gives: a Checkpoint, and for anything wrong a CheckpointError naming the file.

Our own folders (inference.checkpoint) and published models (inference.pretrained) both return these; the
loaders import them from here, and inference.checkpoint, which chooses the loader, imports the loaders."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.tokenizer import TokenizerLike
from model.config import ModelConfig
from model.transformer import Model


class CheckpointError(ValueError):
    """A checkpoint file is missing or wrong; the message names the file and what to do."""


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: the model in eval mode, its tokenizer, config and card.

    Our own folders and published models (inference.pretrained: a BERT, a Llama from GGUF) give the same one;
    `path` is the folder, or the file (a .gguf, a zip) the weights came from."""

    name: str
    path: Path
    model: Model
    tokenizer: TokenizerLike
    config: ModelConfig
    card: dict[str, Any]
