"""The Paper view in a real browser (Playwright, Debian's headless chromium) on the shipped checkpoints: the paper's
sentence with every head of a layer, one legend entry per head, lines with gaps between segments; screenshots at
two window sizes go to screenshots/ (git-ignored)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
import test_browser

from inference.catalog import PAPER_SENTENCES

pytestmark = pytest.mark.browser
SIZES = {"paper.png": (1600, 1000), "paper-1024x768.png": (1024, 768)}


def open_paper(browser, size: tuple[int, int], **query: str):
    """A page of the given window size on /paper, once its chart is drawn."""
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{query.pop('server')}/paper?{urlencode(query)}")
    page.locator(".stPlotlyChart .scatterlayer .js-line").first.wait_for(state="attached")
    return context, page


def legend_names(page) -> list[str]:
    return page.locator(".stPlotlyChart .legend .traces .legendtext").all_text_contents()


@pytest.mark.parametrize("shot", list(SIZES))
def test_paper_sentence_every_head_of_a_layer(server, browser, shot: str) -> None:
    query = {"model": "translate-en-de", "text": PAPER_SENTENCES[1], "attention": "encoder.self_attn"}
    context, page = open_paper(browser, SIZES[shot], server=server, **query, L="3", H="all")
    try:
        assert legend_names(page) == [f"head {h}" for h in range(1, 9)]
        # One SVG path per (head, opacity bucket), not one per line: thousands of paths redrew in seconds.
        paths = page.locator(".stPlotlyChart .scatterlayer .js-line").count()
        assert 8 <= paths <= 8 * 20, paths
        ticks = page.locator(".stPlotlyChart .ytick text").all_text_contents()
        assert any("Law" in t for t in ticks) and any("opinion" in t for t in ticks), ticks
        assert page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count() == 0
        page.wait_for_timeout(500)
        page.screenshot(path=str(test_browser.SHOTS / shot), full_page=True)
    finally:
        context.close()


def test_one_head_and_one_token_of_the_language_model(server, browser) -> None:
    query = {"model": "lm-english", "text": PAPER_SENTENCES[0], "L": "2", "H": "1"}
    context, page = open_paper(browser, (1400, 1000), server=server, **query)
    try:
        assert legend_names(page) == ["head 1"]
        test_browser.choose(page, "Lines of", "4:▁in")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.gtitle')].some(t => t.textContent.includes('query 4:'))"
        )
        assert page.locator(".stPlotlyChart .ytick text").filter(has_text="▁in").count() >= 1
        page.screenshot(path=str(test_browser.SHOTS / "paper-one-token.png"), full_page=True)
    finally:
        context.close()
