"""Task reverse: synthetic strings over a small alphabet, written backwards (seeded)."""

from __future__ import annotations

import random
from pathlib import Path

from training.data.common import (
    SPECIAL_IDS,
    train_tokenizer,
    write_lines,
    write_manifest,
)

REVERSE_ALPHABET = "abcdefghijklmnop"
REVERSE_MAX_LEN = 24
REVERSE_SIZES = {"train": 50_000, "valid": 1_000, "test": 1_000}


def random_string(rng: random.Random, alphabet: str = REVERSE_ALPHABET, max_len: int = REVERSE_MAX_LEN) -> str:
    """A string with uniformly random length in ``1..max_len`` over ``alphabet``."""
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, max_len)))


def make_reverse_splits(seed: int, sizes: dict[str, int] = REVERSE_SIZES) -> dict[str, list[str]]:
    """Source strings per split; valid/test strings never occur in train nor in each other.

    Train is drawn first (duplicates allowed). Held-out strings that collide with anything seen are
    redrawn (with a fresh length), so very short strings (length <= 2) are absent from valid/test.
    """
    rng = random.Random(seed)
    splits = {"train": [random_string(rng) for _ in range(sizes["train"])]}
    seen = set(splits["train"])
    for split in ("valid", "test"):
        items: list[str] = []
        while len(items) < sizes[split]:
            s = random_string(rng)
            if s not in seen:
                seen.add(s)
                items.append(s)
        splits[split] = items
    return splits


def prepare_reverse(out_dir: Path, seed: int) -> None:
    """Write the reverse task splits, tokenizer and manifest."""
    splits = make_reverse_splits(seed)
    for split, items in splits.items():
        write_lines(out_dir / f"{split}.src", items)
        write_lines(out_dir / f"{split}.tgt", (s[::-1] for s in items))
    train_tokenizer(
        [out_dir / "train.src"],
        out_dir / "tokenizer",
        vocab_size=len(REVERSE_ALPHABET) + len(SPECIAL_IDS),
        model_type="char",
        add_dummy_prefix=False,
    )
    sources = [
        {
            "name": "synthetic string reversal",
            "package": "model/data.py (generated)",
            "obtained_from": f"random.Random({seed}); alphabet {REVERSE_ALPHABET!r}, lengths 1-{REVERSE_MAX_LEN}",
            "license": "n/a (generated)",
        }
    ]
    files = {s: [f"{s}.src", f"{s}.tgt"] for s in splits}
    write_manifest(out_dir, "reverse", seed, sources, files)
