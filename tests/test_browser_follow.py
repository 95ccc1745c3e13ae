"""A choice follows the person from page to page, in a real browser (`streamlit run app.py` on the shipped
checkpoints, headless chromium): the attention type, layer and head picked on Explore are still picked on Paper view,
Attention math, Masks, Rollout and back on Explore, and the address bar says them as the pickers do (L=3&H=5 for
"layer 3, head 5"); a link made with the former 0-based parameters opens the same head."""

from __future__ import annotations

from urllib.parse import parse_qs, quote, urlparse

import pytest
import test_browser
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from test_browser import open_page

pytestmark = pytest.mark.browser
TEXT = "The cat sat on the mat because it was warm."
ROUND = ["Paper view", "Attention math", "Masks", "Attention rollout", "Explore"]
HAS_HEAD_PICKER = {"Explore", "Paper view", "Attention math"}

# True once the page's script run is over: no element left from the run before, and the status widget idle.
SETTLED_JS = """() => !document.querySelector('[data-stale="true"]')
  && !document.querySelector('[data-testid="stStatusWidgetRunningIcon"]')"""


def settle(page, title: str) -> None:
    """Wait for the page titled `title` to be drawn and its run to be over (pickers and address bar written)."""
    page.get_by_role("heading", name=title, exact=True).wait_for()
    page.locator(".stPlotlyChart .main-svg").first.wait_for(state="attached")
    page.wait_for_function(SETTLED_JS)


def go(page, title: str) -> None:
    """Open page `title` from the menu at the top, as a person does (the session and its choices stay)."""
    open_page(page, title)
    settle(page, title)


def picked(page, label: str) -> str:
    """The option shown in the selectbox labelled `label`."""
    return page.locator(f'input[role="combobox"][aria-label="{label}"]').first.input_value()


def selected(page, label: str) -> str:
    """The option selected in the radio group labelled `label`."""
    return page.locator(f'[role="radiogroup"][aria-label="{label}"] label[data-selected="true"]').first.inner_text()


def url(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query).items()}


def choose_and_settle(page, label: str, option: str) -> None:
    test_browser.choose(page, label, option)
    page.wait_for_function(
        "([l, o]) => { const e = document.querySelector(`input[aria-label='${l}']`); return e && e.value === o; }",
        arg=[label, option],
    )
    settle(page, "Explore")


ADDRESS_HOLDS = """(want) => {
  const query = new URLSearchParams(location.search);
  return Object.entries(want).every(([key, value]) => query.get(key) === value); }"""


def wait_for_address(page, expected: dict[str, str]) -> None:
    """Until the address bar holds `expected` (the page writes it at the end of its run, after the menu's move has
    put the bare page's address there; on a loaded machine the two arrive apart), or 30 s: the check after says what
    it holds."""
    try:
        page.wait_for_function(ADDRESS_HOLDS, arg=expected, timeout=30_000)
    except PlaywrightTimeout:
        pass


def round_trip(page, attention_label: str, layer: str, head: str, expected_url: dict[str, str]) -> None:
    """Visit every page of ROUND and check, on each, the pickers it shows and the address bar."""
    for title in ROUND:
        go(page, title)
        wait_for_address(page, expected_url)
        shown = url(page)
        assert {k: shown.get(k) for k in expected_url} == expected_url, (title, page.url)
        assert "layer" not in shown and "head" not in shown, (title, page.url)  # the 1-based names only
        if title in HAS_HEAD_PICKER:
            assert (picked(page, "Layer"), picked(page, "Head")) == (layer, head), title
            assert selected(page, "Attention") == attention_label, title


def test_layer_and_head_of_the_language_model_follow_every_page(server, page) -> None:
    page.goto(f"{server}/?model=lm-english&text={quote(TEXT)}")
    settle(page, "Explore")
    choose_and_settle(page, "Layer", "layer 3")
    choose_and_settle(page, "Head", "head 5")
    expected = {"model": "lm-english", "attention": "decoder.self_attn", "L": "3", "H": "5"}
    round_trip(page, "Self-attention (masked)", "layer 3", "head 5", expected)


def test_encoder_self_attention_of_the_translator_follows_every_page(server, page) -> None:
    page.goto(f"{server}/?model=translate-en-de&text={quote(TEXT)}")
    settle(page, "Explore")
    page.locator('[role="radiogroup"][aria-label="Attention"]').get_by_text("Encoder self-attention").click()
    page.wait_for_function("() => new URLSearchParams(location.search).get('attention') === 'encoder.self_attn'")
    settle(page, "Explore")
    choose_and_settle(page, "Layer", "layer 2")
    choose_and_settle(page, "Head", "head 3")
    expected = {"model": "translate-en-de", "attention": "encoder.self_attn", "L": "2", "H": "3"}
    round_trip(page, "Encoder self-attention", "layer 2", "head 3", expected)
    go(page, "Attention rollout")  # the rollout's attention is the same choice: picked there, it follows back
    assert selected(page, "Rollout of") == "Encoder (source → source)"
    page.get_by_text("Decoder self-attention (output → output)").click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.gtitle')].some(t => t.textContent.includes('Rollout: Decoder self'))"
    )
    settle(page, "Attention rollout")
    assert url(page).get("attention") == "decoder.self_attn"
    go(page, "Explore")
    assert selected(page, "Attention") == "Decoder self-attention (masked)"
