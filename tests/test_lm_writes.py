"""The shipped language model writes: Generate, on its default text and every preset, continues for the tokens
it is asked (Generate's default), at least 20 words, greedy output without a word three times in a row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from inference.analyze import generate_text
from inference.catalog import presets
from inference.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parent.parent
CKPT = load_checkpoint(ROOT / "checkpoints" / "lm-english")
TEXTS = presets(CKPT.name, CKPT.config.kind, CKPT.card)
TOKENS = 40  # views.generate.DEFAULT_TOKENS (not imported: that module is a page, it imports streamlit)


def test_the_default_is_the_first_preset() -> None:
    assert TEXTS[0] == "The cat sat on the mat."


@pytest.mark.parametrize("text", TEXTS, ids=range(1, len(TEXTS) + 1))
def test_generate_writes_at_least_twenty_words(text: str) -> None:
    written = generate_text(CKPT, text, TOKENS)
    words = re.findall(r"[\w']+", written)
    assert len(words) >= 20, written
    lowered = [w.lower() for w in words]
    assert not any(a == b == c for a, b, c in zip(lowered, lowered[1:], lowered[2:])), written
