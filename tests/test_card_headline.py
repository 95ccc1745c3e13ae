"""The sidebar's card says how good a model is in one plain sentence (inference.catalog.headline), from the figures
its card holds: each shipped checkpoint has one, worded for its task, and a share reads as a person says it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference import catalog

ROOT = Path(__file__).resolve().parent.parent


def card(name: str) -> dict:
    return json.loads((ROOT / "checkpoints" / name / "card.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("lm-english", "Guesses the next token right 28% of the time on held-out text (perplexity 51.4)."),
        ("translate-en-de", "Scores BLEU 47.4 (of 100) on 1,000 held-out sentences, written with beam search (4)"),
        ("reverse", "Writes 99.9% of held-out inputs exactly right."),
        ("induction", "Copies a repeated run of random words right 99.4% of the time, against 0.1% on the first"),
        ("fivegram-1L-1H", "Guesses the centre word right 25% of the time"),
    ],
)
def test_each_shipped_model_says_how_good_it_is_in_words(name: str, said: str) -> None:
    assert catalog.headline(card(name)).startswith(said)


def test_every_shipped_checkpoint_has_a_headline() -> None:
    names = [p.parent.name for p in sorted((ROOT / "checkpoints").glob("*/card.json"))]
    assert names and all(catalog.headline(card(n)) for n in names)


def test_a_card_without_figures_says_nothing_rather_than_guess() -> None:
    assert catalog.headline({}) == ""
    assert catalog.headline({"metrics": "broken"}) == ""
    assert catalog.headline({"metrics": {"bleu": "high", "top1_accuracy": True}}) == ""
    assert catalog.headline({"metrics": {"bleu": 12.0}}).startswith("Scores BLEU 12.0 (of 100) on held-out")


def test_the_published_models_figures_are_on_lm_englishs_current_split() -> None:
    """SmolLM2's card figures (inference/pretrained/measured.json, written by `python -m atlas evaluate
    SmolLM2-135M-Instruct --write-card`) were measured on the same test documents as lm-english's card: same lines,
    same characters, so the sidebar never sets figures of two splits side by side."""
    measured = json.loads((ROOT / "inference" / "pretrained" / "measured.json").read_text(encoding="utf-8"))
    ours = card("lm-english")["metrics"]
    for name, entry in measured.items():
        theirs = entry["metrics"]
        for key in ("split", "test_lines", "test_characters"):
            assert theirs[key] == ours[key], (name, key, theirs[key], ours[key])
