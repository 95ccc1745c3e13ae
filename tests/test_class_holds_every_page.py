"""Every page holds its charts and tables back while a class's question is open, because every page draws them
through ui.widgets (show_chart, small_table, data_table): a static look over the pages' source finds no chart or table
drawn past those helpers, and an AppTest opens each page on the teacher's side with a question open. Every chart
gets the same config (its toolbar only on hover: it lies over the title), and a follower's Lesson opens on its
figure, its step and sentence pickers folded."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from test_app import ok
from test_class_room_page import button, charts, held_back, start, tables, teacher_and_student  # noqa: F401

from course.lesson import STEPS
from ui import widgets
from ui.class_session import ROOM
from ui.markdown import literal
from ui.pages import PAGES

pytestmark = pytest.mark.usefixtures("any_answer")  # lm-tiny: asked with the margins at their lowest
ROOT = Path(__file__).resolve().parents[1]
# What Streamlit draws as a chart or a table: a page draws them through ui.widgets' holding helpers alone.
DRAWS = {
    "altair_chart",
    "area_chart",
    "bar_chart",
    "data_editor",
    "dataframe",
    "graphviz_chart",
    "line_chart",
    "plotly_chart",
    "pydeck_chart",
    "pyplot",
    "scatter_chart",
    "table",
    "vega_lite_chart",
}
HOLDERS = ROOT / "ui" / "widgets.py"  # show_chart, small_table, data_table: each asks held_back first


def direct_draws(path: Path) -> list[str]:
    """`file:line name` of each call `where.NAME(...)` with NAME a chart or table Streamlit draws (`where`: st, a
    column, a tab, a container), not a module of our own that has a function of that name (`experiment.table`)."""
    tree = ast.parse(path.read_text(), str(path))
    modules = {
        alias.asname or alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
        if (alias.asname or alias.name) != "st"
    }
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DRAWS):
            continue
        receiver = node.func.value
        if not (isinstance(receiver, ast.Name) and receiver.id in modules):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.func.attr}")
    return found


def test_no_page_draws_a_chart_or_a_table_past_the_holding_helpers() -> None:
    sources = [ROOT / "app.py", *sorted((ROOT / "views").rglob("*.py")), *sorted((ROOT / "ui").rglob("*.py"))]
    found = [hit for path in sources if path != HOLDERS for hit in direct_draws(path)]
    assert not found, f"drawn without ui.widgets.show_chart / small_table / data_table: {found}"


def test_the_static_look_finds_a_direct_draw(tmp_path: Path) -> None:
    page = ROOT / "views" / "_probe_for_test.py"
    try:
        page.write_text("import streamlit as st\ncol = st\ncol.dataframe([1])\nst.plotly_chart({})\n")
        assert [hit.split(" ")[1] for hit in direct_draws(page)] == ["dataframe", "plotly_chart"]
    finally:
        page.unlink()


def chart_configs(at) -> list[dict]:
    return [json.loads(c.proto.config) for c in at.get("plotly_chart")]


def test_every_page_holds_its_figures_back_while_a_question_is_open(start) -> None:  # noqa: F811
    teacher, _, _ = teacher_and_student(start)
    drawn = {}
    for page in PAGES:
        ok(teacher.switch_page(page.script).run())
        drawn[page.script] = len(teacher.get("plotly_chart")) + tables(teacher)
        for config in chart_configs(teacher):  # one rule for every chart: the toolbar only on hover
            assert config["displayModeBar"] == "hover" and config["displaylogo"] is False, (page.script, config)
    assert sum(1 for n in drawn.values() if n) >= 10, drawn  # most pages draw something when no question is open
    ok(teacher.switch_page(PAGES[0].script).run())
    ok(button(teacher, "class_ask").click().run())
    for page in PAGES:
        ok(teacher.switch_page(page.script).run())
        assert not charts(teacher) and not tables(teacher), (page.script, charts(teacher), tables(teacher))
        if drawn[page.script]:
            assert held_back(teacher), page.script


def in_order(block) -> list:
    """The elements under `block`, in the order the page draws them."""
    nodes = []
    for idx in sorted(getattr(block, "children", {})):
        child = block.children[idx]
        nodes.append(child)
        nodes.extend(in_order(child))
    return nodes


def first_chart_before_words(at) -> bool:
    """Whether the Lesson step's first chart is drawn above the step's paragraph."""
    shown = in_order(at.main)
    words = next(i for i, e in enumerate(shown) if e.type == "markdown" and e.value == STEPS[0].text)
    chart = next(i for i, e in enumerate(shown) if e.type == "plotly_chart")
    return chart < words


def test_a_followers_lesson_opens_on_its_figure_with_its_pickers_folded(start) -> None:  # noqa: F811
    teacher, student, code = teacher_and_student(start)
    ok(teacher.switch_page("views/lesson.py").run())
    ok(student.run())  # the follower takes the teacher's page
    assert student.session_state[widgets.FOLDED] and student.session_state["lesson"] == STEPS[0].slug
    [fold] = [e for e in student.expander if e.label.startswith("Controls: step, sentence")]
    assert {w.key for w in fold.selectbox} == {"lesson_jump"} and [w.label for w in fold.radio] == ["Sentence"]
    assert not [t for t in student.toggle if t.label == "Predict before each figure"]  # the class is asked instead
    assert first_chart_before_words(student)
    # The teacher's own page: the pickers open; every screen opens on the step's figure, its words after it
    assert not [e for e in teacher.expander if e.label.startswith("Controls: step")]
    assert first_chart_before_words(teacher)


def test_the_projector_shows_the_choices_while_the_figures_are_held_back(start) -> None:  # noqa: F811
    teacher, _, code = teacher_and_student(start)
    ok(button(teacher, "class_ask").click().run())
    question = ROOM.question(code)
    [line] = [m.value for m in teacher.markdown if m.value.startswith("Choices:")]
    assert all(f"**{literal(choice)}**" in line for choice in question.choices), (line, question.choices)
    ok(button(teacher, "class_reveal").click().run())
    assert not [m for m in ok(teacher.run()).markdown if m.value.startswith("Choices:")]  # the reveal's chart instead


def test_a_reveal_folds_once_the_teacher_moves_on(start) -> None:  # noqa: F811
    teacher, student, code = teacher_and_student(start)
    ok(button(teacher, "class_ask").click().run())
    number = ROOM.question(code).number
    ok(button(teacher, "class_reveal").click().run())
    ok(teacher.run())
    ok(student.run())
    folded = literal(f"Question {number}: the class's answers")
    for page in (teacher, student):  # on the view it was revealed at: open, the page's own figure below it
        assert f"class_answers_{number}" in charts(page) and not [e for e in page.expander if e.label == folded]
    ok(teacher.switch_page("views/lesson.py").run())
    ok(student.run())
    for page in (teacher, student):  # moved on: the answers fold, one click away
        [kept] = [e for e in page.expander if e.label == folded]
        assert f"class_answers_{number}" in {c.key for c in kept.get("plotly_chart")}
