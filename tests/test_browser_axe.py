"""Every page of the shipped language model and translator, in chromium at 1024×768, in plain and in projector
mode, on each page's defaults; each page is opened once and checked twice:

- accessibility: axe-core (npm `axe-core`, injected into the page; scripts/test.sh fetches it into .venv/axe-core):
  any serious or critical violation fails, and headings out of order (a moderate one), named with the elements it
  found;
- nothing cut off: no element clips its own text (a box narrower or shorter than the text it holds, with its
  overflow hidden or an ellipsis). Data grids scroll and charts wrap their titles (tests/test_browser_projector.py).
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from browser_support import CLIPPED, TAB_ORDER, settle, settled_violations

from ui.pages import PAGES as APP_PAGES

pytestmark = pytest.mark.browser
PAGES = tuple(p.url_path for p in APP_PAGES)  # every page, the app's own list
MODELS = ("lm-english", "translate-en-de")
SHOWN = [(path, model, projector) for path in PAGES for model in MODELS for projector in (False, True)]


def _shown_param(path: str, model: str, projector: bool):
    name = f"{path or 'explore'}-{model}-{'projector' if projector else 'plain'}"
    # one xdist group a page: under `--dist loadgroup` (scripts/test.sh) both of its checks run on the one worker
    return pytest.param((path, model, projector), id=name, marks=pytest.mark.xdist_group(f"page-{name}"))


@pytest.fixture(scope="module", params=[_shown_param(*one) for one in SHOWN])
def shown(request, server, browser):
    """The page of this (path, model, projector mode) at 1024×768, opened once and settled: pytest runs every test
    that reads it before it opens the next (and pytest-xdist runs them on one worker)."""
    path, model, projector = request.param
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        query = {"model": model, **({"projector": "1"} if projector else {})}
        page.goto(f"{server}/{path}?{urlencode(query)}")
        settle(page)
        yield page
    finally:
        context.close()


def test_no_serious_accessibility_violation(shown) -> None:
    violations = settled_violations(shown, settled=True)
    assert violations == [], "\n".join(violations)


def test_no_text_is_cut_off_at_1024x768(shown) -> None:
    clipped = shown.evaluate(CLIPPED)
    assert clipped == [], "\n".join(clipped)


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
