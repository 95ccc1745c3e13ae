"""The circuit views in chromium at 1024×768, on the shipped language model, translator and induction model:
Logit attribution on its defaults, Compare's activation patching after its button, Head statistics' detector and
its composition on its defaults, and the weight × value norm switch on Explore — each draws its chart, cuts no text
and passes axe-core (no serious violation)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
import test_browser
from test_browser_axe import SETTLED, settled_violations
from test_browser_overflow import CLIPPED

pytestmark = pytest.mark.browser
server = test_browser.server  # the same module-scoped streamlit server on the shipped checkpoints
browser = test_browser.browser
REPEATED = "freedom election movies garden river freedom election movies garden"
CHANGED = "freedom election movies garden river window science market doctor"
VIEWS = [
    ("attribution", {"model": "lm-english"}, None, "attribution_heads"),
    ("attribution", {"model": "translate-en-de"}, None, "attribution_heads"),
    ("attribution", {"model": "induction"}, None, "logit_lens"),
    ("compare", {"model": "induction", "text": REPEATED, "compare": CHANGED}, "Patch (8 patched runs)", "patching"),
    ("compare", {"model": "lm-english", "patch": "residual"}, "Patch", "patching"),
    ("heads", {"model": "induction", "detect": "induction"}, None, "detector"),
    ("heads", {"model": "lm-english"}, None, "composition"),
    ("heads", {"model": "translate-en-de"}, None, "composition"),
    ("", {"model": "translate-en-de", "weighting": "norms"}, None, "head_chart"),
    ("", {"model": "lm-english", "weighting": "norms"}, None, "head_chart"),
    ("", {"model": "induction", "weighting": "norms"}, None, "head_chart"),
]


@pytest.mark.parametrize(("path", "query", "button", "chart"), VIEWS, ids=[f"{v[0]}-{v[1]['model']}" for v in VIEWS])
def test_each_circuit_view_draws_whole_and_accessible(server, browser, path, query, button, chart) -> None:
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/{path}?{urlencode(query)}")
        page.wait_for_function(SETTLED)
        if button is not None:
            page.get_by_role("button", name=button).first.click()
            page.wait_for_timeout(500)
        page.wait_for_function(SETTLED)
        page.wait_for_timeout(1500)
        page.wait_for_function(SETTLED)
        holder = page.locator(f".st-key-{chart}")
        holder.scroll_into_view_if_needed()  # a chart below the fold is drawn when it comes into view
        page.locator(f".st-key-{chart} .js-plotly-plot").wait_for(state="visible", timeout=30_000)
        assert page.get_by_text("Something went wrong").count() == 0
        clipped = page.evaluate(CLIPPED)
        assert clipped == [], "\n".join(clipped)
        violations = settled_violations(page)
        assert violations == [], "\n".join(violations)
    finally:
        context.close()
