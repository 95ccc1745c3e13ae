"""The Lesson asks a student working alone (views/lesson_steps/quiz.py): a step with a question asks it before its
figure, which shows once they answer or skip; the last step counts how many they got right; on the projector the
steps draw their figures at once (the class is asked there). On the shipped lm-english, whose Lesson names its
induction head as Explore, Head ablation and the class's question do."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import atlas
from analysis.lesson import induction_named
from course.lesson import SENTENCES, SLUGS
from inference import catalog
from inference.checkpoint import load_checkpoint
from model.names import sublayer_layer
from ui.markdown import literal

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
PAGE = "views/lesson.py"


@pytest.fixture
def lesson(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(ROOT / "checkpoints"))
    monkeypatch.setenv("ATLAS_PRETRAINED", "0")

    def make(slug: str, **query: str) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=180)
        at.query_params.update({"model": "lm-english", "lesson": slug, **query})
        at.run()
        return ok(at.switch_page(PAGE).run())

    return make


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def figures(at: AppTest) -> int:
    return len(at.get("plotly_chart")) + len(at.dataframe)


def question(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Predict first:**"))


def go_to(at: AppTest, slug: str) -> AppTest:
    at.selectbox(key="lesson_jump").set_value(slug).run()
    return ok(at)


def test_a_step_asks_before_its_figure_and_shows_it_once_answered(lesson) -> None:
    at = lesson("next-token")
    assert "Which word will the model write after" in question(at)
    assert figures(at) == 0  # the table of guesses answers it: hidden
    pick = at.radio(key="lesson_quiz_pick_next-token")
    assert pick.options and not any("▁" in o or "<s>" in o for o in pick.options)  # words, as a person reads them
    assert any("figure shows once you answer" in c.value for c in at.caption)
    at.button(key="lesson_quiz_answer_next-token").click().run()  # nothing picked yet
    assert any("Pick one of the choices first" in w.value for w in ok(at).warning) and figures(at) == 0


def test_the_right_answer_is_said_and_the_end_counts_it(lesson) -> None:
    from analysis import class_questions
    from views.lesson_steps.quiz import next_word

    at = lesson("next-token")
    pick = at.radio(key="lesson_quiz_pick_next-token")
    labels = list(pick.options)  # AppTest holds a radio's options as shown
    ckpt = load_checkpoint(ROOT / "checkpoints" / "lm-english")

    asked = next_word(atlas.analyze(ckpt, SENTENCES["lm"]))
    assert isinstance(asked, class_questions.Asked) and labels == list(asked.choices)
    pick.set_value(asked.model_answer).run()
    ok(at).button(key="lesson_quiz_answer_next-token").click().run()
    said = literal(f"Right: you picked {asked.choices[asked.model_answer]}, as the model does.")
    assert any(s.value.endswith(said) for s in at.success)
    assert figures(ok(at)) >= 1  # the figure is back
    go_to(at, "multi-head")
    at.button(key="lesson_quiz_skip_multi-head").click().run()
    assert any("You did not answer" in i.value for i in ok(at).info) and figures(at) >= 1
    go_to(at, SLUGS[-1])
    counted = f"**{literal('Your predictions: 1 of 1 right')}**{literal(' (1 shown without answering)')}"
    assert any(m.value == counted for m in at.markdown)


def test_the_induction_step_asks_for_the_head_the_lesson_then_names(lesson) -> None:
    ckpt = load_checkpoint(ROOT / "checkpoints" / "lm-english")
    sublayer, head = induction_named(ckpt.card)
    assert catalog.default_head(ckpt.card, "head") == catalog.default_head(ckpt.card, "ablation") == (sublayer, head)
    at = lesson("induction-heads")
    assert question(at) == "**Predict first:** Which head is the induction head?" and figures(at) == 0
    at.selectbox(key="lesson_quiz_layer_induction-heads").set_value(0)
    at.selectbox(key="lesson_quiz_head_induction-heads").set_value(0).run()
    ok(at).button(key="lesson_quiz_answer_induction-heads").click().run()
    label = f"layer {sublayer_layer(sublayer) + 1} head {head + 1}"
    said = literal(f"Not this time: you picked layer 1 head 1, the model {label}.")
    assert any(i.value.endswith(said) for i in ok(at).info)
    named = f"**The induction head of lm-english: layer {sublayer_layer(sublayer) + 1}, head {head + 1}**"
    assert any(m.value.startswith(named) for m in at.markdown) and figures(at) >= 3
    assert any("attention sink" in c.value for c in at.caption)  # the probe's head rests on <s> on prose


def test_the_projector_draws_the_figure_at_once(lesson) -> None:
    at = lesson("next-token", projector="1")
    assert not [m for m in at.markdown if m.value.startswith("**Predict first:**")] and figures(at) >= 1
    assert at.toggle(key="lesson_predict").value is False
