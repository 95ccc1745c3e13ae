"""A live class in AppTest: the teacher starts it from the sidebar and gets teach= in the address, a student's page
follows the teacher's layer, head and text, detaches and follows again, a wrong key moves nothing, and a question
goes from ask to answer to reveal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from test_app import APP, LM, ok

from live.rules import View
from live.store import MemoryStore
from ui import class_session, streamlit_private
from ui.class_session import ROOM

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def start(good_dir: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))
    monkeypatch.setattr(ROOM, "_store", MemoryStore())  # this test's classes: every AppTest is the loopback's

    def make(**query: str) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params.update({"model": LM, **query})
        return ok(at.run())

    return make


def button(at: AppTest, key: str):
    return next(b for b in at.button if b.key == key)


def teacher_and_student(start) -> tuple[AppTest, AppTest, str]:
    teacher = start()
    ok(button(teacher, "class_start").click().run())
    code = teacher.query_params["class"]
    assert teacher.query_params["teach"] and ROOM.is_teacher(code, teacher.query_params["teach"])
    student = start(**{"class": code})
    return teacher, student, code


def test_the_teacher_gets_a_key_in_the_address_and_the_link_large_with_a_qr_code(start) -> None:
    teacher, student, code = teacher_and_student(start)
    assert any(c.value.endswith(f"/?class={code}") for c in teacher.code)
    assert any("data:image/svg+xml" in h.proto.body and "QR code" in h.proto.body for h in teacher.get("html"))
    assert "teach" not in student.query_params and "Class " + code in student.markdown[0].value.replace("*", "")


def test_a_student_follows_the_teachers_head_and_text_and_detaches(start) -> None:
    teacher, student, code = teacher_and_student(start)
    teacher.selectbox(key="layer").select(1).run()
    teacher.selectbox(key="head").select(2).run()
    teacher.sidebar.text_area(key="text").input("A new sentence for the class.").run()
    ok(teacher)
    ok(student.run())  # what the server's rerun does
    assert student.selectbox(key="layer").value == 1 and student.selectbox(key="head").value == 2
    assert student.sidebar.text_area(key="text").value == "A new sentence for the class."
    ok(button(student, "class_detach").click().run())
    teacher.selectbox(key="head").select(0).run()
    ok(student.run())
    assert student.selectbox(key="head").value == 2  # on its own
    ok(button(student, "class_follow").click().run())
    assert student.selectbox(key="head").value == 0


def test_a_change_made_while_a_followers_page_draws_is_followed_next(start, monkeypatch) -> None:
    """The teacher moves after the follower's run took the view and before its panel is drawn: the page must count
    itself behind, so that the server reruns it (live/push.py), not mark the new version seen and keep the old
    view for good."""
    asked: list = []
    monkeypatch.setattr(
        streamlit_private, "rerun_session", lambda session, rerun, whole=False: asked.append(rerun) or True
    )
    teacher, student, code = teacher_and_student(start)
    key = teacher.query_params["teach"]
    taken = class_session.follow
    moved = "Moved while the page drew."

    def follow_then_the_teacher_moves(page: str) -> None:
        taken(page)
        _, view = ROOM.view(code)
        if dict(view.values).get("text") != moved:  # once
            ROOM.show(code, key, View.of(view.page, {**dict(view.values), "text": moved}))

    monkeypatch.setattr(class_session, "follow", follow_then_the_teacher_moves)
    teacher.sidebar.text_area(key="text").input("A new sentence for the class.").run()
    ok(student.run())
    assert student.session_state[class_session.SEEN] < ROOM.version(code)  # drawn at the view it took: behind
    class_session.FOLLOWERS.tick()
    assert any(not rerun.fragment_id for rerun in asked)  # the server asks the student's page to run again
    ok(student.run())
    assert student.sidebar.text_area(key="text").value == moved
    assert student.session_state[class_session.SEEN] == ROOM.version(code)


def test_the_server_reruns_a_follower_when_the_class_moves_and_the_teachers_count_on_an_answer(
    start, monkeypatch, any_answer
) -> None:
    asked: list = []
    monkeypatch.setattr(
        streamlit_private, "rerun_session", lambda session, rerun, whole=False: asked.append(rerun) or True
    )
    teacher, student, code = teacher_and_student(start)
    class_session.FOLLOWERS.tick()
    asked.clear()
    assert class_session.FOLLOWERS.tick() == 0  # nothing moved: nobody rerun
    teacher.selectbox(key="head").select(2).run()
    class_session.FOLLOWERS.tick()
    [page] = [r for r in asked if not r.fragment_id]  # the student's whole page, on the page it shows
    assert page.page_script_hash and "class=" in page.query_string
    ok(student.run())
    assert student.selectbox(key="head").value == 2
    ok(button(teacher, "class_ask").click().run())
    ok(student.run())
    asked.clear()
    student.radio(key="class_pick_1").set_value(0)
    ok(button(student, "class_answer_1").click().run())
    class_session.FOLLOWERS.tick()
    assert [r for r in asked if r.fragment_id]  # the teacher's count of answers: its fragment alone


def test_a_wrong_teacher_key_is_refused_in_one_line_and_moves_nothing(start) -> None:
    teacher, _, code = teacher_and_student(start)
    before = ROOM.view(code)
    intruder = start(**{"class": code, "teach": "guessed-key"})
    [warning] = [w.value for w in intruder.warning if "teacher key" in w.value]
    assert "\n" not in warning
    ok(intruder.selectbox(key="head").select(3).run())
    assert ROOM.view(code) == before and "teach" not in intruder.query_params


def test_a_question_is_answered_then_revealed_to_each_student(start, any_answer) -> None:
    teacher, student, code = teacher_and_student(start)
    other = start(**{"class": code})
    ok(button(teacher, "class_ask").click().run())
    question = ROOM.question(code)
    assert question is not None and question.kind == "attend"
    for who, choice in ((student, question.model_answer), (other, (question.model_answer + 1) % 2)):
        ok(who.run())
        who.radio(key=f"class_pick_{question.number}").set_value(choice)
        ok(button(who, f"class_answer_{question.number}").click().run())
        assert any("Your answer" in i.value for i in who.info)
    assert sum(ROOM.counts(code, question.number)) == 2
    teacher.run()
    ok(button(teacher, "class_reveal").click().run())
    ok(teacher.run())
    assert f"class_answers_{question.number}" in {c.key for c in teacher.get("plotly_chart")}
    ok(student.run())
    ok(other.run())
    assert any(s.value.startswith("Right") for s in student.success)
    assert any(i.value.startswith("Not this time") for i in other.info)


def test_the_followed_lesson_keys_are_the_ones_the_lesson_declares() -> None:
    declared = set(re.findall(r'state\.url_key\("(\w+)"', (ROOT / "views" / "lesson.py").read_text()))
    assert {"lesson", "lesson_source"} <= declared and {"lesson", "lesson_source"} <= set(class_session.FOLLOWED)


def test_a_student_follows_the_teacher_to_the_lesson_and_its_step(start, monkeypatch) -> None:
    teacher, student, code = teacher_and_student(start)
    ok(teacher.switch_page("views/lesson.py").run())
    ok(button(teacher, "lesson_next_top").click().run())
    step = teacher.session_state["lesson"]
    switches = []
    switch_page = st.switch_page

    def recorded(page, **kwargs):
        switches.append((page, kwargs.get("query_params")))
        switch_page(page, **kwargs)

    monkeypatch.setattr(st, "switch_page", recorded)
    ok(student.run())
    assert student.session_state["lesson"] == step
    # The switch carries the view's parameters: a browser that writes the new page's path with the query it holds
    # then does not end on a bare /lesson (seen once under load in tests/test_browser_class.py).
    (page, query), *_ = switches
    assert page.endswith("lesson.py") and query["lesson"] == teacher.query_params["lesson"], switches
    assert query["class"] == code and "teach" not in query
    shown = [h.value for h in (*student.title, *student.header)]
    assert any(h.startswith("2. ") for h in shown), shown  # the page is the Lesson, at its second step


def test_the_teachers_and_a_followers_page_runs_go_first_and_a_detached_students_do_not(start, monkeypatch) -> None:
    """app.py marks a class's teacher's and follower's page runs for the worker (analysis.worker: no heavy chunk
    starts beside them); a student exploring on their own, or a page in no class, is an ordinary page."""
    from analysis import lanes

    marked: list[bool] = []
    running = lanes.PAGES.running
    monkeypatch.setattr(lanes.PAGES, "running", lambda owner, first=False: marked.append(first) or running(owner))
    start()  # a page in no class
    assert marked == [False]
    teacher, student, code = teacher_and_student(start)
    marked.clear()
    ok(teacher.run())
    ok(student.run())
    assert marked == [True, True]
    ok(button(student, "class_detach").click().run())
    marked.clear()
    ok(student.run())
    assert marked == [False]


def test_a_followers_whole_run_is_the_classs_page_its_sidebar_too(start, monkeypatch) -> None:
    """Heavy work waits while a class's page is drawn (analysis.lanes): a follower's sidebar draws inside that
    mark, so no heavy chunk is let go while it draws; a student outside any class marks nothing."""
    from analysis import lanes
    from ui import sidebar

    seen, original = [], sidebar.sidebar

    def recording(*args, **kwargs):
        seen.append(streamlit_private.session_id() in lanes.PAGES.first())
        return original(*args, **kwargs)

    monkeypatch.setattr(sidebar, "sidebar", recording)
    _, student, _ = teacher_and_student(start)
    seen.clear()
    ok(student.run())
    assert seen == [True]
    seen.clear()
    start()  # a student on their own
    assert seen == [False]
