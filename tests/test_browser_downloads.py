"""Figures for a paper, from the app in chromium: the chart toolbar's camera downloads the head as an SVG (vector,
parsed here), and Explore's "All heads as one HTML file" downloads a page that draws every head with the network
blocked (plotly.js inside it, no CDN)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from browser_support import SETTLED

pytestmark = pytest.mark.browser


def test_the_camera_saves_svg_and_the_grid_saves_an_offline_page(server, browser, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": 1600, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/?model=lm-english")
        page.wait_for_function(SETTLED)
        chart = page.locator(".st-key-head_chart .js-plotly-plot")
        chart.wait_for(state="visible")
        chart.hover()
        with page.expect_download() as svg:
            page.locator(".st-key-head_chart").get_by_role("button", name="Download plot").click()
        path = tmp_path / svg.value.suggested_filename
        svg.value.save_as(path)
        assert path.suffix == ".svg"
        root = ET.parse(path).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.findall(".//{http://www.w3.org/2000/svg}image")
        button = page.get_by_role("button", name="All heads as one HTML file (opens offline)")
        button.scroll_into_view_if_needed()
        with page.expect_download() as html:
            button.click()
        page_file = tmp_path / html.value.suggested_filename
        html.value.save_as(page_file)
        assert page_file.suffix == ".html" and '<script src="http' not in page_file.read_text(encoding="utf-8")
        offline = browser.new_context(offline=True)
        try:
            view = offline.new_page()
            view.route(
                "**/*", lambda route: route.abort() if not route.request.url.startswith("file:") else route.continue_()
            )
            view.goto(page_file.as_uri())
            view.locator(".js-plotly-plot .heatmaplayer").first.wait_for(state="attached", timeout=30_000)
            layers = view.evaluate("() => document.querySelector('.js-plotly-plot').data.length")
            assert layers >= 1
        finally:
            offline.close()
    finally:
        context.close()
