"""analysis.record.DecodingSteps: Generate's steps counted from an analysis, outside the page."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from analysis.record import DecodingSteps
from inference.prediction import Prediction
from model.names import Capabilities

EOS = 3


class Written(SimpleNamespace, Capabilities):
    """The fields of an Analysis that DecodingSteps reads, and what its kind can do (as an Analysis answers)."""


def analysis(kind: str, pieces: int, generated: int = 0, ends: bool = False) -> Written:
    last = Prediction("</s>" if ends else "x", EOS if ends else 9, 0.9)
    return Written(kind=kind, target_pieces=("p",) * pieces, generated=generated, predictions=((last,),))


def test_a_translators_steps_start_after_its_start_token_and_count_the_end_it_chose() -> None:
    steps = DecodingSteps.of(analysis("encoder-decoder", 4, ends=True), EOS)  # <s> a b c, then </s>
    assert (steps.first, steps.count) == (1, 4)
    assert [steps.query(s) for s in range(1, 5)] == [0, 1, 2, 3]
    assert steps.keys_held(4) == 4
    assert DecodingSteps.of(analysis("encoder-decoder", 4), EOS).count == 3  # cut before it ended


def test_a_language_models_steps_are_its_own_tokens_and_the_end_only_when_it_chose_to_stop() -> None:
    text_then_three = analysis("decoder-only", 8, generated=3, ends=True)
    asked_three = DecodingSteps.of(text_then_three, EOS, asked=3)
    assert (asked_three.first, asked_three.count) == (5, 3), "it stopped at the tokens asked: its next guess is no step"
    assert asked_three.query(1) == 4, "step 1 fed the text's last token"
    assert DecodingSteps.of(text_then_three, EOS, asked=5).count == 4, "it ended the text itself: one step more"


def test_a_step_outside_the_steps_is_refused() -> None:
    steps = DecodingSteps.of(analysis("encoder-decoder", 3), EOS)
    for bad in (0, 3):
        with pytest.raises(ValueError, match="outside 1..2"):
            steps.query(bad)
