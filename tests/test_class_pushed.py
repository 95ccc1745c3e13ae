"""A class's view pushed to its followers (ui/class_pushed.py) in AppTest: the teacher's page publishes the charts it
drew once per version, with the view's page and text; nothing of them while a question is open, even with the
teacher's peek; a follower's page holds the component that draws a later pushed view, a detached one none."""

from __future__ import annotations

import json

from test_app import ok
from test_class_page import button, start, teacher_and_student  # noqa: F401 (start: the fixture)

from ui import class_stream
from ui.class_live import PEEK
from ui.class_session import ROOM

TEXT = "A new sentence for the class."


def pushed(code: str) -> dict:
    version, data = class_stream.CHANNEL.latest(code)
    assert data.startswith(b"data: ") and data.endswith(b"\n\n") and data.count(b"\n") == 2
    message = json.loads(data[len(b"data: ") :])
    assert message["version"] == version
    return message


def test_the_teachers_page_publishes_the_charts_it_drew_once_per_version(start) -> None:  # noqa: F811
    teacher, _, code = teacher_and_student(start)
    teacher.sidebar.text_area(key="text").input(TEXT).run()
    ok(teacher)
    message = pushed(code)
    assert message["version"] == ROOM.version(code) and message["page"] == "" and message["text"] == TEXT
    drawn = {chart.key: json.loads(chart.proto.spec) for chart in teacher.get("plotly_chart")}
    assert message["figures"] and {key for key, _ in message["figures"]} <= set(drawn)
    for key, spec in message["figures"]:  # the very figures the teacher's page drew, not others
        assert spec["data"][0]["type"] == drawn[key]["data"][0]["type"]
        assert spec["layout"].get("title") == drawn[key]["layout"].get("title")
    heads = dict(message["figures"])
    pieces = [label.split(":", 1)[1] for label in heads["head_chart"]["data"][0]["x"][1:]]  # after <s>
    assert "".join(pieces).replace("▁", " ").strip() == TEXT  # the head's chart is the new text's
    before = class_stream.CHANNEL.latest(code)
    ok(teacher.run())  # the same view again: nothing new published
    assert class_stream.CHANNEL.latest(code) == before
    teacher.selectbox(key="head").select(2).run()
    assert pushed(code)["version"] == before[0] + 1


def test_no_figure_is_pushed_while_a_question_is_open_even_with_the_teachers_peek(start, any_answer) -> None:  # noqa: F811
    teacher, _, code = teacher_and_student(start)
    ok(button(teacher, "class_ask").click().run())
    ok(teacher.run())
    teacher.toggle(key=PEEK).set_value(True).run()
    assert teacher.get("plotly_chart")  # the teacher peeks
    teacher.sidebar.text_area(key="text").input(TEXT).run()
    ok(teacher)
    message = pushed(code)
    assert message["text"] == TEXT and message["figures"] == []


def components(at) -> list:
    return [e for e in at.main if getattr(e, "type", "") == "component_instance" or "class_pushed" in str(e.proto)]


def test_a_followers_page_holds_the_pushed_views_component_and_a_detached_one_none(start) -> None:  # noqa: F811
    teacher, student, code = teacher_and_student(start)
    [component] = components(student)
    args = json.loads(component.proto.json_args)
    assert {k: args[k] for k in ("code", "page", "drawn")} == {"code": code, "page": "", "drawn": ROOM.version(code)}
    ok(button(student, "class_detach").click().run())
    assert components(student) == []
    assert components(teacher) == []
