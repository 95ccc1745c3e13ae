"""The class's controls in chromium at 1024 × 768, on a server that asks for a teacher password: axe-core finds no
serious or critical violation (nor headings out of order) on the home page with its "Join a class" box and the
sidebar's password box, on the teacher's page of a class with a question open (the peek toggle, the folded "how
students join" panel opened to show "Yes, end it", "End the class" and "Lock the class", the answers' CSV and JSON),
on a student's page with the question, and on a Lesson step that asks its own question. From the keyboard alone a
student reaches the code box, types the code and joins with Enter on "Join"; the teacher reaches "Yes, end it" and
ticks it with Space."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest
from browser_support import SentFrames, click_sent, serve, settle, settled_violations
from playwright.sync_api import expect

pytestmark = pytest.mark.browser
PASSWORD = "chalk and talk"
MAX_TABS = 200  # more stops than any of these pages has: a control Tab never reaches fails, it does not loop


@pytest.fixture(scope="module")
def guarded_server():
    """A server whose classes need ATLAS_TEACHER_PASSWORD: the sidebar shows its password box."""
    yield from serve({"ATLAS_TEACHER_PASSWORD": PASSWORD}, log_name="server-class-axe")


def tab_to(page, control) -> int:
    """Press Tab from where the focus is until `control` (a locator) has it; the number of presses."""
    for presses in range(1, MAX_TABS + 1):
        page.keyboard.press("Tab")
        if control.evaluate("e => e === document.activeElement"):
            return presses
    raise AssertionError(f"{MAX_TABS} presses of Tab and {control} never had the focus")


def from_the_top(page) -> None:
    """Put the focus back at the page's start, as a person who has just opened it finds it."""
    page.evaluate("() => document.activeElement?.blur()")


def test_the_class_controls_pass_axe_and_work_from_the_keyboard(guarded_server, browser) -> None:
    contexts = [browser.new_context(viewport={"width": 1024, "height": 768}) for _ in range(3)]
    teacher, student, reader = [c.new_page() for c in contexts]
    for pg in (teacher, student, reader):
        pg.set_default_timeout(120_000)
    sent = SentFrames(teacher)
    try:
        # The home page: the join box, and the sidebar's teacher password box
        student.goto(f"{guarded_server}/?model=lm-english")
        settle(student)
        code_box = student.get_by_label("Join a class: its code")
        code_box.wait_for()
        student.get_by_label("Teacher password").wait_for()
        assert not settled_violations(student, settled=True)

        # The teacher starts a class with the password and asks a question
        teacher.goto(f"{guarded_server}/?model=lm-english")
        settle(teacher)
        teacher.get_by_label("Teacher password").fill(PASSWORD)
        teacher.get_by_role("button", name="Start a class", exact=True).click()
        teacher.wait_for_url(re.compile(r"teach="))
        code = parse_qs(urlparse(teacher.url).query)["class"][0]
        teacher.get_by_text("Ask the class").click()
        click_sent(teacher, teacher.get_by_role("button", name="Ask", exact=True), sent, "class_ask")
        teacher.get_by_text("0 answers so far").wait_for()

        # The student joins from the keyboard: Tab to the box, type, Tab to Join, Enter
        from_the_top(student)
        tab_to(student, code_box)
        student.keyboard.type(code.lower())
        tab_to(student, student.get_by_role("button", name="Join", exact=True))
        student.keyboard.press("Enter")
        student.get_by_text("following the teacher").wait_for()
        student.locator('[data-testid="stRadio"]').filter(has_text="Question 1").wait_for()
        violations = settled_violations(student)
        assert violations == [], "student's page:\n" + "\n".join(violations)

        # The teacher's page, the folded panel opened: every control of the class shown
        teacher.get_by_text(f"Class {code}: how students join").click()
        end_sure = teacher.get_by_role("checkbox", name="Yes, end it")
        for control in (
            teacher.get_by_label(re.compile("^Peek at the figures")),
            end_sure,
            teacher.get_by_role("button", name="End the class"),
            teacher.get_by_role("button", name="Lock the class"),
            teacher.get_by_role("button", name="CSV of the class's answers"),
            teacher.get_by_role("button", name="JSON of the class's answers"),
        ):
            control.wait_for()
        violations = settled_violations(teacher)
        assert violations == [], "teacher's page:\n" + "\n".join(violations)
        from_the_top(teacher)
        tab_to(teacher, end_sure)
        teacher.keyboard.press("Space")
        expect(end_sure).to_be_checked()
        expect(teacher.get_by_role("button", name="End the class")).to_be_enabled()  # ticked: End may end it

        # A Lesson step that asks first, out of any class
        reader.goto(f"{guarded_server}/lesson?model=lm-english&lesson=next-token")
        settle(reader)
        for name in ("Answer", "Show without answering"):
            reader.get_by_role("button", name=name, exact=True).wait_for()
        reader.locator('[data-testid="stRadio"]').filter(has_text="Your answer").wait_for()
        violations = settled_violations(reader, settled=True)
        assert violations == [], "Lesson's question:\n" + "\n".join(violations)
        reader.get_by_role("button", name="Show without answering", exact=True).click()
        reader.get_by_role("button", name="Ask me again", exact=True).wait_for()
        violations = settled_violations(reader)
        assert violations == [], "Lesson's answered question:\n" + "\n".join(violations)
    finally:
        for context in contexts:
            context.close()
