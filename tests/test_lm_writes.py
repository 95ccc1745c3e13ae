"""The shipped language model writes: Generate, as it opens (sampling with its fixed seed, its default tokens), on
the default text and every preset, writes at least 30 words; greedy writes at least 20."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from analysis.analyze import analyze, generate_text
from inference.catalog import presets
from inference.checkpoint import load_checkpoint
from inference.decoding import Sampling

pytestmark = (
    pytest.mark.slow
)  # Generate writing thirty words for every preset (15 s): CI runs them; the everyday tier stays short

ROOT = Path(__file__).resolve().parent.parent
CKPT = load_checkpoint(ROOT / "checkpoints" / "lm-english")
TEXTS = presets(CKPT.name, CKPT.config.kind, CKPT.card)


def words(text: str) -> list[str]:
    return re.findall(r"[\w']+", text)


def test_the_default_is_the_first_preset() -> None:
    assert TEXTS[0] == "The cat sat on the mat."


@pytest.fixture(scope="module")
def generate_page() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update(model=CKPT.name)
    at.run()
    at.switch_page("views/generate.py").run()
    return at


@pytest.mark.parametrize("text", TEXTS, ids=range(1, len(TEXTS) + 1))
def test_generate_as_it_opens_writes_at_least_thirty_words(generate_page: AppTest, text: str) -> None:
    at = generate_page
    at.text_area(key="text").set_value(text).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="gen_mode").value == "sampling"
    written = at.code[0].value.split(" ⟶ ", 1)[1]
    assert len(words(written)) >= 30, written
    seeded = analyze(CKPT, text, continuation=60, sampling=Sampling(0.8, 40, 0))  # what every visit writes
    assert written == seeded.continuation


@pytest.mark.parametrize("text", TEXTS, ids=range(1, len(TEXTS) + 1))
def test_greedy_writes_at_least_twenty_words_without_a_word_three_times_in_a_row(text: str) -> None:
    written = words(generate_text(CKPT, text, 40))
    assert len(written) >= 20, written
    lowered = [w.lower() for w in written]
    assert not any(a == b == c for a, b, c in zip(lowered, lowered[1:], lowered[2:])), written
