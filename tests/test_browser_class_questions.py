"""Each kind of class question in a real browser, as a room sees it: the teacher projects at 1024 × 768 (projector
mode, opened on `localhost`), a student follows on a 390 × 844 phone. For the next-word and the head question the
choices (words without the tokenizer's marks; the head question's layer × head grid) and the Answer button lie in
the phone's first view; each reveal lies whole in the projector's first view and the phone's, its titles apart and
within the chart. On the phone no chart's toolbar lies over its title. The head question's grid and each reveal pass
axe-core (no serious or critical violation), and a head is picked and answered from the keyboard alone.

Screenshots of each state go to screenshots/ (scripts/screenshots.sh), or to $ATLAS_CLASS_SHOTS when set:
class-projector-1024-{kind}-question.png, …-reveal.png, class-phone-390-{kind}-question.png, …-reveal.png."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from browser_support import EXPANDERS_STILL, SentFrames, click_sent, settle, settled_violations
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from test_browser import SHOTS, open_page
from test_browser_class import TEXT, TO_TOP, in_first_view, keep_the_pages, param
from test_browser_class_axe import from_the_top, tab_to

pytestmark = pytest.mark.browser
PHOTOS = Path(os.environ.get("ATLAS_CLASS_SHOTS") or SHOTS)
PHONE = {"width": 390, "height": 844}
PROJECTOR = {"width": 1024, "height": 768}
# Rectangles of each chart's title text and of its toolbar's buttons, where the toolbar is shown: any pair that meet.
TOOLBAR_OVER_TITLE = """() => {
  const out = [];
  for (const chart of document.querySelectorAll('.js-plotly-plot')) {
    const buttons = [...chart.querySelectorAll('.modebar-btn')]
      .filter(b => b.checkVisibility({opacityProperty: true, visibilityProperty: true}))
      .map(b => b.getBoundingClientRect()).filter(b => b.width && b.height);
    for (const t of chart.querySelectorAll('.gtitle, .annotation-text')) {
      const r = t.getBoundingClientRect();
      if (buttons.some(b => r.left < b.right && b.left < r.right && r.top < b.bottom && b.top < r.bottom))
        out.push(t.textContent.slice(0, 40));
    }
  }
  return out; }"""
# A chart's titles (its own and its sides') that overlap each other or run past the chart's edges.
TITLES_CLASH = """() => {
  const out = [];
  for (const chart of document.querySelectorAll('.js-plotly-plot')) {
    const c = chart.getBoundingClientRect();
    const rects = [...chart.querySelectorAll('.gtitle, .annotation-text')].map(t => [t, t.getBoundingClientRect()]);
    for (const [t, r] of rects)
      if (r.left < c.left - 1 || r.right > c.right + 1) out.push(`past the edge: ${t.textContent.slice(0, 40)}`);
    for (let i = 0; i < rects.length; i++)
      for (let j = i + 1; j < rects.length; j++) {
        const [a, b] = [rects[i][1], rects[j][1]];
        if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom)
          out.push(`${rects[i][0].textContent.slice(0, 30)} / ${rects[j][0].textContent.slice(0, 30)}`);
      }
  }
  return out; }"""


def ask(teacher, sent: SentFrames, kind_label: str, number: int) -> None:
    """Open "Ask the class", pick the question's kind, Ask, and wait until the teacher's page counts its answers."""
    kind = teacher.get_by_text(kind_label, exact=True)
    for _ in range(3):  # a click on the expander that a rerun of the loaded page swallowed is clicked again
        teacher.wait_for_function(EXPANDERS_STILL)
        if kind.is_visible():
            break
        teacher.get_by_text("Ask the class").click()
        try:
            kind.wait_for(state="visible", timeout=20_000)
        except PlaywrightTimeout:
            continue
    kind.click()
    click_sent(teacher, teacher.get_by_role("button", name="Ask", exact=True), sent, "class_ask")
    teacher.get_by_text(re.compile(f"Question {number}:")).first.wait_for()
    teacher.get_by_text("0 answers so far").wait_for()


def whole_in_view(page, locator) -> dict:
    """The locator's box, asserted whole in the page's first view."""
    assert in_first_view(page, locator), (locator, locator.bounding_box(), page.viewport_size)
    return locator.bounding_box()


def test_each_question_fits_a_phone_and_its_reveal_the_projector(server, browser) -> None:
    PHOTOS.mkdir(parents=True, exist_ok=True)
    local = server.replace("127.0.0.1", "localhost")
    teacher_context = browser.new_context(viewport=PROJECTOR)
    phone_context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    teacher, phone = teacher_context.new_page(), phone_context.new_page()
    for pg in (teacher, phone):
        pg.set_default_timeout(120_000)
    sent = SentFrames(teacher)
    try:
        teacher.goto(f"{local}/?model=lm-english&text={quote(TEXT)}")
        settle(teacher)
        teacher.get_by_role("button", name="Start a class", exact=True).click()
        teacher.wait_for_url(re.compile(r"teach="))
        code = param(teacher, "class")
        teacher.goto(teacher.url + "&projector=1")
        teacher.locator(".class-code").wait_for()
        phone.goto(f"{server}/?class={code}")
        phone.get_by_text("following the teacher").wait_for()
        phone.locator(".st-key-head_chart .main-svg").first.wait_for()
        settle(phone)
        assert not phone.evaluate(TOOLBAR_OVER_TITLE)
        phone.screenshot(path=str(PHOTOS / "class-phone-390-following.png"))

        for number, (kind, label) in enumerate(
            [("next", "What will the model predict next?"), ("head", "Which head is the induction head?")], start=1
        ):
            ask(teacher, sent, label, number)
            settle(teacher)
            whole_in_view(teacher, teacher.get_by_role("button", name="Reveal"))
            teacher.screenshot(path=str(PHOTOS / f"class-projector-1024-{kind}-question.png"))

            answer = phone.get_by_role("button", name="Answer")
            answer.wait_for()
            settle(phone)
            phone.screenshot(path=str(PHOTOS / f"class-phone-390-{kind}-question.png"))
            whole_in_view(phone, answer)
            if kind == "head":  # the grid's every row in view, and one tap picks a head
                rows = phone.locator('[data-testid="stButtonGroup"]')
                assert rows.count() >= 2
                for row in range(rows.count()):
                    whole_in_view(phone, rows.nth(row))
                violations = settled_violations(phone, settled=True)
                assert violations == [], "the head question's grid:\n" + "\n".join(violations)
                # From the keyboard alone: a layer's row is one stop of Tab, its heads are reached with the arrows
                from_the_top(phone)
                tab_to(phone, rows.nth(1).locator("button").first)
                phone.keyboard.press("ArrowRight")
                picked = rows.nth(1).locator("button").nth(1)  # layer 2, head 2
                assert picked.evaluate("e => e === document.activeElement")
                phone.keyboard.press("Enter")
            else:
                choices = phone.locator('[data-testid="stRadio"]').filter(has_text=f"Question {number}")
                whole_in_view(phone, choices)
                shown = choices.locator("label").all_inner_texts()[1:]
                assert shown and not [c for c in shown if re.search(r"[▁Ġ]|<s>|<0x", c)], shown  # words, no marks
                choices.locator("label").nth(1).click()  # label 0 is the question's own
            settle(phone)  # the pick's own rerun is over: the press on Answer carries it
            if kind == "head":
                tab_to(phone, answer)
                phone.keyboard.press("Enter")
            else:
                answer.click()
            phone.get_by_text("Your answer").wait_for()
            teacher.get_by_text("1 answer so far").wait_for()

            teacher.get_by_role("button", name="Reveal").click()
            reveal = f".st-key-class_answers_{number}"
            for pg in (teacher, phone):
                pg.locator(f"{reveal} .main-svg").first.wait_for()
                settle(pg)
            whole_in_view(teacher, teacher.locator(reveal))
            teacher.screenshot(path=str(PHOTOS / f"class-projector-1024-{kind}-reveal.png"))
            whole_in_view(phone, phone.locator(reveal))
            assert not phone.evaluate(TOOLBAR_OVER_TITLE)
            for pg in (teacher, phone):
                assert not pg.evaluate(TITLES_CLASH), (kind, pg.viewport_size)
                violations = settled_violations(pg)
                assert violations == [], f"{kind} reveal at {pg.viewport_size}:\n" + "\n".join(violations)
            phone.screenshot(path=str(PHOTOS / f"class-phone-390-{kind}-reveal.png"))

        # The Lesson: a follower's phone opens on the step's figure, its pickers folded
        open_page(teacher, "Lesson")
        teacher.wait_for_url(re.compile(r"lesson="))
        phone.wait_for_url(re.compile(r"lesson="))
        figure = phone.locator(".st-key-lesson_figure .main-svg").first
        figure.wait_for()
        settle(phone)
        phone.screenshot(path=str(PHOTOS / "class-phone-390-lesson.png"))
        assert phone.get_by_text("Controls: step, sentence").is_visible()
        phone.evaluate(TO_TOP)
        assert figure.bounding_box()["y"] < PHONE["height"], figure.bounding_box()
        settle(teacher)
        teacher.screenshot(path=str(PHOTOS / "class-projector-1024-lesson.png"))
    except Exception:
        keep_the_pages({"questions-teacher": teacher, "questions-phone": phone})
        raise
    finally:
        teacher_context.close()
        phone_context.close()
