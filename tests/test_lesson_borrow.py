"""Which model a Lesson step borrows when the loaded one cannot show it: beside the shipped models of real English
(lm-english) and of random words (induction), a translator borrows lm-english for the steps about what a language
model of English has, its guesses and its induction heads, and the circuit step's copied word is one lm-english
really gives a high probability (analysis.lesson.circuit_ids, read here from the model itself)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from analysis.lesson import CIRCUIT_SENTENCE
from inference.checkpoint import load_checkpoint
from model.forward import forward
from viz.labels import display_piece

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
PAGE = "views/lesson.py"


@pytest.fixture
def checkpoints(tmp_path: Path, good_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped lm-english and induction models beside the tiny translator, in a folder of this test's own."""
    for name in ("lm-english", "induction"):
        shutil.copytree(ROOT / "checkpoints" / name, tmp_path / name)
    shutil.copytree(good_dir / "translate-tiny", tmp_path / "translate-tiny")
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))
    return tmp_path


@pytest.fixture
def app(checkpoints: Path) -> Callable[..., AppTest]:
    """`app(model, slug)` → the app on Lesson step `slug` with `model` chosen."""

    def make(model: str, slug: str) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=180)
        at.session_state["lesson_predict"] = False  # figures at once: tests/test_lesson_quiz.py asks first
        at.query_params.update({"model": model, "lesson": slug})
        at.run()
        at = at.switch_page(PAGE).run()
        assert not at.exception, [e.value for e in at.exception]
        assert not at.error, [e.value for e in at.error]
        return at

    return make


def shown_on(at: AppTest) -> str:
    """The model the step was borrowed from, as the page's note names it."""
    note = next(i.value for i in at.info if "Shown here on" in i.value)
    return re.search(r"Shown here on (\S+), loaded for this step", note)[1]


@pytest.mark.parametrize("slug", ["next-token", "induction-heads"])
def test_a_translator_borrows_the_english_model_for_its_guesses_and_heads(app, slug: str) -> None:
    at = app("translate-tiny", slug)
    assert shown_on(at) == "lm-english" and at.selectbox(key="model").value == "translate-tiny"
    assert [b.label for b in at.button if b.key.startswith("lesson_switch_")] == ["Switch the app to lm-english"]


def test_the_circuit_on_a_translator_copies_a_word_of_english_the_model_gives_high_probability(app) -> None:
    at = app("translate-tiny", "induction-circuit")
    assert shown_on(at) == "lm-english"
    said = next(c.value for c in at.caption if "probability" in c.value and c.value.startswith("lm-english gives"))
    word, shown = re.search(r"gives “(.+)” probability (\d\.\d{3}) there", said).groups()
    ckpt = load_checkpoint(ROOT / "checkpoints" / "lm-english")  # the real model, outside the app
    ids = ckpt.tokenizer.encode(CIRCUIT_SENTENCE)
    copy = len(ids) - 2  # the sentence's last word, before its full stop
    assert word == display_piece(ckpt.tokenizer.pieces([ids[copy]])[0]) == "▁house"
    with torch.inference_mode():
        logits, _ = forward(ckpt.model, torch.tensor([[ckpt.config.bos_id, *ids, *ids[:copy]]]), record=False)
    probability = float(logits[0, -1].float().softmax(dim=-1)[ids[copy]])
    assert shown == f"{probability:.3f}" and probability > 0.5
    text = " ".join(m.value for m in at.markdown)
    assert "1. The previous-token head: layer 1, head 8" in text and "induction head, layer 2, head 6" in text
