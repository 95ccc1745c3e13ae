"""Accessibility: axe-core (npm `axe-core`, injected into the page) on every page of the shipped language model
and translator, in chromium at 1024×768, on each page's defaults; any serious or critical violation fails, and
headings out of order (a moderate one), named with the elements it found. scripts/test.sh fetches axe-core into
.venv/axe-core."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import test_browser

from ui.pages import PAGES as APP_PAGES

pytestmark = pytest.mark.browser
AXE = Path(os.environ.get("ATLAS_AXE", test_browser.ROOT / ".venv" / "axe-core" / "axe.min.js"))
PAGES = tuple(p.url_path for p in APP_PAGES)  # every page, the app's own list
SETTLED = """() => !document.querySelector('[data-testid="stStatusWidget"]')
    && !document.querySelector('[data-stale="true"]')
    && document.querySelector('[data-testid="stMainBlockContainer"] h1') !== null"""
TAB_ORDER = """() => [...document.querySelectorAll(
    'a[href], button:not([disabled]), input:not([disabled]):not([type=hidden]), textarea, select, [tabindex]')]
    .filter(e => e.tabIndex >= 0 && e.getClientRects().length > 0)
    .map(e => e.getAttribute('aria-label') || e.innerText.trim().split('\\n')[0])"""
RUN_AXE = """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
    .filter(v => v.impact === "serious" || v.impact === "critical" || v.id === "heading-order")
    .map(v => `${v.id} (${v.impact}): ${v.help}: ` + v.nodes.slice(0, 3).map(n => n.html.slice(0, 120)).join(" | "))"""


def settled_violations(page) -> list[str]:
    """axe-core's serious and critical violations (and heading order) on `page` once it has settled: up to three
    looks, 3 s apart, for a loaded machine can still be rerunning (faded stale text fails contrast, a sidebar being
    redrawn holds a scrollable region without its links); a violation that lasts through all three is returned."""
    page.add_script_tag(path=str(AXE))
    violations: list[str] = []
    for _ in range(3):
        page.wait_for_function(SETTLED)
        page.wait_for_timeout(1500)  # a rerun the first run started (fragments, charts) settles too
        page.wait_for_function(SETTLED)
        violations = page.evaluate(RUN_AXE)
        if not violations:
            break
        page.wait_for_timeout(3000)
    return violations


@pytest.mark.parametrize("model", ["lm-english", "translate-en-de"])
@pytest.mark.parametrize("path", PAGES, ids=[p or "explore" for p in PAGES])
def test_no_serious_accessibility_violation(server, browser, model: str, path: str) -> None:
    if not AXE.is_file():
        pytest.fail(f"{AXE} is missing: `bash scripts/test.sh` fetches axe-core from npm")
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/{path}?model={model}")
        violations = settled_violations(page)
        assert violations == [], "\n".join(violations)
    finally:
        context.close()


@pytest.mark.parametrize("model", ["lm-english", "translate-en-de"])
def test_the_text_box_is_a_few_tab_stops_from_the_page_start(server, browser, model: str) -> None:
    """From the page start, Tab reaches the text box after "skip to main content", the model, the preset and the
    text's help: the page links come after it."""
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/?model={model}")
        page.wait_for_function(SETTLED)
        page.wait_for_timeout(1500)
        page.wait_for_function(SETTLED)
        page.get_by_role("textbox", name="Text", exact=True).wait_for()
        # the order Tab walks: focusable, shown elements in document order (no positive tabindex on these pages)
        stops = page.evaluate(TAB_ORDER)
        assert "Text" in stops and stops.index("Text") <= 5, stops  # the sixth stop at most (it was the 19th)
    finally:
        context.close()
