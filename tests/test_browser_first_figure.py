"""The figure first, in a real browser: at 1024×768 in projector mode every step of the Lesson's main figure (its first
chart or table in the main area) starts inside the first view, on lm-english, and no text is covered by the element
below it. The same check on every page of the menu, and Explore on a laptop (without projector mode at 1024×768 its
heatmap at least 420 px wide, no cell of its predictions table wrapped), run in tests/test_browser_axe.py on the one
visit of each page that its other checks read. Screenshots go to screenshots/first-figure-*.png (git-ignored)."""

from __future__ import annotations

import pytest
from browser_support import OVERLAPPED, settle
from test_browser import SHOTS, drawn_without_error

from course.lesson import SLUGS

pytestmark = pytest.mark.browser
WIDTH, HEIGHT = 1024, 768
# What a page opens on: its first chart in the main area; Generate's is the text the model wrote (its charts show one
# decoding step of it); Head ablation's, the intact model's guesses beside the ablated one's (its chart, the ranking,
# waits for a click); the upload box where the page has no chart before a file.
FIGURE = {
    "generate": "[data-testid='stMain'] [data-testid='stCode']",
    "ablation": "[data-testid='stMain'] [data-testid='stDataFrame']",
    "trace": "[data-testid='stMain'] [data-testid='stFileUploader']",
}
CHART = "[data-testid='stMain'] .stPlotlyChart"
STEP_FIGURE = f"{CHART}, [data-testid='stMain'] [data-testid='stDataFrame']"  # next-token's figure is its table
# The top of `selector`'s first element, with the page scrolled to its top, in window pixels.
TOP = """s => {
  for (const e of document.querySelectorAll('*')) if (e.scrollTop) e.scrollTop = 0;
  return document.querySelector(s).getBoundingClientRect().top;
}"""


def figure_top(page, selector: str, shot: str) -> float:
    """The top of the main figure (`selector`) of `page`, open and settled at 1024×768; a screenshot of the first
    view. No text runs under the element below it (a heading's bottom under the figure, on a projector's narrower
    gaps)."""
    page.locator(selector).first.wait_for()
    drawn_without_error(page)
    top = page.evaluate(TOP, selector)
    page.screenshot(path=str(SHOTS / shot))
    covered = page.evaluate(OVERLAPPED)
    assert not covered, f"{page.url}: text under the element below it: {covered}"
    return top


@pytest.mark.parametrize("slug", SLUGS)
def test_each_lesson_steps_figure_is_in_the_first_view_on_a_projector(server, page, slug: str) -> None:
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    page.goto(f"{server}/lesson?model=lm-english&lesson={slug}&projector=1")
    page.locator(STEP_FIGURE).first.wait_for()
    settle(page)
    top = figure_top(page, STEP_FIGURE, f"first-figure-lesson-{slug}-projector.png")
    assert top < HEIGHT, f"lesson step {slug}: the first figure starts at y = {top:.0f}, below the first view"
