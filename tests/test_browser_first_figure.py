"""The figure first, in a real browser: every page of the menu on each shipped model, as a visitor walks them in
projector mode at 1024×768 and on a 390×844 phone (the first page opened at its address, the others picked from the
menu in that tab, as tests/test_browser_axe.py walks its own), shows its first figure whole in the first view and
the sentence that says what to look at in it (ui.says) in view with it, one server and one chromium for all of them.
The visits tests/test_browser_axe.py opens run this check there, on that one visit, beside the check that each
page's main figure starts inside the first view at 1024×768 in projector mode with no text covered by the element
below it (figure_top), and Explore on a laptop (its heatmap at least 420 px wide, no cell of its predictions table
wrapped). The Lesson's steps: tests/test_browser_lesson_steps.py. Screenshots go to screenshots/first-figure-*.png
and screenshots/first-view/ (git-ignored)."""

from __future__ import annotations

from functools import partial
from urllib.parse import urlencode

import pytest
from browser_support import OVERLAPPED, open_from_menu, page_in_tab
from test_browser import SHOTS, drawn_without_error

from ui.pages import PAGES as APP_PAGES

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


# Every page of the menu, on each shipped model, as a fresh visitor on a projector and on a phone: the first figure
# lies whole in the first view, and the sentence that says what to look at in it (the page's `figure_says` caption,
# ui.says) lies in view with it. Each visit keeps its screenshot of the first view in screenshots/first-view/
# (git-ignored; pytest's tmp_path keeps only its last three runs), a failure's path in its message.
MODELS = ("translate-en-de", "lm-english", "reverse")
SCREENS = {  # name → (width, height, projector mode, a phone)
    "projector": (1024, 768, True, False),
    "laptop": (1024, 768, False, False),
    "wide": (1600, 900, False, False),
    "phone": (390, 844, False, True),
}
SAYS = "[data-testid='stMain'] .st-key-figure_says"
# The boxes of `figure` (the first match) and of `says`, with the page scrolled to its top, in window pixels.
BOXES = """([figure, says]) => {
  for (const e of document.querySelectorAll('*')) if (e.scrollTop) e.scrollTop = 0;
  const box = s => { const e = document.querySelector(s); if (!e) return null;
    const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  return {figure: box(figure), says: box(says), width: innerWidth, height: innerHeight};
}"""


def _whole(box: dict | None, width: int, height: int) -> bool:
    return box is not None and box["top"] >= -1 and box["bottom"] <= height + 1 and box["right"] <= width + 1


# The plain screens restyle nothing by model: each is visited on one model (together both of the shipped kinds), the
# projector and the phone, which restyle the charts, on every model. CI pays for each visit (about 5 s).
PLAIN = {"laptop": ("lm-english",), "wide": ("translate-en-de",)}
# The visits tests/test_browser_axe.py opens already (its `shown`): the same check runs there, on that one visit.
IN_AXE = {
    ("lm-english", "laptop"),
    ("lm-english", "projector"),
    ("translate-en-de", "projector"),
    ("lm-english", "phone"),
}


def _visits() -> list:
    visits = []
    for page in APP_PAGES:
        for model in MODELS:
            for screen in SCREENS:
                if model not in PLAIN.get(screen, MODELS) or (model, screen) in IN_AXE:
                    continue
                # one xdist group a tab (model and screen): its pages run in the menu's order on one worker
                group = pytest.mark.xdist_group(f"tab-{model}-{screen}")
                name = f"{page.url_path or 'explore'}-{model}-{screen}"
                visits.append(pytest.param(page.url_path, model, screen, id=name, marks=group))
    return visits


def first_view_problems(page, path: str, query: dict, screen: tuple[int, int, bool, bool], name: str) -> list[str]:
    """What keeps the first figure of `page` (open and settled at `path` with `query`, on `screen`: width, height,
    projector mode, a phone) and the sentence that explains it out of the first view; its screenshot goes to
    screenshots/first-view/`name`.png, named in each problem."""
    width, height, on_projector, phone = screen
    selector = FIGURE.get(path, CHART)
    page.locator(selector).first.wait_for()
    drawn_without_error(page)
    seen = page.evaluate(BOXES, [selector, SAYS])
    shot = SHOTS / "first-view" / f"{name}.png"
    figure, says = seen["figure"], seen["says"]
    problems = []
    if not _whole(figure, width, height):
        problems.append(f"the first figure ({selector}) is not whole in the first view: {figure}")
    if (on_projector or phone) and not _whole(says, width, height):
        problems.append(f"the sentence that explains it ({SAYS}) is not in the first view: {says}")
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot))  # every visit's, to read; a failure's is named in its message
    where = f"/{path}?{urlencode(query)} at {width}×{height} (screenshot: {shot})"
    return [f"{where}: {problem}" for problem in problems]


@pytest.mark.slow
@pytest.mark.parametrize(("path", "model", "screen"), _visits())
def test_the_first_figure_and_its_sentence_are_in_the_first_view(server, browser, tabs, path, model, screen):
    """One tab a model and screen, as tests/test_browser_axe.py walks its own: the first page opened afresh at its
    address, every next one reached from the menu."""
    width, height, on_projector, phone = SCREENS[screen]
    query = {"model": model, **({"projector": "1"} if on_projector else {})}
    address = f"{server}/{path}?{urlencode(query)}"
    page = page_in_tab(
        tabs, (model, screen), browser, address, partial(open_from_menu, path=path), width, height, phone
    )
    problems = first_view_problems(page, path, query, SCREENS[screen], f"{path or 'explore'}-{model}-{screen}")
    assert not problems, "; ".join(problems)
