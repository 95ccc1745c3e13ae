"""The figure first, in a real browser: at 1024×768 in projector mode every page's main figure (its first chart in
the main area; the upload box on "Open a trace file", which has no chart until a file is opened) starts inside the
first view, on every page of the menu and every step of the Lesson, on lm-english, and no text is covered by the
element below it. Without projector mode, at 1024×768 Explore's heatmap is at least 420 px wide and no cell of its
predictions table wraps. Screenshots go to screenshots/first-figure-*.png (git-ignored)."""

from __future__ import annotations

import pytest
from browser_support import OVERLAPPED, settle
from test_browser import SHOTS, drawn_without_error

from course.lesson import SLUGS
from ui.pages import PAGES

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


def figure_top(page, url: str, selector: str, shot: str) -> float:
    """The top of the page's main figure once `url` has drawn, at 1024×768; a screenshot of the first view. No text
    runs under the element below it (a heading's bottom under the figure, on a projector's narrower gaps)."""
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    page.goto(url)
    page.locator(selector).first.wait_for()
    settle(page)
    drawn_without_error(page)
    top = page.evaluate(TOP, selector)
    page.screenshot(path=str(SHOTS / shot))
    covered = page.evaluate(OVERLAPPED)
    assert not covered, f"{url}: text under the element below it: {covered}"
    return top


@pytest.mark.parametrize("path", [pytest.param(p.url_path, id=p.url_path or "explore") for p in PAGES])
def test_each_pages_figure_is_in_the_first_view_on_a_projector(server, page, path: str) -> None:
    selector = FIGURE.get(path, CHART)
    url = f"{server}/{path}?model=lm-english&projector=1"
    top = figure_top(page, url, selector, f"first-figure-{path or 'explore'}-projector.png")
    assert top < HEIGHT, f"/{path}: the main figure starts at y = {top:.0f}, below the first view ({HEIGHT} px)"


@pytest.mark.parametrize("slug", SLUGS)
def test_each_lesson_steps_figure_is_in_the_first_view_on_a_projector(server, page, slug: str) -> None:
    url = f"{server}/lesson?model=lm-english&lesson={slug}&projector=1"
    top = figure_top(page, url, STEP_FIGURE, f"first-figure-lesson-{slug}-projector.png")
    assert top < HEIGHT, f"lesson step {slug}: the first figure starts at y = {top:.0f}, below the first view"


# The predictions table's cells: each cell's height against one line of its text.
CELLS = """() => [...document.querySelectorAll("[data-testid='stMain'] .atlas-table td, "
    + "[data-testid='stMain'] .atlas-table th")].map(c => {
  const s = getComputedStyle(c);
  const line = parseFloat(s.lineHeight) || 1.6 * parseFloat(s.fontSize);
  const inner = c.clientHeight - parseFloat(s.paddingTop) - parseFloat(s.paddingBottom);
  return {text: c.innerText, inner, line};
})"""


def test_explore_on_a_laptop_draws_a_wide_heatmap_and_an_unwrapped_table(server, page) -> None:
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    page.goto(f"{server}/?model=lm-english")
    page.locator(CHART).first.wait_for()
    page.locator("[data-testid='stMain'] .atlas-table").first.wait_for()
    settle(page)
    drawn_without_error(page)
    width = page.locator(CHART).first.evaluate("e => e.getBoundingClientRect().width")
    assert width >= 420, f"Explore's heatmap is {width:.0f} px wide at 1024×768"
    cells = page.evaluate(CELLS)
    assert cells
    wrapped = [c["text"] for c in cells if c["inner"] > 1.5 * c["line"]]
    assert not wrapped, f"cells of the predictions table wrap: {wrapped}"
    page.screenshot(path=str(SHOTS / "first-figure-explore-laptop.png"))
