"""The page's "How sure was the model?" reads its analysis's own traced pass: the same rows a pass of their own
(analysis.forced.score) gives, so the page no longer runs the model a second time for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.analyze import analyze
from analysis.forced import score
from inference.checkpoint import load_checkpoint
from inference.text import clean_text, encode_source

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["Good morning!", "I would like a cup of coffee, please.", "The dog sleeps under the bed."]


def assert_same_rows(traced, own) -> None:
    assert len(traced) == len(own) > 0
    for a, b in zip(traced, own):
        assert (a.position, a.token, a.piece, a.rank, a.top_token, a.top_piece) == (
            b.position,
            b.token,
            b.piece,
            b.rank,
            b.top_token,
            b.top_piece,
        )
        assert a.probability == pytest.approx(b.probability, abs=1e-5)
        assert a.top_probability == pytest.approx(b.top_probability, abs=1e-5)


@pytest.mark.parametrize("text", TEXTS)
def test_the_translator_s_certainty_is_its_analysis_s_own(text) -> None:
    ckpt = load_checkpoint(ROOT / "checkpoints" / "translate-en-de")
    analysis = analyze(ckpt, text)
    source = encode_source(ckpt, clean_text(text).text, [])
    assert_same_rows(analysis.certainty, score(ckpt, analysis.target_ids, source))


def test_a_language_model_s_certainty_covers_the_text_and_what_it_wrote(tiny_checkpoints) -> None:
    ckpt = load_checkpoint(tiny_checkpoints["decoder-only"])
    analysis = analyze(ckpt, "abc ab", continuation=4)
    assert_same_rows(analysis.certainty, score(ckpt, analysis.target_ids))


def test_the_explore_page_shows_its_certainty_without_a_second_pass(app, monkeypatch) -> None:
    """A second pass would go through ui.cache's `scored`: one that fails makes the page say so."""

    def second_pass(*args, **kwargs):
        raise AssertionError("the page ran the model again for its certainty")

    monkeypatch.setattr("ui.cache.analyses.scored", second_pass)
    at = app(folder=ROOT / "checkpoints", model="translate-en-de", text="Where is the train station?")
    assert not at.exception
    assert "How sure was the model?" in [h.value for h in at.header]
    assert not [e.value for e in at.error]
