"""End to end in a real browser: `streamlit run app.py` driven by Playwright in Debian's headless chromium.

Load, type a sentence, see the heatmap and the predictions, switch head, hover a cell; a screenshot of every
page goes to screenshots/ (git-ignored).
"""

from __future__ import annotations

import re
from functools import partial
from urllib.parse import quote

import pytest
from browser_support import ROOT, SHOTS, free_port, hold_still, open_from_menu, page_in_tab  # noqa: F401 - other browser modules read these here

pytestmark = pytest.mark.browser
PAGES = {"explore": "", "math": "math", "positional": "positional", "masks": "masks", "heads": "heads"}


def heatmap(page):
    """The one-head chart: the first plotly chart on Explore, once its heatmap image is painted."""
    chart = page.locator(".stPlotlyChart").first
    chart.locator(".heatmaplayer image, .heatmaplayer .hm").first.wait_for(state="attached")
    return chart


def open_page(page, title: str) -> None:
    """Open page `title` from the menu at the top, as a person does (the session and its choices stay): its link,
    or its section's drop-down and then the link inside, or "N more" first when the menu is too narrow for the
    section."""
    from ui.pages import PAGES

    menu = page.locator('[data-testid="stTopNav"]')
    section = next(p.section for p in PAGES if p.title == title)
    if section:
        button = menu.get_by_role("button", name=section, exact=True)
        if not button.is_visible():
            menu.get_by_role("button", name=re.compile(r"^\d+ more$")).click()
        button = page.get_by_role("button", name=section, exact=True).last
        button.click()
        page.get_by_role("menuitem", name=title, exact=True).click()
    else:
        menu.get_by_role("link", name=title, exact=True).click()


def choose(page, label: str, option: str, tries: int = 4) -> None:
    """Pick `option` in the Streamlit selectbox labelled `label`. A rerun that redraws the box while its list is
    open closes the list (a loaded machine makes that likely just after a page loads): open it again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    box = page.locator('[data-testid="stSelectbox"]').filter(has_text=label).first
    for attempt in range(tries):
        box.click()
        try:
            page.get_by_role("option", name=option, exact=True).click(timeout=15_000)
            return
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise
            page.keyboard.press("Escape")


def test_type_a_sentence_and_see_heatmap_and_predictions(server, page) -> None:
    page.goto(f"{server}/?model=lm-english")
    heatmap(page)  # the preset sentence's heatmap first: the app is ready for input
    box = page.get_by_role("textbox", name="Text", exact=True)
    box.fill("My friends went to the market together.")
    box.press("Control+Enter")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.stPlotlyChart .xtick text')].some(t => t.textContent.includes('market'))"
    )
    ticks = heatmap(page).locator(".xtick text").all_text_contents()
    assert any("market" in t for t in ticks), ticks
    predictions = page.locator("table.atlas-table").filter(has_text="probability")  # an HTML table
    predictions.first.wait_for()
    assert predictions.first.get_by_role("columnheader", name="probability").count() == 1
    page.screenshot(path=str(SHOTS / "explore.png"), full_page=True)


def test_switching_head_redraws_and_hover_reads_query_to_key_weight(server, page) -> None:
    page.goto(f"{server}/?model=lm-english&text=The%20cat%20sat%20on%20the%20mat.")
    chart = heatmap(page)
    title_before = chart.locator(".gtitle").text_content()
    choose(page, "Head", "head 3")
    page.wait_for_function(
        "b => { const t = document.querySelector('.stPlotlyChart .gtitle'); return t && t.textContent !== b; }",
        arg=title_before,
    )
    assert "head 3" in heatmap(page).locator(".gtitle").text_content()
    box = chart.locator(".nsewdrag").first.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.1, box["y"] + box["height"] * 0.9)
    hover = page.locator(".hoverlayer .hovertext").first
    hover.wait_for()
    # position and piece of both ends, from 1 as the axes count: "query 8:▁. → key 1:<s>: 0.123"
    text = hover.text_content().strip()
    assert re.fullmatch(r"query \d+:\S+ → key 1:\S+: [01]\.\d{3}", text), text


def test_translation_model_shows_its_output(server, page) -> None:
    page.goto(f"{server}/?model=translate-en-de&text=Where%20is%20the%20station%3F")
    heatmap(page)
    page.get_by_text("Model output").wait_for()


def drawn_without_error(page) -> None:
    """Every chart drawn (not just its placeholder), then no exception and no error message on the page."""
    page.wait_for_function(
        "() => [...document.querySelectorAll('.stPlotlyChart')].every(c => c.querySelector('.main-svg'))"
    )
    hold_still(page)  # an error a rerun draws after the charts shows before the page holds still
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0


@pytest.mark.xdist_group("tab-reverse-pages")  # one tab, walked on one worker
@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_renders_without_error(server, browser, tabs, name: str) -> None:
    """The pages in one tab, the first opened at its address, every next from the menu."""
    address = f"{server}/{PAGES[name]}?model=reverse&text=abcdef"
    page = page_in_tab(tabs, "reverse", browser, address, partial(open_from_menu, path=PAGES[name]), 1400, 1000)
    page.locator(".stPlotlyChart, [data-testid='stDataFrame']").first.wait_for()
    drawn_without_error(page)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_compare_draws_a_minimal_pair_on_the_translator(server, page) -> None:
    first = "The animal didn't cross the street because it was too tired."
    second = "The animal didn't cross the street because it was too wide."
    page.goto(f"{server}/compare?model=translate-en-de&text={quote(first)}&compare={quote(second)}")
    page.locator(".stPlotlyChart").nth(1).wait_for()
    drawn_without_error(page)
    assert page.locator(".stPlotlyChart").count() >= 2  # both heads (and the difference when the tokens align)
    page.screenshot(path=str(SHOTS / "compare.png"), full_page=True)


@pytest.mark.parametrize("model", ["lm-english", "translate-en-de"])
def test_generate_writes_and_shows_a_step(server, page, model: str) -> None:
    page.goto(f"{server}/generate?model={model}&text={quote('The capital of France is')}")
    page.locator(".stPlotlyChart:visible").nth(1).wait_for()  # a reflowed strip's other layout is hidden
    drawn_without_error(page)
    assert page.get_by_text("Self-attention of step").count() >= 1
    page.screenshot(path=str(SHOTS / f"generate-{model}.png"), full_page=True)


def test_ablation_page_renders_and_ranks_heads(server, page) -> None:
    page.goto(f"{server}/ablation?model=lm-english&text={quote('The cat sat on the')}")
    page.get_by_text("KL divergence").first.wait_for()
    page.locator('[data-testid="stDataFrame"]').nth(1).wait_for()  # top-k intact and ablated
    page.get_by_role("button", name="Rank every head").click()
    page.locator('[data-testid="stDataFrame"]').nth(2).wait_for(timeout=60_000)  # the ranking (a canvas: no text)
    page.wait_for_timeout(1000)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0
    page.screenshot(path=str(SHOTS / "ablation.png"), full_page=True)
