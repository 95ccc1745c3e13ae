"""Compare's default pairs: each preset's partner differs in a word and has as many tokens in every shipped model
whose presets hold it, so the first visit draws the difference of the two heads, not a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.catalog import MINIMAL_PAIRS, PRESETS, presets
from inference.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["lm-english", "translate-en-de"])
def test_every_preset_has_a_partner_of_as_many_tokens(name: str) -> None:
    ckpt = load_checkpoint(ROOT / "checkpoints" / name)
    for text in presets(name, ckpt.config.kind, ckpt.card):
        assert text in MINIMAL_PAIRS, text
        partner = MINIMAL_PAIRS[text]
        assert partner != text and len(ckpt.tokenizer.encode(partner)) == len(ckpt.tokenizer.encode(text)), text


def test_partners_change_few_words() -> None:
    for first, second in MINIMAL_PAIRS.items():
        changed = sum(a != b for a, b in zip(first.split(), second.split()))
        assert len(first.split()) == len(second.split()) and 1 <= changed <= 2, first
    assert set(PRESETS["translate"]) <= set(MINIMAL_PAIRS)
