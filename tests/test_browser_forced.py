"""Forced decoding in a real browser: a reference translation typed on the translator's Explore page gives the
table of each token's probability and rank, and the strip of its tokens with their percentages."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from test_browser import SHOTS, heatmap

pytestmark = pytest.mark.browser


def test_a_typed_reference_translation_shows_each_tokens_probability(server, browser) -> None:
    context = browser.new_context(viewport={"width": 1024, "height": 768})  # the projector's size
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/?{urlencode({'model': 'translate-en-de', 'text': 'The cat sat on the mat.'})}")
        heatmap(page)  # the model's own output drawn first: the app is ready for input
        box = page.get_by_role("textbox", name="Reference translation", exact=True)
        box.fill("Die Katze saß auf der Matte.")
        box.press("Enter")
        table = page.locator('[data-testid="stDataFrame"]').filter(has=page.get_by_text("model's choice"))
        table.first.wait_for()
        strip = page.locator(".stPlotlyChart:visible").filter(has_text="How sure")  # the layout that fits, shown
        strip.first.wait_for()
        cells = strip.first.locator("text").all_text_contents()
        assert any("Katze" in c for c in cells) and any(c.endswith("%") for c in cells), cells
        assert "reference=" in page.url  # the link keeps it
        page.get_by_text("Reference, fed to the decoder").wait_for()  # Explore's heads: the forced run
        table.first.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "forced-reference.png"), full_page=True)
    finally:
        context.close()
