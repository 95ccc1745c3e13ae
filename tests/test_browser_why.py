"""Why and fork in chromium at 1024×768 on the shipped language model and translator: Attention math's score
split (switched on by its link), Generate's fork (a candidate chosen by its link) and, on the language model (a
translator has no next token to explain), Logit attribution's methods compared (after its button): drawn, axe-core
clean (serious, critical and heading order), no text cut off, and their controls reachable by the keyboard. One
page load each. (Compare's second model: tests/test_browser_circuits.py.)"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from browser_support import CLIPPED, SHOTS, TAB_ORDER, settle, settled_violations

pytestmark = pytest.mark.browser
SHOWN = [
    ("math", "lm-english", {"why": "1"}, "why_chart", "Key token"),
    ("math", "translate-en-de", {"why": "1", "attention": "decoder.cross_attn"}, "why_chart", "Key token"),
    (
        "generate",
        "lm-english",
        {"gen_mode": "greedy", "gen_tokens": "8", "gen_fork": "2"},
        "fork_forked_self_attn",
        "Write instead",
    ),
    ("generate", "translate-en-de", {"gen_fork": "2"}, "fork_forked_self_attn", "Write instead"),
    ("attribution", "lm-english", {}, "agreement_corr", "Compare the methods (about 96 passes)"),
]
PRESSED = {"agreement_corr": "Compare the methods"}  # a section drawn after its button (about 96 passes)


@pytest.mark.parametrize(("path", "model", "query", "element", "control"), SHOWN, ids=[f"{s[0]}-{s[1]}" for s in SHOWN])
def test_the_section_is_drawn_accessible_and_whole(server, browser, path, model, query, element, control) -> None:
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/{path}?{urlencode({'model': model, **query})}")
        settle(page)
        if element in PRESSED:
            page.get_by_role("button", name=PRESSED[element]).first.click()
            settle(page)
        page.wait_for_selector(f".st-key-{element}")
        settle(page)
        SHOTS.mkdir(exist_ok=True)
        # the fork's table sits under the two continuations, the first of them headed "After the likeliest"
        shown = page.get_by_text("After the likeliest") if path == "generate" else page.locator(f".st-key-{element}")
        shown.first.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"why-{path}-{model}.png"))  # looked at by hand: the title, the blank cells
        assert control in page.evaluate(TAB_ORDER)
        violations = settled_violations(page, settled=True)
        assert violations == [], "\n".join(violations)
        clipped = page.evaluate(CLIPPED)
        assert clipped == [], "\n".join(clipped)
    finally:
        context.close()
