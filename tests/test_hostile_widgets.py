"""Hostile widget values: what a client may send for a widget over the websocket, forged here as the WidgetState
protos a browser sends (AppTest hands them to the server's session state as the websocket does).

A class's Answer: a radio value that is not one of the choices ("1.5", "NaN", "", a 5,000-digit number, 1 MB of
text) gets the page's own line and counts nothing; a value Streamlit's radio decoder fails on (a JSON object or
list, or a boolean it cannot write back) is dropped by ui/streamlit_private.py, so the pick is the one the page had; a
JSON number or true is decoded as itself and checked by the Answer. Any other widget: the same drop, no traceback.
"""

from __future__ import annotations

import pytest
import streamlit as st
import test_class_page
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1.element_tree import NumberInput, Radio, Selectbox
from test_app import ok
from test_class_page import button, teacher_and_student

from live.rules import MAX_CHOICES
from live.store import MemoryStore
from ui import class_session
from ui.class_session import ROOM

start = test_class_page.start  # the fixture: the app's page on tiny checkpoints, with query parameters
NOT_A_CHOICE = {
    "a_fraction": "1.5",
    "nan": "NaN",
    "empty": "",
    "a_5000_digit_number": "9" * 5000,
    "a_megabyte_of_text": "x" * 2**20,
}
# Streamlit's radio fails on these: a decoder's unhashable key, or a value it cannot write back in the kind sent
DROPPED = {
    "a_json_object": ("json_value", '{"a": [1]}'),
    "a_json_list": ("json_value", "[1]"),
    "an_int": ("int_value", 1),
    "a_bool": ("bool_value", True),
}
# Decoded as themselves: a number is the choice of that index, as the string of that choice would be; true is none.
DECODED = {
    "a_json_number": ("json_value", "1", ""),
    "a_json_true": ("json_value", "true", "That answer is not one of the choices."),
}

pytestmark = pytest.mark.usefixtures("any_answer")  # lm-tiny: asked with the margins at their lowest


def forge(monkeypatch: pytest.MonkeyPatch, element: type, key: str, field: str, value) -> None:
    """From now on the client sends `value` in `field` for the widget `key`, whatever the page shows."""
    real = element._widget_state.fget

    def forged(self) -> WidgetState:
        state = real(self)
        if self.key != key:
            return state
        state = WidgetState(id=state.id)
        setattr(state, field, value)
        return state

    monkeypatch.setattr(element, "_widget_state", property(forged))


def asked(start):
    teacher, student, code = teacher_and_student(start)
    ok(button(teacher, "class_ask").click().run())
    return student, code


def no_traceback(at) -> None:
    assert not at.exception, [e.value[:200] for e in at.exception]
    assert not [e.value for e in at.error if "Something went wrong" in e.value]


@pytest.mark.parametrize("value", NOT_A_CHOICE.values(), ids=NOT_A_CHOICE)
def test_an_answer_that_is_not_a_choice_gets_one_line_and_counts_nothing(start, monkeypatch, value: str) -> None:
    student, code = asked(start)
    ok(student.run())
    forge(monkeypatch, Radio, "class_pick_1", "string_value", value)
    button(student, "class_answer_1").click().run()
    no_traceback(student)
    assert [w.value for w in student.warning] == ["That answer is not one of the choices."]
    assert sum(ROOM.counts(code, 1)) == 0


@pytest.mark.parametrize(("field", "value"), DROPPED.values(), ids=DROPPED)
def test_an_answer_the_radio_fails_on_is_dropped_and_the_page_asks_for_a_pick(start, monkeypatch, field, value) -> None:
    student, code = asked(start)
    ok(student.run())
    forge(monkeypatch, Radio, "class_pick_1", field, value)
    button(student, "class_answer_1").click().run()
    no_traceback(student)
    assert [w.value for w in student.warning] == ["Pick one of the choices first."]
    assert sum(ROOM.counts(code, 1)) == 0


@pytest.mark.parametrize(("field", "value", "note"), DECODED.values(), ids=DECODED)
def test_an_answer_of_another_kind_is_a_choice_or_one_line(start, monkeypatch, field, value, note) -> None:
    student, code = asked(start)
    ok(student.run())
    forge(monkeypatch, Radio, "class_pick_1", field, value)
    button(student, "class_answer_1").click().run()
    no_traceback(student)
    assert [w.value for w in student.warning] == ([note] if note else [])
    assert ROOM.counts(code, 1)[1] == (0 if note else 1)


def test_a_dropped_value_leaves_the_pick_the_page_had(start, monkeypatch) -> None:
    student, code = asked(start)
    ok(student.run())
    student.radio(key="class_pick_1").set_value(1)
    ok(student.run())
    forge(monkeypatch, Radio, "class_pick_1", "json_value", '{"a": 1}')
    ok(button(student, "class_answer_1").click().run())
    assert ROOM.counts(code, 1)[1] == 1


def answered_with(monkeypatch: pytest.MonkeyPatch, choice) -> tuple[str, list[int]]:
    """Answer's callback on its own, the radio's value `choice` in the session: the page's note and the counts."""
    monkeypatch.setattr(ROOM, "_store", MemoryStore())  # this test's class alone: every start is one address's
    code, key = ROOM.start()
    ROOM.ask(code, key, "attend", "Where?", ("a", "b"), 0)
    ROOM.join(code, "a-phone", "192.0.2.1")
    monkeypatch.setattr(class_session, "device_id", lambda: "a-phone")
    session = {class_session.CLASS: code, "class_pick_1": choice, class_session.JOINED: (code, "a-phone")}
    monkeypatch.setattr(st, "session_state", session)
    class_session.answer(1)
    return session.get(class_session.NOTE, ""), ROOM.counts(code, 1)


@pytest.mark.parametrize("choice", [True, False, -1, MAX_CHOICES, 1.0, "1"])
def test_a_value_no_radio_of_the_page_gives_is_not_a_choice(monkeypatch, choice) -> None:
    """True is an int to Python; MAX_CHOICES is one past the most choices a question may offer."""
    assert answered_with(monkeypatch, choice) == ("That answer is not one of the choices.", [0, 0])


def test_a_choice_within_the_bound_is_checked_against_the_questions_own(monkeypatch) -> None:
    note, counts = answered_with(monkeypatch, MAX_CHOICES - 1)
    assert note == f"choice {MAX_CHOICES} is not one of the question's 2" and counts == [0, 0]
    assert answered_with(monkeypatch, 1) == ("", [0, 1])


def test_a_json_object_for_any_other_widget_is_dropped_too(start, monkeypatch) -> None:
    at = start()
    layer = at.selectbox(key="layer").value
    forge(monkeypatch, Selectbox, "layer", "json_value", '{"layer": [1, 2]}')
    ok(at.run())
    assert at.selectbox(key="layer").value == layer


def test_a_whole_number_box_still_takes_the_int_a_browser_sends(app, monkeypatch) -> None:
    """The box declares a float, but Streamlit's browser code sends an int for a whole-number box: no drop."""
    at = app(text="the cat sat")
    at.switch_page("views/generate.py").run()
    forge(monkeypatch, NumberInput, "gen_tokens", "int_value", 3)
    ok(at.run())
    assert at.number_input(key="gen_tokens").value == 3
