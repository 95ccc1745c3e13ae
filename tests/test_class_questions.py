"""The questions a class answers (analysis/class_questions.py): choices are words as a person reads them, each
mapping back to the positions it covers; a question is offered only where the model's answer stands out by a
named margin, and refused in one line otherwise; `<s>` is never a choice; the head question is a layer × head
grid with each head's score."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import atlas
from analysis import class_questions
from analysis.class_questions import ATTEND_MARGIN, HEAD_AT, NEXT_AT, QuestionError, words

REPEATED = "freedom election movies garden river freedom election movies garden river"
SUBLAYER = "decoder.layers.1.self_attn"


@pytest.fixture(scope="module")
def analysis():
    return atlas.analyze(atlas.load("induction"), REPEATED)


@pytest.fixture(scope="module")
def english():
    return atlas.load("lm-english")


def with_row(analysis, head: int, query: int, row: np.ndarray):
    """The analysis with one query's weights of `head` in layer 2 replaced by `row`."""
    sublayer = analysis.sublayers[SUBLAYER]
    weights = sublayer.weights.copy()
    weights[head, query] = 0.0
    weights[head, query, : len(row)] = row
    return replace(analysis, sublayers={**analysis.sublayers, SUBLAYER: replace(sublayer, weights=weights)})


def test_a_words_pieces_are_joined_without_the_tokenizers_marks() -> None:
    found = words(["<s>", "▁Anna", "▁Pav", "lo", "va", "▁met", "▁", "<0xE2>", "<0x82>", "<0xAC>"])
    assert [(w.text, w.positions) for w in found] == [
        ("<s>", (0,)),
        ("Anna", (1,)),
        ("Pavlova", (2, 3, 4)),
        ("met", (5,)),
        ("€", (6, 7, 8, 9)),
    ]


def test_a_model_of_letters_keeps_each_piece_a_word() -> None:
    assert [w.text for w in words(["<s>", "p", "i", "n", "e"])] == ["<s>", "p", "i", "n", "e"]


def test_english_choices_are_whole_words_and_the_answer_sums_its_pieces_weights(english) -> None:
    analysis = atlas.analyze(english, "Anna Pavlova met Boris Godunov. Anna Pavlova met Boris")
    sublayer = analysis.sublayer("decoder.self_attn", 1)
    query = len(sublayer.query_pieces) - 1
    asked = class_questions.attend(analysis, "decoder.self_attn", 1, 1, query)
    assert "Pavlova (word 2)" in asked.choices and "Godunov." in asked.choices
    assert not any("▁" in c or "<" in c for c in asked.choices)  # no marks, no <s>, no byte pieces
    assert "<s>" in asked.note
    for positions, value in zip(asked.positions, asked.values, strict=True):
        assert value == pytest.approx(float(sublayer.weights[1, query, list(positions)].sum()), abs=1e-6)
    assert asked.model_answer == int(np.argmax(asked.values))
    assert asked.prompt == "Layer 2, head 2: which word will “Boris” attend to most?"


def test_where_the_heaviest_word_just_stands_out_the_question_is_asked(analysis) -> None:
    query = len(analysis.target_pieces) - 1
    row = np.zeros(query + 1, dtype=np.float32)
    row[3], row[5] = 0.75, 0.75 / ATTEND_MARGIN  # exactly the margin (0.75 and 0.5: exact in float32)
    asked = class_questions.attend(with_row(analysis, 2, query, row), "decoder.self_attn", 1, 2, query)
    assert asked.model_answer == 2  # words 1, 2, 3: positions 1, 2, 3 (each word one piece here)


def test_where_no_word_stands_out_the_question_is_refused_in_one_line(analysis) -> None:
    query = len(analysis.target_pieces) - 1
    row = np.zeros(query + 1, dtype=np.float32)
    row[3], row[5] = 0.75, 0.75 / ATTEND_MARGIN + 0.01  # one step inside the margin
    with pytest.raises(QuestionError, match=r"no word stands out .*1\.5×") as refused:
        class_questions.attend(with_row(analysis, 2, query, row), "decoder.self_attn", 1, 2, query)
    assert "\n" not in str(refused.value)


def test_a_head_resting_on_the_start_token_is_not_asked_about(analysis) -> None:
    query = len(analysis.target_pieces) - 1
    row = np.zeros(query + 1, dtype=np.float32)
    row[0], row[3] = 0.8, 0.2  # <s> holds most: the attention sink
    with pytest.raises(QuestionError, match="attention sink"):
        class_questions.attend(with_row(analysis, 2, query, row), "decoder.self_attn", 1, 2, query)


def test_the_first_query_may_attend_to_too_few_words(analysis) -> None:
    with pytest.raises(QuestionError, match="fewer than two words"):
        class_questions.attend(analysis, "decoder.self_attn", 1, 2, 0)


def test_the_head_question_is_a_grid_with_each_heads_score(analysis) -> None:
    asked = class_questions.induction_head(analysis, named=(1, 1))
    assert (asked.n_layers, asked.n_heads) == (2, 4) and len(asked.choices) == len(asked.values) == 8
    assert asked.cell(asked.model_answer) == (1, 1) and asked.choice_at(1, 1) == asked.model_answer
    assert asked.choices[asked.model_answer] == "layer 2 head 2"
    assert len(asked.grid()) == 2 and asked.grid()[1][1] == asked.values[asked.model_answer] >= HEAD_AT
    with pytest.raises(ValueError, match="not a head"):
        asked.choice_at(2, 0)


def test_the_head_question_needs_a_text_with_a_repeat() -> None:
    plain = atlas.analyze(atlas.load("induction"), "freedom election movies garden river")
    with pytest.raises(QuestionError, match="repeats no phrase"):
        class_questions.induction_head(plain, named=(1, 1))


def test_the_head_question_is_refused_where_the_named_head_does_not_copy(analysis) -> None:
    with pytest.raises(QuestionError, match="under 0.4"):
        class_questions.induction_head(analysis, named=(0, 0))


def test_the_next_word_offers_readable_guesses_where_the_first_is_sure(english) -> None:
    analysis = atlas.analyze(english, "The old man went to the river and the old man went")
    asked = class_questions.next_token(analysis, 10)  # after the second "old"
    assert asked.choices[asked.model_answer] == "man" and asked.values[asked.model_answer] >= NEXT_AT
    assert list(asked.choices) == sorted(asked.choices, key=str.lower)
    assert not any("▁" in c for c in asked.choices)
    assert asked.prompt == "Which word will the model write after “old”?"


def test_the_next_word_is_refused_where_the_model_is_unsure(english) -> None:
    analysis = atlas.analyze(english, "The old man went to the river and the old man went")
    with pytest.raises(QuestionError, match="not sure"):
        class_questions.next_token(analysis, 1)  # after "The": anything may follow
    with pytest.raises(QuestionError, match="not one of"):
        class_questions.next_token(analysis, len(analysis.predictions))


def test_the_reveal_draws_the_class_beside_the_model_and_escapes_tokens() -> None:
    from viz.classroom import answers_figure

    fig = answers_figure("Which?", ("1:<b>", "2:cat", "3:mat"), [1, 2, 0], 2)
    bar = fig.data[0]
    assert list(bar.x) == [1, 2, 0]
    assert fig.layout.yaxis.ticktext == ("1:&lt;b&gt;", "2:cat", "3:mat  ◀ the model")
    assert bar.marker.color[2] != bar.marker.color[0] == bar.marker.color[1]
    with pytest.raises(ValueError, match="do not fit"):
        answers_figure("Which?", ("a", "b"), [1], 0)
