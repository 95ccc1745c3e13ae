"""The questions a class answers (analysis/class_questions.py), asked of the shipped induction model: each offers
choices counted from 1 and the model's own answer among them, and a question this model or text cannot answer is
refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

import atlas
from analysis import class_questions
from analysis.class_questions import QuestionError

REPEATED = "freedom election movies garden river freedom election movies garden river"


@pytest.fixture(scope="module")
def analysis():
    return atlas.analyze(atlas.load("induction"), REPEATED)


def test_where_a_query_attends_most_is_the_heaviest_key_it_may_read(analysis) -> None:
    block = analysis.block("decoder.self_attn", 1)
    query = len(block.query_pieces) - 1
    asked = class_questions.attend(analysis, "decoder.self_attn", 1, 2, query)
    assert len(asked.choices) == query + 1 and asked.choices[0].startswith("1:")  # causal: keys up to the query
    assert asked.model_answer == int(np.argmax(block.weights[2, query]))
    assert "Layer 2, head 3" in asked.prompt
    with pytest.raises(QuestionError, match="one key only"):
        class_questions.attend(analysis, "decoder.self_attn", 1, 2, 0)


def test_the_induction_head_is_the_one_the_detector_scores_highest(analysis) -> None:
    asked = class_questions.induction_head(analysis)
    table = atlas.detect_heads(atlas.load("induction"), [REPEATED], "induction")
    best = table.iloc[0]
    assert asked.choices[asked.model_answer] == f"layer {best['layer']} head {best['head']}"


def test_the_next_token_offers_the_models_top_guesses_in_alphabetical_order(analysis) -> None:
    position = len(analysis.predictions) - 1
    asked = class_questions.next_token(analysis, position)
    top = analysis.predictions[position]
    assert asked.choices == tuple(sorted(p.piece for p in top[: class_questions.NEXT_CHOICES]))
    assert asked.choices[asked.model_answer] == top[0].piece
    with pytest.raises(QuestionError, match="not one of"):
        class_questions.next_token(analysis, position + 1)


def test_the_reveal_draws_the_class_beside_the_model_and_escapes_tokens() -> None:
    from viz.classroom import answers_figure

    fig = answers_figure("Which?", ("1:<b>", "2:cat", "3:mat"), [1, 2, 0], 2)
    bar = fig.data[0]
    assert list(bar.x) == [1, 2, 0]
    assert fig.layout.yaxis.ticktext == ("1:&lt;b&gt;", "2:cat", "3:mat  ◀ the model")
    assert bar.marker.color[2] != bar.marker.color[0] == bar.marker.color[1]
    with pytest.raises(ValueError, match="do not fit"):
        answers_figure("Which?", ("a", "b"), [1], 0)
