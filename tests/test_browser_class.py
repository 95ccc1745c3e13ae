"""A live class in a real browser (the shipped checkpoints, headless chromium): a teacher and three students, each in
a context of their own. The students follow the teacher's layer and head, text and Lesson step; a wrong teach=
moves nothing; a question gets three answers, the teacher sees the count, and the reveal shows on every page.
axe-core finds nothing serious on the teacher's page or a student's (1024 × 768). Screenshots: a student's page after
the reveal (screenshots/class-student-1024.png) and the teacher's on a projector (class-teacher-projector.png)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from browser_support import SentFrames, click_sent, settle, settled_violations
from playwright.sync_api import expect
from test_browser import ROOT, SHOTS, choose, open_page

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
        intruder.get_by_text("Controls: attention, layer, head").click()  # a follower's pickers are folded away
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


ROOM_SHOTS = ROOT.parent / "classui-shots"  # outside the repository: read by a person, not kept
# The page's charts and tables (the sidebar's model card keeps its metrics: they answer no question)
FIGURES = ", ".join(
    f'[data-testid="stMain"] {kind}'
    for kind in ('[data-testid="stPlotlyChart"]', "table.atlas-table", '[data-testid="stDataFrame"]')
)
TO_TOP = """() => { window.scrollTo(0, 0); document.querySelectorAll(
  '[data-testid="stMain"], [data-testid="stAppViewContainer"]').forEach(e => e.scrollTo(0, 0)); }"""
NO_FIGURES = f"() => document.querySelectorAll('{FIGURES}').length === 0"


def in_first_view(page, locator) -> bool:
    """Whether `locator` lies whole in the page's first view (the page scrolled back to its top first)."""
    page.evaluate(TO_TOP)
    box = locator.bounding_box()
    view = page.viewport_size
    return (
        box is not None
        and box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= view["width"]
        and (box["y"] + box["height"] <= view["height"])
    )


def test_a_class_in_a_room_a_projector_on_localhost_and_two_phones(server, browser) -> None:
    """The teacher opens the app as `localhost` and projects it at 1024 × 768; two phones (390 × 844) and a laptop
    join, one phone by typing the code on the home page. While the question is open no page shows a chart or a
    table; the reveal brings them back; the CSV holds the counts."""
    ROOM_SHOTS.mkdir(exist_ok=True)
    local = server.replace("127.0.0.1", "localhost")
    contexts = [browser.new_context(viewport={"width": 1024, "height": 768}, accept_downloads=True)]
    contexts += [browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True) for _ in range(2)]
    contexts += [browser.new_context(viewport={"width": 1024, "height": 768})]
    teacher, *students = [c.new_page() for c in contexts]
    phones = students[:2]
    for pg in (teacher, *students):
        pg.set_default_timeout(120_000)
    sent = SentFrames(teacher)
    try:
        teacher.goto(f"{local}/?model=lm-english")
        settle(teacher)
        teacher.get_by_role("button", name="Start a class", exact=True).click()
        teacher.wait_for_url(re.compile(r"teach="))
        code = param(teacher, "class")
        teacher.goto(teacher.url + "&projector=1")
        shown = teacher.locator(".class-code")
        shown.wait_for()
        settle(teacher)
        assert shown.text_content() == code and in_first_view(teacher, shown)
        link = teacher.locator(".st-key-class_link code")
        if link.count():
            text = link.first.text_content()
            assert f"/?class={code}" in text and not re.search(r"//(localhost|127\.|\[::1\])", text), text
            assert in_first_view(teacher, link.first)
            assert link.first.evaluate("e => e.closest('pre').scrollWidth <= e.closest('pre').clientWidth")  # wraps
        else:
            teacher.get_by_text("No address that students' phones can open is known").wait_for()
        teacher.screenshot(path=str(ROOM_SHOTS / "projector-1024-join.png"))

        # One phone types the code on the home page; the others open the link's address
        phones[0].goto(f"{server}/?model=lm-english")
        phones[0].get_by_label("Join a class: its code").fill(code.lower())
        phones[0].get_by_role("button", name="Join", exact=True).click()
        for student in students[1:]:
            student.goto(f"{server}/?class={code}")
        for student in students:
            student.get_by_text("following the teacher").wait_for()
            student.locator(".st-key-head_chart .main-svg").first.wait_for()  # the figure, before any question

        teacher.get_by_text("Ask the class").click()
        click_sent(teacher, teacher.get_by_role("button", name="Ask", exact=True), sent, "class_ask")
        teacher.get_by_text("0 answers so far").wait_for()
        for pg in (teacher, *students):
            pg.get_by_text(re.compile("The figure is held back while question 1 is open")).first.wait_for()
            pg.wait_for_function(NO_FIGURES)
        assert in_first_view(teacher, teacher.get_by_role("button", name="Reveal"))
        for i, student in enumerate(students):
            question = student.locator('[data-testid="stRadio"]').filter(has_text="Question 1")
            question.wait_for()
            answer = student.get_by_role("button", name="Answer")
            if student in phones:
                assert in_first_view(student, answer), answer.bounding_box()
            if i == 0:
                settle(student)
                student.screenshot(path=str(ROOM_SHOTS / "phone-390-question.png"))
            question.locator("label").nth(i + 1).click()  # label 0 is the question's own
            expect(question.locator("input").nth(i)).to_be_checked(timeout=120_000)
            settle(student)  # the pick's own rerun is over: the click on Answer carries it
            answer.click()
            student.get_by_text("Your answer").wait_for()
            assert student.locator(FIGURES).count() == 0
        teacher.get_by_text("3 answers so far").wait_for()
        settle(teacher)
        teacher.screenshot(path=str(ROOM_SHOTS / "projector-1024-question.png"))

        # The class's answers, as CSV, while the class lives
        with teacher.expect_download() as download:
            teacher.get_by_role("button", name="CSV of the class's answers").click()
        rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
        assert sum(int(r["count"]) for r in rows) == 3 and {r["question"] for r in rows} == {"1"}, rows

        teacher.get_by_role("button", name="Reveal").click()
        for pg in (teacher, *students):
            pg.locator(".st-key-class_answers_1 .main-svg").first.wait_for()
            pg.locator(".st-key-head_chart .main-svg").first.wait_for()  # the figure is back
        assert teacher.locator(".st-key-class_answers_1").bounding_box()["y"] < 768  # the reveal starts in view
        settle(teacher)
        teacher.screenshot(path=str(ROOM_SHOTS / "projector-1024-reveal.png"))
        settle(phones[0])
        phones[0].screenshot(path=str(ROOM_SHOTS / "phone-390-reveal.png"))
    except Exception:
        keep_the_pages({"room-teacher": teacher, **{f"room-student{i + 1}": s for i, s in enumerate(students)}})
        raise
    finally:
        for context in contexts:
            context.close()
