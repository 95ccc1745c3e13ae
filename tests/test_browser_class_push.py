"""A class's view pushed to a follower's page in a real browser (`atlas app` on the shipped checkpoints, headless
chromium): when the teacher types a new text, the follower's pushed-view frame (ui/class_pushed.py) draws the
teacher's figures of that text with plotly.js, from the class stream alone, and folds away once the follower's page
has run with the new text itself."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest
from browser_support import settle

pytestmark = pytest.mark.browser
TEXT = "The pushed view reaches every phone at once"
FRAME = 'iframe[data-testid="stCustomComponentV1"][title*="class_pushed"]'


def test_a_followers_frame_draws_the_teachers_new_view_pushed_then_folds(server, browser) -> None:
    contexts = [browser.new_context(viewport={"width": 1400, "height": 1000})]
    contexts.append(browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True))
    teacher, student = [c.new_page() for c in contexts]
    for pg in (teacher, student):
        pg.set_default_timeout(120_000)
    try:
        teacher.goto(f"{server}/?model=lm-english")
        settle(teacher)
        teacher.get_by_role("button", name="Start a class", exact=True).click()
        teacher.wait_for_url(re.compile(r"teach="))
        code = parse_qs(urlparse(teacher.url).query)["class"][0]
        student.goto(f"{server}/?class={code}")
        student.get_by_text("following the teacher").wait_for()
        student.locator(".st-key-head_chart .main-svg").first.wait_for()
        frame = student.locator(FRAME)
        frame.wait_for(state="attached")
        inside = frame.content_frame
        inside.locator("html").wait_for(state="attached")

        box = teacher.get_by_role("textbox", name="Text")
        box.fill(TEXT)
        box.press("Control+Enter")
        # The frame drew the teacher's figures of the new text (the plots are plotly.js's own SVG, in the frame)
        inside.locator(f'html[data-drew-text="{TEXT}"]').wait_for(state="attached")
        plots = int(inside.locator("html").get_attribute("data-drew-plots"))
        assert plots >= 1
        # Then the follower's own page runs with the text, and the frame folds to nothing
        student.wait_for_function(
            "t => document.querySelector('[data-testid=stSidebar] textarea')?.value === t", arg=TEXT
        )
        student.wait_for_function(f"() => document.querySelector('{FRAME}')?.getBoundingClientRect().height === 0")
        assert student.get_by_text("Something went wrong").count() == 0
    finally:
        for context in contexts:
            context.close()
