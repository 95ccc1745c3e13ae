"""The head lm-english's card names the induction head (analysis.defaults, chosen on ordinary sentences with a
repeat) copies on sentences of this test's own, not only on repeated random tokens; and the Lesson, Explore's
default, Head ablation and the class's head question name that same head on the Lesson's own sentence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import atlas
from analysis import class_questions
from analysis.induction import SENTENCES, second_copy, sentence_scores
from analysis.lesson import induction_named
from inference import catalog
from inference.checkpoint import load_checkpoint
from inference.text import encode_prefix
from model.forward import forward
from model.names import sublayer_layer

ROOT = Path(__file__).resolve().parents[1]
COPIES_AT = 0.4  # an induction head's bar: the named head's mean weight on the induction target over the second copy

# Sentences a class might type, none of them the ones the head was chosen on (analysis.induction.SENTENCES).
OURS = (
    "The farmer sold three brown cows at the market. The farmer sold three brown cows at the",
    "A small girl found a shiny stone in the sand. A small girl found a shiny stone in the",
    "Every morning the baker sings a happy song. Every morning the baker sings a happy",
    "The children built a tall tower of wooden blocks. The children built a tall tower of wooden",
    "Lily and Max played in the snow all day. Lily and Max played in the snow all",
    "My father drinks hot tea with honey. My father drinks hot tea with",
    "The cat sleeps under the warm kitchen table. The cat sleeps under the warm kitchen",
    "We saw a yellow bus near the old church. We saw a yellow bus near the old",
    "The king gave his daughter a golden ring. The king gave his daughter a golden",
    "Sam put the blue cup on the wooden shelf. Sam put the blue cup on the wooden",
)


@pytest.fixture(scope="module")
def ckpt():
    return load_checkpoint(ROOT / "checkpoints" / "lm-english")


def test_our_sentences_are_not_the_ones_the_head_was_chosen_on_and_each_repeats() -> None:
    assert not set(OURS) & set(SENTENCES)
    assert all(len(second_copy(s.split())) >= 3 for s in OURS)


def test_the_second_copy_is_the_tokens_that_repeat_a_pair_and_their_target_follows_the_earlier_copy() -> None:
    tokens = "<s> the old man went and the old man".split()
    assert second_copy(tokens) == [(7, 3), (8, 4)]  # "old" after "the" → "man"; "man" after "old" → "went"
    assert second_copy("<s> a b c d".split()) == []


@torch.inference_mode()
def test_the_named_induction_head_copies_on_sentences_of_our_own(ckpt) -> None:
    sublayer, head = induction_named(ckpt.card)
    scores = []
    for text in OURS:
        ids = encode_prefix(ckpt, text, [])
        assert ckpt.config.unk_id not in ids, text
        _, trace = forward(ckpt.model, torch.tensor([ids]))
        scores.append(float(sentence_scores(trace.attention[sublayer].weights[0, head].numpy(), ids)))
    assert min(scores) >= COPIES_AT, dict(zip(OURS, scores, strict=True))


def test_the_random_token_head_is_recorded_beside_it_and_rests_on_the_start_token_on_prose(ckpt) -> None:
    found = catalog.card_defaults(ckpt.card, "head")
    probe = found["probe"]
    assert (probe["block"], probe["head"]) != (found["block"], found["head"])
    assert probe["score"] > probe["score_of_head"] > 0.5  # both copy random tokens
    assert probe["sentence_score"] < found["score"] and probe["sink"] > 0.3


def test_the_four_places_name_the_same_head_on_the_lessons_sentence(ckpt) -> None:
    from views.lesson_steps.induction import CLASS_SENTENCE

    named = induction_named(ckpt.card)
    explore = catalog.default_head(ckpt.card, "head")
    ablation = catalog.default_head(ckpt.card, "ablation")
    analysis = atlas.analyze(ckpt, CLASS_SENTENCE)
    asked = class_questions.induction_head(analysis, named=(sublayer_layer(named[0]), named[1]))
    asked_sublayer = f"decoder.layers.{asked.cell(asked.model_answer)[0]}.self_attn"
    assert class_questions.named_head(ckpt.card) == (sublayer_layer(named[0]), named[1])
    assert named == explore == ablation == (asked_sublayer, asked.cell(asked.model_answer)[1])
    assert np.isclose(
        asked.values[asked.model_answer],
        sentence_scores(analysis.sublayers[named[0]].weights, analysis.target_ids)[named[1]],
    )


def test_the_class_question_reads_the_named_head_off_the_card(ckpt) -> None:
    sublayer, head = induction_named(ckpt.card)
    assert class_questions.named_head(ckpt.card) == (sublayer_layer(sublayer), head)
    assert (
        class_questions.named_head({"defaults": {"head": {"block": sublayer, "head": 1, "what": "alignment"}}}) is None
    )
    assert class_questions.named_head({}) is None


def test_the_class_panels_head_question_answers_the_cards_head(ckpt) -> None:
    """The teacher's Ask (ui/class_session.py) passes the card to the head question: its answer is the Lesson's head."""
    from ui import class_session
    from views.lesson_steps.induction import CLASS_SENTENCE

    named = induction_named(ckpt.card)
    asked = class_session._question(atlas.analyze(ckpt, CLASS_SENTENCE), "head", "", ckpt.card)
    layer, head = asked.cell(asked.model_answer)
    assert (f"decoder.layers.{layer}.self_attn", head) == named
