"""Every page of the shipped language model and translator, in chromium at 1024×768, in plain and in projector
mode, and of the language model on a 390×844 phone, on each page's defaults, as a teacher walks them: one tab a model
and screen, its first page opened at its address and every other reached from the menu (the session going on, its
defaults unchanged); each page is shown once and every check reads that one visit:

- accessibility (every visit, the phone's too): axe-core (npm `axe-core`, injected into the page; scripts/test.sh
  fetches it into .venv/axe-core): any serious or critical violation fails, and headings out of order (a moderate
  one), named with the elements it found;
- nothing cut off (at 1024×768): no element clips its own text (a box narrower or shorter than the text it holds,
  with its overflow hidden or an ellipsis). Data grids scroll and charts wrap their titles
  (tests/test_browser_projector.py);
- the figure first (tests/test_browser_first_figure.py checks the other models and screens,
  tests/test_browser_lesson_steps.py the Lesson's steps): on lm-english in projector mode each page's main figure
  starts inside the first view, and no text is covered by the element below it; on every visit here but the
  translator's plain one, the first figure is whole in the first view and, on a projector and a phone, the sentence
  that explains it is in view with it; on Explore without projector mode the heatmap is at least 420 px wide and no
  cell of the predictions table wraps.
"""

from __future__ import annotations

from functools import partial
from urllib.parse import urlencode

import pytest
from browser_support import CLIPPED, TAB_ORDER, open_from_menu, page_in_tab, settle, settled_violations
from test_browser import SHOTS, drawn_without_error
from test_browser_first_figure import CHART, FIGURE, HEIGHT, IN_AXE, WIDTH, figure_top, first_view_problems

from ui.pages import PAGES as APP_PAGES

pytestmark = pytest.mark.browser
PAGES = tuple(p.url_path for p in APP_PAGES)  # every page, the app's own list
MODELS = ("lm-english", "translate-en-de")
# A screen: (width, height, projector mode, a phone: mobile and touch, as tests/test_browser_first_figure.py's)
SCREENS = {"plain": (1024, 768, False, False), "projector": (1024, 768, True, False), "phone": (390, 844, False, True)}
SHOWN = [(path, model, screen) for path in PAGES for model in MODELS for screen in ("plain", "projector")]
ON_A_PHONE = [(path, "lm-english", "phone") for path in PAGES]


def _shown_param(path: str, model: str, screen: str, test_id: str | None = None):
    """The visit (path, model, screen) as a parameter of `shown`; `test_id`, the test's id when not the visit's
    name. pytest groups the tests by the visit's value, whatever their ids, and opens it once for them all."""
    name = f"{path or 'explore'}-{model}-{screen}"
    # one xdist group a tab (model and screen): under `--dist loadgroup` (scripts/test.sh) every page of it runs on
    # the one worker that holds the tab, in the menu's order
    return pytest.param(
        (path, model, screen), id=test_id or name, marks=pytest.mark.xdist_group(f"tab-{model}-{screen}")
    )


EVERY_PAGE = [_shown_param(*one) for one in SHOWN]
AS_FIRST_FIGURE = {"laptop": "plain", "projector": "projector", "phone": "phone"}  # its screen's name → ours
FIRST_VIEW = [_shown_param(path, model, AS_FIRST_FIGURE[screen]) for path in PAGES for model, screen in sorted(IN_AXE)]
ON_A_PROJECTOR = [_shown_param(path, "lm-english", "projector", path or "explore") for path in PAGES]


@pytest.fixture(scope="module")
def shown(request, server, browser, tabs):
    """The page of this (path, model, screen) (a test's `shown` parameter, from `_shown_param`), settled on its
    defaults, as a visitor meets it: the first page of a (model, screen) opened afresh at its address, every next one
    reached from the menu in that tab, the session going on (`open_from_menu`: under a third of a fresh visit's CPU,
    and the way a teacher walks the pages). pytest runs every test that reads a page before it opens the next (and
    pytest-xdist runs a tab's pages on one worker). A page that does not come leaves the tab closed: the next opens
    afresh."""
    path, model, screen = request.param
    width, height, projector, phone = SCREENS[screen]
    query = {"model": model, **({"projector": "1"} if projector else {})}
    address = f"{server}/{path}?{urlencode(query)}"
    yield page_in_tab(tabs, (model, screen), browser, address, partial(open_from_menu, path=path), width, height, phone)


@pytest.mark.parametrize("shown", EVERY_PAGE + [_shown_param(*one) for one in ON_A_PHONE], indirect=True)
def test_no_serious_accessibility_violation(shown) -> None:
    violations = settled_violations(shown, settled=True)
    assert violations == [], "\n".join(violations)


@pytest.mark.parametrize("shown", EVERY_PAGE, indirect=True)
def test_no_text_is_cut_off_at_1024x768(shown) -> None:
    clipped = shown.evaluate(CLIPPED)
    assert clipped == [], "\n".join(clipped)


@pytest.mark.parametrize("shown", ON_A_PROJECTOR, indirect=True)
def test_each_pages_figure_is_in_the_first_view_on_a_projector(shown) -> None:
    path = shown.url.split("?")[0].rpartition("/")[2]
    top = figure_top(shown, FIGURE.get(path, CHART), f"first-figure-{path or 'explore'}-projector.png")
    assert top < HEIGHT, f"/{path}: the main figure starts at y = {top:.0f}, below the first view ({HEIGHT} px)"


# The sidebar's right edge, in window pixels: at 0 or less it is folded away.
SIDEBAR_RIGHT = """() => document.querySelector('[data-testid="stSidebar"]').getBoundingClientRect().right"""


@pytest.mark.parametrize("shown", ON_A_PROJECTOR, indirect=True)
def test_a_projector_keeps_the_sidebar_folded_on_every_page(shown) -> None:
    """In projector mode the sidebar stays folded away on every page, the ones picked from the menu too (the whole
    width for the charts)."""
    right = shown.evaluate(SIDEBAR_RIGHT)
    assert right <= 0, f"{shown.url}: the sidebar is open in projector mode (its right edge at x = {right:.0f})"


@pytest.mark.parametrize("shown", FIRST_VIEW, indirect=True)
def test_the_first_figure_and_its_sentence_are_in_the_first_view(shown, request) -> None:
    """tests/test_browser_first_figure.py's check of the first view, on the visits opened here."""
    path, model, screen = request.node.callspec.params["shown"]
    query = {"model": model, **({"projector": "1"} if SCREENS[screen][2] else {})}
    problems = first_view_problems(shown, path, query, SCREENS[screen], f"{path or 'explore'}-{model}-{screen}")
    assert not problems, "; ".join(problems)


# The predictions table's cells: each cell's height against one line of its text.
CELLS = """() => [...document.querySelectorAll("[data-testid='stMain'] .atlas-table td, "
    + "[data-testid='stMain'] .atlas-table th")].map(c => {
  const s = getComputedStyle(c);
  const line = parseFloat(s.lineHeight) || 1.6 * parseFloat(s.fontSize);
  const inner = c.clientHeight - parseFloat(s.paddingTop) - parseFloat(s.paddingBottom);
  return {text: c.innerText, inner, line};
})"""


@pytest.mark.parametrize("shown", [_shown_param("", "lm-english", "plain")], indirect=True)
def test_explore_on_a_laptop_draws_a_wide_heatmap_and_an_unwrapped_table(shown) -> None:
    page = shown
    assert page.viewport_size == {"width": WIDTH, "height": HEIGHT}
    page.locator(CHART).first.wait_for()
    page.locator("[data-testid='stMain'] .atlas-table").first.wait_for()
    drawn_without_error(page)
    width = page.locator(CHART).first.evaluate("e => e.getBoundingClientRect().width")
    assert width >= 420, f"Explore's heatmap is {width:.0f} px wide at 1024×768"
    cells = page.evaluate(CELLS)
    assert cells
    wrapped = [c["text"] for c in cells if c["inner"] > 1.5 * c["line"]]
    assert not wrapped, f"cells of the predictions table wrap: {wrapped}"
    page.screenshot(path=str(SHOTS / "first-figure-explore-laptop.png"))


@pytest.mark.parametrize("model", ["lm-english", "translate-en-de"])
def test_the_text_box_is_a_few_tab_stops_from_the_page_start(server, browser, model: str) -> None:
    """From the page start, Tab reaches the text box after "skip to main content", the model, the preset and the
    text's help: the page links come after it."""
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/?model={model}")
        settle(page)
        page.get_by_role("textbox", name="Text", exact=True).wait_for()
        stops = page.evaluate(TAB_ORDER)
        assert "Text" in stops and stops.index("Text") <= 5, stops  # the sixth stop at most (it was the 19th)
    finally:
        context.close()
