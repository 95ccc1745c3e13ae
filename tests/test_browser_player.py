"""Play in a real browser (ui.player): Streamlit's own timer reruns the playing fragment, which AppTest cannot show.
One page load: Training steps of the shipped reversal model, in projector mode at 1024×768, played by keyboard from
the first snapshot until it stops by itself at the last; the controls are axe-clean."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from browser_support import settled_violations
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from test_browser import ROOT

from inference.snapshots import list_snapshots

pytestmark = pytest.mark.browser

# Whether a chart's title names `s`, its white space left out (a wrapped title's lines join without any).
TITLE_SHOWS_JS = """s => [...document.querySelectorAll('.stPlotlyChart .gtitle')]
  .some(t => t.textContent.replace(/\\s+/g, '').includes(s))"""

# Every 100 ms, the step the chosen head's title names, appended when it changes.
WATCH_JS = """() => { window.stepsSeen = [];
  setInterval(() => {
    const title = document.querySelector('.stPlotlyChart .gtitle');
    const m = title && title.textContent.match(/step\\s*([\\d,]+)\\s*·/);
    if (m && window.stepsSeen[window.stepsSeen.length - 1] !== m[1]) window.stepsSeen.push(m[1]);
  }, 100); }"""


def test_training_steps_play_by_keyboard_to_the_last_snapshot_and_stop(server, browser) -> None:
    steps = [s.step for s in list_snapshots(ROOT / "checkpoints" / "reverse")]
    assert len(steps) >= 3, "checkpoints/reverse ships its training snapshots"
    query = {"model": "reverse", "text": "abcdefghij", "projector": "1", "step": str(steps[0])}
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/training?{urlencode(query)}")
        page.get_by_role("heading", name="Training steps").wait_for()
        page.wait_for_function(TITLE_SHOWS_JS, arg=f"step{steps[0]:,}·")
        page.evaluate(WATCH_JS)  # from now on, every step the head's title names, in the order shown
        play = page.get_by_role("button", name="Play", exact=True)  # named in words, not by its icon
        play.focus()
        page.keyboard.press("Enter")
        page.get_by_role("button", name="Pause", exact=True).wait_for()
        page.get_by_role("button", name="Play", exact=True).wait_for(timeout=30_000 + 3_000 * len(steps))
        try:
            page.wait_for_function(TITLE_SHOWS_JS, arg=f"step{steps[-1]:,}·", timeout=30_000)  # stopped at the last
        except PlaywrightTimeout:
            pytest.fail(f"stopped, but not at step {steps[-1]:,}: seen {page.evaluate('() => window.stepsSeen')}")
        seen = [int(s.replace(",", "")) for s in page.evaluate("() => window.stepsSeen")]
        assert seen == steps, "every snapshot in turn, one a tick, and none after the last"
        assert page.get_by_role("button", name="Next", exact=True).is_disabled()
        shown = page.evaluate("() => new URL(location.href).searchParams.get('step')")
        assert shown == str(steps[-1]), "the address bar follows the step played"
        assert not settled_violations(page)
    finally:
        context.close()
