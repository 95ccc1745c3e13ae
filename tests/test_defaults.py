"""Defaults that teach: the text each shipped model opens on shows what it does well, read from the real model."""

from __future__ import annotations

from pathlib import Path

from analysis.analyze import analyze
from inference import catalog
from inference.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parent.parent


def opening_text(name: str) -> str:
    ckpt = load_checkpoint(ROOT / "checkpoints" / name)
    return catalog.presets(name, ckpt.config.kind, ckpt.card)[0]


def test_the_induction_model_opens_on_a_text_it_copies() -> None:
    """Its first preset ends on a word seen once before: the model's top guess is the word that followed it, and
    it is sure of it."""
    text = opening_text("induction")
    words = text.split()
    earlier = words.index(words[-1])
    assert earlier < len(words) - 1 and words.count(words[-1]) == 2
    top = analyze(load_checkpoint(ROOT / "checkpoints" / "induction"), text).predictions[-1][0]
    assert top.piece == f"▁{words[earlier + 1]}" and top.prob > 0.5, (top.piece, top.prob)


def test_the_translator_opens_on_a_sentence_it_translates_right() -> None:
    """Its first preset comes out as a German reader would write it (the reference, written by hand: "The cat sat
    on the mat." comes out "… auf dem Mat.", which a class reads as a failure)."""
    text = opening_text("translate-en-de")
    output = analyze(load_checkpoint(ROOT / "checkpoints" / "translate-en-de"), text).output_text
    assert text == "I would like a cup of coffee, please." and output == "Ich möchte bitte eine Tasse Kaffee."
