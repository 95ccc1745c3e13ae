"""The circuit views in chromium at 1024×768, on the shipped language model, translator and induction model:
Logit attribution on its defaults and its methods compared after their button, Compare's activation patching after
its button and another model beside the first, Head statistics' detector and its composition on its defaults, and
the weight × value norm switch on Explore — each draws its chart, cuts no text and passes axe-core (no serious
violation)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from browser_support import CLIPPED, SETTLED, settle, settled_violations

pytestmark = pytest.mark.browser
REPEATED = "freedom election movies garden river freedom election movies garden"
CHANGED = "freedom election movies garden river window science market doctor"
VIEWS = [
    ("attribution", {"model": "lm-english"}, None, "attribution_heads"),
    ("attribution", {"model": "translate-en-de"}, None, "attribution_heads"),
    ("attribution", {"model": "induction"}, None, "logit_lens"),
    ("compare", {"model": "induction", "text": REPEATED, "compare": CHANGED}, "Patch (8 patched runs)", "patching"),
    ("compare", {"model": "lm-english", "patch": "residual"}, "Patch", "patching"),
    ("attribution", {"model": "induction", "text": REPEATED}, "Compare the methods", "agreement_corr"),
    ("compare", {"model": "lm-english", "compare_with": "model", "compare_model": "induction"}, None, "compare_second"),
    ("compare", {"model": "translate-en-de", "compare_with": "model"}, None, "compare_second"),  # beside reverse
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
            page.get_by_role("button", name=button).first.click()  # puts up the status widget at once: a rerun
        settle(page)
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


LONG = "The cat sat on the mat and looked at the birds in the garden. " * 14  # about 240 tokens


def test_cancel_stops_a_long_patching_and_the_page_draws_without_it(server, browser) -> None:
    """The residual stream patched at every layer and position of a 240-token pair is about 1,400 runs in 90
    chunks: its bar has a Cancel button, and pressing it stops the job, leaving the page as it was before."""
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    query = {"model": "lm-english", "text": LONG, "compare": LONG.replace("cat", "dog", 1), "patch": "residual"}
    try:
        page.goto(f"{server}/compare?{urlencode(query)}")
        page.wait_for_function(SETTLED)
        page.get_by_role("button", name="Patch (").first.click()
        cancel = page.get_by_role("button", name="Cancel")
        cancel.wait_for(state="visible")
        page.get_by_text("Patching").first.wait_for()  # its bar's text, drawn beside the button
        cancel.click()
        # the button goes with the rerun the click starts (SETTLED can still hold in the moment before it begins); a
        # job that ran to its end would draw its chart, which the assertions below rule out
        page.get_by_role("button", name="Cancel").wait_for(state="detached", timeout=240_000)
        page.wait_for_function(SETTLED, timeout=240_000)  # the page run again without the job, every stale part gone
        shown = page.locator("[data-testid='stMainBlockContainer']").inner_text()[-600:]
        assert page.get_by_role("button", name="Cancel").count() == 0, shown
        assert page.locator(".st-key-patching").count() == 0, shown  # no chart: the job stopped before its end
        assert page.get_by_role("button", name="Patch (").count() == 1, shown  # and it can be asked again
        assert page.get_by_text("Something went wrong").count() == 0, shown
    finally:
        context.close()
