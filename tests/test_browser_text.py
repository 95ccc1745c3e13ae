"""Text from a link and a trace file's name, in a real browser: shown as the characters typed, never read as
Markdown, so an image written into them is never fetched and a link never made (ui.markdown.literal;
tests/test_text_on_page.py checks every call that puts text where Streamlit reads Markdown)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode, urlparse

import pytest
from test_browser import ROOT, free_port, open_page

from analysis.analyze import analyze
from analysis.export import to_json
from inference.checkpoint import load_checkpoint
from ui.markdown import JOINER

pytestmark = pytest.mark.browser
PIXEL = "pixel.png"  # the image a Markdown reading would fetch
# What a Markdown reading would put on the page: an image or a link to the pixel (the menu's links keep the page's
# query, which may name it).
MADE_JS = f"""() => [...document.querySelectorAll('img[src], a[href]')]
  .filter(e => new URL(e.getAttribute('src') || e.getAttribute('href'), location.href).pathname.endsWith('/{PIXEL}'))
  .length"""


def recording(browser):
    """A new browser context and page, and the list of every request it makes for the pixel (Playwright sees a
    request even when nothing answers it)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    fetched: list[str] = []
    context.on("request", lambda r: fetched.append(r.url) if urlparse(r.url).path.endswith(f"/{PIXEL}") else None)
    page = context.new_page()
    page.set_default_timeout(90_000)
    return context, page, fetched


def shown_as_typed(element, typed: str) -> None:
    """`element` shows `typed`, letter for letter (less the invisible word joiner inside a bare link)."""
    element.wait_for()
    shown = element.inner_text().replace(JOINER, "")
    assert typed in shown, shown


def test_a_link_whose_text_holds_an_image_shows_it_as_typed_and_fetches_nothing(server, browser) -> None:
    typed = f"![x](http://127.0.0.1:{free_port()}/{PIXEL})"  # a port nothing listens on: the request is the proof
    context, page, fetched = recording(browser)
    try:
        page.goto(f"{server}/?{urlencode({'model': 'induction', 'text': f'the cat {typed}'})}")
        note = page.locator('[data-testid="stMain"] [data-testid^="stAlertContent"]').filter(has_text="vocabulary")
        shown_as_typed(note.first, typed)  # the words outside the vocabulary, named in the note
        assert page.evaluate(MADE_JS) == 0 and not fetched, fetched
    finally:
        context.close()


def test_a_trace_file_named_with_an_image_shows_its_name_as_typed_on_every_page(
    server, browser, tmp_path: Path
) -> None:
    name = f"![x]({PIXEL}).json"  # a file name holds no '/': the image is relative to the page
    trace = tmp_path / name
    analysis = analyze(load_checkpoint(ROOT / "checkpoints" / "lm-english"), "The children walked to school.")
    trace.write_text(to_json(analysis), encoding="utf-8")  # Explore's "Whole analysis as JSON"
    context, page, fetched = recording(browser)
    try:
        page.goto(f"{server}/trace")
        page.get_by_role("heading", name="Open a trace file").wait_for()
        page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(trace))
        sidebar = page.locator('[data-testid="stSidebar"]')
        toggle = sidebar.locator('[data-testid="stCheckbox"]').filter(has_text="Draw the trace file")
        toggle.locator('[data-testid="stTooltipIcon"]').hover()
        shown_as_typed(page.locator('[data-testid="stTooltipContent"]').filter(has_text="draw the attention in"), name)
        open_page(page, "Masks")
        page.get_by_role("heading", name="Masks").wait_for()
        shown_as_typed(page.locator('[data-testid="stCaptionContainer"]').filter(has_text="the trace file").first, name)
        open_page(page, "Compare two inputs")
        page.get_by_role("heading", name="Compare two inputs").wait_for()
        shown_as_typed(page.locator('[data-testid="stWidgetLabel"]').filter(has_text="Second trace file").first, name)
        assert page.evaluate(MADE_JS) == 0 and not fetched, fetched
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        context.close()
