"""A live class in a real browser (the shipped checkpoints, headless chromium): a teacher and three students, each in
a context of their own. The students follow the teacher's layer and head, text and Lesson step; a wrong teach=
moves nothing; a question gets three answers, the teacher sees the count, and the reveal shows on every page.
axe-core finds nothing serious on the teacher's page or a student's (1024 × 768). Screenshots: a student's page after
the reveal (screenshots/class-student-1024.png) and the teacher's on a projector (class-teacher-projector.png)."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest
from browser_support import SentFrames, click_sent, settle, settled_violations
from test_browser import SHOTS, choose, open_page

pytestmark = pytest.mark.browser
TEXT = "The old man went to the river and the old man went"


def param(page, name: str) -> str | None:
    return parse_qs(urlparse(page.url).query).get(name, [None])[0]


def wait_param(page, name: str, value: str) -> None:
    page.wait_for_function(
        "([n, v]) => new URLSearchParams(location.search).get(n) === v", arg=[name, value], timeout=120_000
    )


def test_a_teacher_and_three_students(server, browser) -> None:
    contexts = [browser.new_context(viewport={"width": 1400, "height": 1000})]
    contexts += [browser.new_context(viewport={"width": 1024, "height": 768}) for _ in range(4)]
    teacher, *students, intruder = [c.new_page() for c in contexts]
    for pg in (teacher, *students, intruder):
        pg.set_default_timeout(120_000)  # five pages at once on a loaded CI machine
    sent = SentFrames(teacher)
    try:
        teacher.goto(f"{server}/?model=lm-english")
        settle(teacher)
        teacher.get_by_role("button", name="Start a class", exact=True).click()
        teacher.wait_for_url(re.compile(r"teach="))
        code = param(teacher, "class")
        assert code and param(teacher, "teach")
        assert teacher.get_by_role("img", name=re.compile("QR code")).is_visible()
        link = teacher.locator(".st-key-class_link code").first.text_content()
        assert f"/?class={code}" in link, link
        for student in students:
            student.goto(f"{server}/?class={code}")
            student.get_by_text("following the teacher").wait_for()
            assert param(student, "teach") is None
        assert not settled_violations(students[0])

        # Layer and head
        choose(teacher, "Layer", "layer 2")
        choose(teacher, "Head", "head 3")
        for student in students:
            wait_param(student, "L", "2")
            wait_param(student, "H", "3")

        # A wrong key: refused in one line, and what it picks moves no one
        intruder.goto(f"{server}/?class={code}&teach=guessed")
        intruder.get_by_text(re.compile("teacher key is not class")).wait_for()
        # The address drops the key at the end of the run that drew the refusal: waited for, not read at once
        intruder.wait_for_function("() => !new URLSearchParams(location.search).has('teach')", timeout=120_000)
        choose(intruder, "Head", "head 1")
        wait_param(intruder, "H", "1")
        choose(teacher, "Layer", "layer 1")
        for student in students:
            wait_param(student, "L", "1")
            assert param(student, "H") == "3"

        # The text
        box = teacher.get_by_role("textbox", name="Text")
        box.fill(TEXT)
        box.press("Control+Enter")
        for student in students:
            student.wait_for_function(
                "t => document.querySelector('[data-testid=stSidebar] textarea')?.value === t", arg=TEXT
            )

        # A question, three answers, the reveal
        teacher.get_by_text("Ask the class").click()
        # Once the expander has opened, and again if the browser sent nothing (browser_support.click_sent)
        click_sent(teacher, teacher.get_by_role("button", name="Ask", exact=True), sent, "class_ask")
        teacher.get_by_text("0 answers so far").wait_for()  # asked: the teacher's page counts the answers
        for i, student in enumerate(students):
            question = student.locator('[data-testid="stRadio"]').filter(has_text="Question 1")
            question.locator("label").nth(i + 1).click()
            student.get_by_role("button", name="Answer").click()
            student.get_by_text("Your answer").wait_for()
        teacher.get_by_text("3 answers so far").wait_for()
        teacher.get_by_role("button", name="Reveal").click()
        teacher.locator(".st-key-class_answers_1 .main-svg").first.wait_for()
        for student in students:
            student.locator(".st-key-class_answers_1 .main-svg").first.wait_for()
            student.get_by_text(re.compile(r"^(Right: you picked|Not this time: you picked)")).wait_for()
        assert not settled_violations(teacher)
        students[0].screenshot(path=str(SHOTS / "class-student-1024.png"))

        # The Lesson's step
        open_page(teacher, "Lesson")
        teacher.wait_for_url(re.compile(r"lesson="))
        first = param(teacher, "lesson")  # the Lesson opens on its first step: the address says so before Next
        teacher.get_by_role("button", name="Next →").first.click()
        teacher.wait_for_function(
            "f => ![null, f].includes(new URLSearchParams(location.search).get('lesson'))", arg=first
        )
        step = param(teacher, "lesson")
        for student in students:
            wait_param(student, "lesson", step)
        for pg in (teacher, *students):
            assert pg.get_by_text("Something went wrong").count() == 0

        # The projector: the teacher's page at 1024 × 768 in projector mode still shows how the class answered
        teacher.set_viewport_size({"width": 1024, "height": 768})
        teacher.goto(teacher.url + "&projector=1")
        teacher.locator(".st-key-class_answers_1 .main-svg").first.wait_for()
        settle(teacher)
        teacher.screenshot(path=str(SHOTS / "class-teacher-projector.png"))
    except Exception:
        keep_the_pages({"teacher": teacher, **{f"student{i + 1}": s for i, s in enumerate(students)}})
        raise
    finally:
        for context in contexts:
            context.close()


def keep_the_pages(pages: dict) -> None:
    """A failure's evidence, for a failure that is rare (a loaded machine): each page's screenshot, address and text
    (screenshots/class-failure-NAME.png and .txt)."""
    for name, pg in pages.items():
        try:
            pg.screenshot(path=str(SHOTS / f"class-failure-{name}.png"), timeout=10_000)
            text = pg.evaluate("() => document.body.innerText")
            (SHOTS / f"class-failure-{name}.txt").write_text(f"{pg.url}\n\n{text}")
        except Exception as exc:  # a page already gone: the others are still kept
            (SHOTS / f"class-failure-{name}.txt").write_text(f"not kept: {exc}")
