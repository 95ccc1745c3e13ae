"""A class in a real room, in AppTest: the students' link names an address their phones reach (never a loopback
one, or one line says so), a student joins by typing the code on the home page, every page holds its figures back
while a question is open (the teacher may peek), the teacher's panel folds after Ask and asks before ending the
class, a follower's own change is said, and the class's answers download as CSV."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest
from test_app import APP, LM, ok

from live import address
from live.store import MemoryStore
from ui import class_live, class_session, downloads, widgets
from ui.class_session import ROOM

pytestmark = pytest.mark.usefixtures("any_answer")  # lm-tiny: asked with the margins at their lowest


@pytest.fixture
def start(good_dir, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))
    monkeypatch.delenv(address.PUBLIC_URL, raising=False)
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
    return teacher, start(**{"class": code}), code


def charts(at: AppTest) -> set[str]:
    return {c.key for c in at.get("plotly_chart")}


def tables(at: AppTest) -> int:
    return sum('<table class="atlas-table' in h.proto.body for h in at.get("html")) + len(at.dataframe)


def held_back(at: AppTest) -> bool:
    return any("held back while question" in c.value for c in at.caption)


def test_the_link_names_the_machines_address_when_the_page_was_opened_on_localhost(start, monkeypatch) -> None:
    monkeypatch.setattr(address, "machine_address", lambda: "10.1.2.3")
    teacher, _, code = teacher_and_student(start)
    [link] = [c.value for c in teacher.code if "?class=" in c.value]
    assert link.startswith("http://10.1.2.3") and link.endswith(f"/?class={code}"), link
    assert any('class="class-code"' in h.proto.body and code in h.proto.body for h in teacher.get("html"))


def test_without_an_address_one_line_says_how_to_fix_it_and_no_loopback_link_is_shown(start, monkeypatch) -> None:
    monkeypatch.setattr(address, "machine_address", lambda: None)
    teacher, _, code = teacher_and_student(start)
    assert not [c.value for c in teacher.code if "?class=" in c.value]
    [warning] = [w.value.replace("\\", "") for w in teacher.warning if "ATLAS" in w.value]  # literal's escapes
    assert "\n" not in warning and "localhost" in warning
    assert not any("QR code" in h.proto.body for h in teacher.get("html"))


def test_the_operators_public_address_names_the_link(start, monkeypatch) -> None:
    monkeypatch.setenv(address.PUBLIC_URL, "https://atlas.example.org/")
    teacher, _, code = teacher_and_student(start)
    assert f"https://atlas.example.org/?class={code}" in [c.value for c in teacher.code]


def test_a_student_joins_by_typing_the_code_on_the_home_page(start) -> None:
    teacher, _, code = teacher_and_student(start)
    student = start()
    student.text_input(key=class_session.JOIN).input(f" {code.lower()} ")
    ok(button(student, "class_join_button").click().run())
    assert student.query_params["class"] == code and "following the teacher" in student.markdown[0].value
    other = start()
    other.text_input(key=class_session.JOIN).input("ZZZZ9")
    ok(button(other, "class_join_button").click().run())
    [refusal] = [w.value for w in other.warning]
    assert "no class ZZZZ9" in refusal and "class" not in other.query_params


def test_an_open_question_holds_every_figure_back_until_the_reveal(start) -> None:
    teacher, student, code = teacher_and_student(start)
    assert "head_chart" in charts(student) and tables(student)
    ok(button(teacher, "class_ask").click().run())
    ok(student.run())
    for page in (teacher, student):
        assert not charts(page) and not tables(page) and held_back(page)
    assert teacher.session_state[class_session.ASK_PANEL] is False  # folded after Ask
    teacher.toggle(key=class_live.PEEK).set_value(True).run()
    assert "head_chart" in charts(ok(teacher)) and not charts(ok(student.run()))  # the peek is the teacher's alone
    number = ROOM.question(code).number
    ok(button(teacher, "class_reveal").click().run())
    ok(teacher.run())
    ok(student.run())
    for page in (teacher, student):
        assert {"head_chart", f"class_answers_{number}"} <= charts(page) and tables(page) and not held_back(page)


def test_end_the_class_asks_first(start) -> None:
    teacher, _, code = teacher_and_student(start)
    assert button(teacher, "class_end").disabled
    teacher.checkbox(key=class_session.END_SURE).check().run()
    ok(button(teacher, "class_end").click().run())
    assert ROOM.version(code) is None and "class" not in teacher.query_params


def test_a_followers_own_change_is_said_and_follow_again_takes_the_teachers_view(start) -> None:
    teacher, student, code = teacher_and_student(start)
    ok(student.selectbox(key="head").select(3).run())
    ok(student.run())  # the page run after a fragment's own (the banner is above the page)
    assert "off the teacher's" in student.markdown[0].value
    ok(button(student, "class_follow").click().run())
    assert "following the teacher" in student.markdown[0].value
    assert student.selectbox(key="head").value == teacher.selectbox(key="head").value


def test_the_class_answers_download_as_csv_with_the_counts(start) -> None:
    teacher, student, code = teacher_and_student(start)
    other = start(**{"class": code})
    ok(button(teacher, "class_ask").click().run())
    question = ROOM.question(code)
    for who in (student, other):
        ok(who.run())
        who.radio(key=f"class_pick_{question.number}").set_value(question.model_answer)
        ok(button(who, f"class_answer_{question.number}").click().run())
    ok(teacher.run())
    assert {"class_answers_csv", "class_answers_json"} <= {b.key for b in teacher.get("download_button")}
    asked = teacher.session_state[class_session.ASKED]
    frame = pd.read_csv(io.StringIO(downloads.csv_text(class_live._answers_frame(code, asked))))
    picked = frame[frame["the model's answer"]]
    assert list(picked["count"]) == [2] and frame["count"].sum() == 2
    assert len(frame) == len(question.choices) and set(frame["question"]) == {question.number}
    assert frame["text"].iloc[0] and frame["asked at (UTC)"].iloc[0] and frame["layer"].iloc[0] >= 1
    assert widgets.HELD_BACK not in teacher.session_state or teacher.session_state[widgets.HELD_BACK]


def test_a_followers_pickers_fold_away_and_the_teachers_stay_open(start) -> None:
    teacher, student, code = teacher_and_student(start)
    assert any(e.label.startswith("Controls") for e in student.expander)
    assert not any(e.label.startswith("Controls") for e in teacher.expander)
    ok(button(student, "class_detach").click().run())
    assert not any(e.label.startswith("Controls") for e in student.expander)  # exploring: the pickers open
