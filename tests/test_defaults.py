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
    assert text == "I would like a cup of coffee, please." and output == "Ich möchte eine Tasse Kaffee, bitte."


def test_head_ablation_opens_with_the_recorded_head_switched_off(good_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """A model whose card records the head that formed opens Head ablation with that head switched off (and says
    so), so the first view shows what it does; a head the person removes stays removed."""
    import json
    import shutil

    from streamlit.testing.v1 import AppTest

    shutil.copytree(good_dir / "lm-tiny", tmp_path / "lm-tiny")
    card_path = tmp_path / "lm-tiny" / "card.json"
    card = json.loads(card_path.read_text(encoding="utf-8"))
    best = {"layer": 2, "head": 2, "block": "decoder.layers.1.self_attn", "score": 0.9}
    card.setdefault("metrics", {})["induction"] = {"best_induction_head": best}
    card_path.write_text(json.dumps(card), encoding="utf-8")
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    at.switch_page("views/ablation.py").run()
    assert not at.exception
    assert at.multiselect(key="ablate_heads").value == ["decoder.layers.1.self_attn:1"]
    assert "induction head switched off (layer 2 · head 2)" in " ".join(c.value for c in at.caption)
    assert at.query_params["ablate_heads"] == "decoder.self_attn-L2-H2"
    at.multiselect(key="ablate_heads").set_value([]).run()
    at.switch_page("views/explore.py").run()
    at.switch_page("views/ablation.py").run()
    assert at.multiselect(key="ablate_heads").value == []
