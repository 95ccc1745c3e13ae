"""Who starts a class and one answer a device on the page (AppTest): the teacher password asked in the sidebar,
the per-address places, the device cookie across a reload, and the teacher's count of devices and the lock."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_app import APP, LM, ok

from live import rules as classroom
from live.store import MemoryStore
from ui import class_session
from ui.class_session import ROOM

pytestmark = pytest.mark.usefixtures("any_answer")  # lm-tiny: asked with the margins at their lowest


@pytest.fixture
def start(good_dir: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))
    monkeypatch.setattr(ROOM, "_store", MemoryStore())  # this test's classes only: every AppTest is the loopback
    cookie = {"value": None}
    monkeypatch.setattr(class_session, "_cookie", lambda: cookie["value"])

    def make(device: str | None = None, **query: str) -> AppTest:
        cookie["value"] = device
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params.update({"model": LM, **query})
        return ok(at.run())

    return make


def button(at: AppTest, key: str):
    return next(b for b in at.button if b.key == key)


def texts(at: AppTest) -> str:
    shown = [*at.markdown, *at.info, *at.warning, *at.error, *at.caption]
    return " ".join(str(e.value) for e in shown).replace("\\", "").replace("*", "")


def started(at: AppTest) -> AppTest:
    return ok(button(at, "class_start").click().run())


def test_one_address_starts_three_classes_and_the_fourth_is_told_why_not(start) -> None:
    for _ in range(classroom.MAX_CLASSES_PER_ADDRESS):
        assert "class" in started(start()).query_params
    fourth = started(start())
    assert "class" not in fourth.query_params
    assert "already runs 3 classes" in texts(fourth)


def test_with_a_teacher_password_a_wrong_one_is_refused_and_the_right_one_starts(start, monkeypatch) -> None:
    monkeypatch.setattr(ROOM, "_password", "correct horse")
    teacher = start()
    teacher.sidebar.text_input(key=class_session.PASSWORD).input("wrong horse")
    started(teacher)
    assert "class" not in teacher.query_params and "not the teacher password" in texts(teacher)
    teacher.sidebar.text_input(key=class_session.PASSWORD).input("correct horse")
    started(teacher)
    assert ROOM.is_teacher(teacher.query_params["class"], teacher.query_params["teach"])


def _asked(start) -> tuple[AppTest, str]:
    teacher = started(start())
    ok(button(teacher, "class_ask").click().run())
    return teacher, teacher.query_params["class"]


def test_a_reload_with_the_same_cookie_is_the_same_device_and_answers_once(start) -> None:
    teacher, code = _asked(start)
    phone = start("cookie-of-one-phone-aaaa", **{"class": code})
    number = ROOM.question(code).number
    phone.radio(key=f"class_pick_{number}").set_value(0)
    ok(button(phone, f"class_answer_{number}").click().run())
    reloaded = start("cookie-of-one-phone-aaaa", **{"class": code})  # a reload, or a new tab: a new session
    assert not [b for b in reloaded.button if b.key == f"class_answer_{number}"]
    assert "Your answer" in texts(reloaded)
    assert ROOM.devices(code) == (1, False) and sum(ROOM.counts(code, number)) == 1
    other = start("cookie-of-another-phone", **{"class": code})
    assert [b for b in other.button if b.key == f"class_answer_{number}"]


def test_the_teacher_sees_the_devices_and_locks_the_class_then_a_later_device_only_follows(start) -> None:
    teacher, code = _asked(start)
    start("cookie-of-an-early-phone", **{"class": code})
    ok(teacher.run())
    assert "1 device has joined" in texts(teacher).replace("*", "")
    ok(button(teacher, "class_lock").click().run())
    assert "locked" in texts(teacher)
    late = start("cookie-of-a-late-phone", **{"class": code})
    number = ROOM.question(code).number
    assert not [b for b in late.button if b.key == f"class_answer_{number}"]
    assert "The class is locked: this device follows the teacher but does not answer." in texts(late)
    assert ROOM.devices(code) == (1, True)
