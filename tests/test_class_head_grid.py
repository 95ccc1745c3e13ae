"""The head question as a grid: the class picks a head with one tap on a layer × head grid, the question keeps its
shape and each head's score through either store, and the reveal draws the grid with the model's head marked."""

from __future__ import annotations

import json

import fakeredis
import pytest
from test_app import chart, ok
from test_class_page import button, start, teacher_and_student  # noqa: F401  (start: the page's fixture)

from live import rules as classroom
from live.rules import ClassError, Classroom
from ui.class_session import ROOM
from viz.classroom import GRID_MAX_PX, head_grid_figure
from viz.style import cell_numbers_width, for_projector

PROJECTED_CHART_PX = 1024 - 2 * 2 * 22  # a chart's width at 1024 px in projector mode (2rem each side, 22 px type)

SHAPE = (3, 4)
CHOICES = tuple(f"layer {r + 1} head {h + 1}" for r in range(3) for h in range(4))
SCORES = tuple(i / 20 for i in range(12))


def test_the_grid_counts_each_head_and_marks_the_models_from_1() -> None:
    counts = [0] * 12
    counts[6] = 3  # layer 2, head 3
    fig = head_grid_figure((3, 4), counts, SCORES, 6, "Which head?")
    picks, scores = fig.data
    assert [len(row) for row in picks.z] == [4, 4, 4] and picks.z[1][2] == 3 and scores.z[2][3] == SCORES[11]
    assert list(picks.x) == [1, 2, 3, 4] and list(picks.y) == ["layer 1", "layer 2", "layer 3"]
    assert picks.text[1][2] == "★3" and sum("★" in t for row in picks.text for t in row) == 1
    assert picks.text[0][0] == "" and scores.text[1][2] == "★"  # no one picked it; a score reads as its shade
    assert fig.layout.annotations[1].text == f"score (★ {SCORES[6]:.2f})"
    assert (
        all((s.x0, s.x1, s.y0, s.y1) == (2.5, 3.5, 0.5, 1.5) for s in fig.layout.shapes) and len(fig.layout.shapes) == 2
    )
    assert fig.layout.height <= GRID_MAX_PX


def test_the_counts_of_lm_englishs_grid_print_on_a_projector() -> None:
    counts = [12] * 48  # two digits in every cell, and the star
    fig = head_grid_figure((6, 8), counts, tuple(i / 48 for i in range(48)), 13, "Which head is the induction head?")
    assert 0 < cell_numbers_width(fig) <= PROJECTED_CHART_PX
    assert 0 < cell_numbers_width(for_projector(fig)) <= PROJECTED_CHART_PX
    assert all(len(a.text) <= 20 for a in fig.layout.annotations)  # the two sides' titles apart on a phone


def test_the_grid_of_the_largest_question_stays_within_a_first_view() -> None:
    fig = head_grid_figure((8, 8), [1] * 64, (), 63, "Which head?")
    assert len(fig.data) == 1 and fig.layout.height <= GRID_MAX_PX


def test_counts_that_do_not_fit_the_grid_are_refused() -> None:
    with pytest.raises(ValueError):
        head_grid_figure((3, 4), [0] * 11, SCORES, 0, "Which head?")


@pytest.mark.parametrize("store", ["memory", "fakeredis"])
def test_a_head_questions_shape_and_scores_survive_the_store(store: str) -> None:
    room = Classroom() if store == "memory" else Classroom.on_redis("redis://fake", fakeredis.FakeRedis())
    code, key = room.start()
    room.ask(code, key, "head", "Which head?", CHOICES, 6, SHAPE, SCORES)
    asked = room.question(code)
    assert asked is not None and asked.shape == SHAPE and asked.scores == SCORES
    room.ask(code, key, "next", "Next?", ("a", "b"), 0)
    assert room.question(code).shape is None and room.question(code).scores == ()


def test_a_head_question_survives_the_json_round_trip_and_an_old_record_still_loads() -> None:
    room = Classroom()
    code, key = room.start()
    room.ask(code, key, "head", "Which head?", CHOICES, 6, SHAPE, SCORES)
    found = room._store.read(code, lambda found: found)
    again = classroom._loads(classroom._dumps(found))
    assert again.questions[1].shape == SHAPE and again.questions[1].scores == SCORES
    raw = json.loads(classroom._dumps(found))
    for name in ("shape", "scores"):
        del raw["questions"]["1"][name]
    assert classroom._loads(json.dumps(raw)).questions[1].shape is None


@pytest.mark.parametrize("shape", [[3, 5], [3], [3, "4"], [12, 1.0], 12, [0, 12]])
def test_a_damaged_shape_is_refused(shape: object) -> None:
    room = Classroom()
    code, key = room.start()
    room.ask(code, key, "head", "Which head?", CHOICES, 6, SHAPE, SCORES)
    raw = json.loads(classroom._dumps(room._store.read(code, lambda found: found)))
    raw["questions"]["1"]["shape"] = shape
    with pytest.raises(TypeError):
        classroom._loads(json.dumps(raw))


def test_a_grid_that_does_not_cover_the_choices_is_not_asked() -> None:
    room = Classroom()
    code, key = room.start()
    with pytest.raises(ClassError):
        room.ask(code, key, "head", "Which head?", CHOICES, 6, (4, 4), SCORES)
    with pytest.raises(ClassError):
        room.ask(code, key, "head", "Which head?", CHOICES, 6, SHAPE, SCORES[:-1])


@pytest.fixture
def any_head(monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-tiny is untrained: no head copies, so the head question's margins are set at their lowest."""
    from analysis import class_questions

    monkeypatch.setattr(class_questions, "HEAD_AT", 0.0)
    monkeypatch.setattr(class_questions, "HEAD_LEAD", float("-inf"))


def test_a_student_answers_the_head_question_on_its_grid_and_sees_the_grid_revealed(start, any_head) -> None:  # noqa: F811
    teacher, student, code = teacher_and_student(start)
    teacher.sidebar.text_area(key="text").input("the old man went home and the old man went home").run()
    teacher.radio(key="class_kind").set_value("head").run()
    ok(button(teacher, "class_ask").click().run())
    question = ROOM.question(code)
    assert question is not None and question.kind == "head" and question.shape is not None
    n_layers, n_heads = question.shape
    ok(student.run())
    rows = [p for p in student.pills if p.key.startswith(f"class_pick_{question.number}_layer_")]
    assert len(rows) == n_layers and f"class_pick_{question.number}" not in {r.key for r in student.radio}
    layer, head = divmod(question.model_answer, n_heads)
    rows[(layer + 1) % n_layers].set_value(0).run()  # a first tap elsewhere
    student.pills(key=f"class_pick_{question.number}_layer_{layer}").set_value(head).run()
    picked = [student.pills(key=f"class_pick_{question.number}_layer_{r}").value for r in range(n_layers)]
    assert picked == [head if r == layer else None for r in range(n_layers)]  # the first tap's row cleared
    ok(button(student, f"class_answer_{question.number}").click().run())
    assert ROOM.counts(code, question.number)[question.model_answer] == 1 == sum(ROOM.counts(code, question.number))
    ok(button(teacher.run(), "class_reveal").click().run())
    ok(student.run())
    assert any(s.value.startswith("Right") for s in student.success)
    figure = chart(student, f"class_answers_{question.number}")
    assert [d["type"] for d in figure["data"]] == ["heatmap", "heatmap"] and len(figure["layout"]["shapes"]) == 2
