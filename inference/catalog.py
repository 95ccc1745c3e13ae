"""Which checkpoints exist, what their cards say, and which preset sentences suit each model."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference.checkpoint import CARD, CONFIG, TOKENIZER, WEIGHTS, CheckpointError, load_card, load_config

ENV_VAR = "ATLAS_CHECKPOINTS"
DEFAULT_DIR = Path(__file__).resolve().parent.parent / "checkpoints"

# The sentences of Figures 3–5 of "Attention Is All You Need" (Vaswani et al., 2017): the Paper view draws them.
PAPER_SENTENCES = (
    "It is in this spirit that a majority of American governments have passed new laws since 2009 making the "
    "registration or voting process more difficult.",
    "The Law will never be perfect, but its application should be just - this is what we are missing, in my opinion.",
)

PRESETS: dict[str, tuple[str, ...]] = {
    "reverse": ("abcdef", "hello world", "attention", "1234567890", "racecar"),
    "translate": (
        "The cat sat on the mat.",
        "Where is the train station?",
        "I would like a cup of coffee, please.",
        "We are going to the park tomorrow.",
        "My sister reads a book every evening.",
        *PAPER_SENTENCES,
    ),
    "lm": (
        "The cat sat on the mat.",
        "Once upon a time, there was a little girl who",
        "The capital of France is",
        "She opened the door and saw",
        "The cat sat on the mat. The cat sat on the",
        *PAPER_SENTENCES,
    ),
}


@dataclass(frozen=True)
class Entry:
    """One directory under the checkpoints folder: loadable-looking or not (then `error` says why)."""

    name: str
    path: Path
    kind: str | None = None
    card: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def checkpoints_dir() -> Path:
    """`$ATLAS_CHECKPOINTS` when set, else `checkpoints/` beside the app."""
    value = os.environ.get(ENV_VAR, "").strip()
    return Path(value).expanduser() if value else DEFAULT_DIR


def _looks_like_checkpoint(path: Path) -> bool:
    return any((path / f).exists() for f in (WEIGHTS, CONFIG, TOKENIZER, CARD))


def list_checkpoints(root: Path | None = None) -> list[Entry]:
    """Every sub-directory holding a checkpoint file, sorted by name; config and card are checked (cheap),
    the weights only when the model is loaded."""
    root = checkpoints_dir() if root is None else root
    if not root.is_dir():
        return []
    entries = []
    for path in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if not _looks_like_checkpoint(path):
            continue
        try:
            config, _ = load_config(path)
            card = load_card(path)
        except CheckpointError as exc:
            entries.append(Entry(path.name, path, error=str(exc)))
            continue
        entries.append(Entry(path.name, path, config.kind, card))
    return entries


def folder_stamp(root: Path | None = None) -> tuple[tuple[str, float], ...]:
    """(name, stamp) of every sub-directory: changes when a checkpoint is added, removed or replaced. A few stat
    calls, where `list_checkpoints` reads every config and card: the app lists again only when this changes."""
    root = checkpoints_dir() if root is None else root
    if not root.is_dir():
        return ()
    return tuple((p.name, stamp(p)) for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith("."))


def stamp(path: Path) -> float:
    """Latest modification time of the checkpoint's files: a cache key that changes when it is replaced."""
    times = [(path / f).stat().st_mtime for f in (WEIGHTS, CONFIG, TOKENIZER, CARD) if (path / f).exists()]
    return max(times, default=0.0)


def preset_family(name: str, kind: str | None, card: dict[str, Any]) -> str:
    """'reverse', 'translate' or 'lm', judged from the card's task, the directory name and the model kind."""
    words = f"{card.get('task', '')} {name}".lower()
    if "revers" in words:
        return "reverse"
    if "translat" in words or "en-de" in words or kind == "encoder-decoder":
        return "translate"
    return "lm"


def presets(name: str, kind: str | None, card: dict[str, Any]) -> tuple[str, ...]:
    """Preset inputs for a checkpoint."""
    return PRESETS[preset_family(name, kind, card)]


def card_summary(card: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
    """The card's task and its metrics as (name, value) rows, values formatted for reading."""
    metrics = card.get("metrics") or {}
    rows = []
    if isinstance(metrics, dict):
        for key, value in metrics.items():
            if isinstance(value, dict | list):  # per-test-set tables and signatures: the card has them
                continue
            text = f"{value:.4g}" if isinstance(value, float) else str(value)
            rows.append((str(key), text))
    return str(card.get("task", "")), rows
