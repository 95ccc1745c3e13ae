"""The induction model in a real browser: Training steps shows the offset diagonal appear across the snapshots and
the copying curve, Head statistics names the induction head. Screenshots at 1600 wide and 1024×768 go to
screenshots/ (git-ignored)."""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np
import pytest
from test_browser import ROOT, SHOTS
from test_browser_training import MATRICES_JS

from inference.checkpoint import load_checkpoint
from inference.snapshots import list_snapshots

pytestmark = pytest.mark.browser
RUN = "red blue green black white water fire earth light red blue green black white water fire earth light"
FOLDER = ROOT / "checkpoints" / "induction"


def offset_diagonal(weights: np.ndarray, length: int) -> float:
    """The mean weight of the second run's queries on the token after their earlier occurrence."""
    t = np.arange(length + 1, 2 * length + 1)
    return float(weights[t, t - length + 1].mean())


@pytest.mark.parametrize("size", [(1600, 1000), (1024, 768)])
def test_training_steps_show_the_induction_head_forming(server, browser, size: tuple[int, int]) -> None:
    saved = list_snapshots(FOLDER)
    length = len(RUN.split()) // 2
    query = {"model": "induction", "text": RUN, "attention": "decoder.self_attn", "L": "2", "H": "1"}
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/training?{urlencode({**query, 'step': saved[-1].step})}")
        page.get_by_role("heading", name="Learning to copy from the context").wait_for()
        maps = page.wait_for_function(MATRICES_JS, arg=1 + len(saved)).json_value()
        strip = [np.asarray(m) for m in maps[1:]]
        assert len(strip) == len(saved)
        first, last = offset_diagonal(strip[0], length), offset_diagonal(strip[-1], length)
        assert first < 0.2 and last > 0.8, (first, last)  # the head learned to look at what came next last time
        curve = page.locator(".stPlotlyChart").filter(has_text="induction score")
        curve.first.wait_for()
        page.screenshot(path=str(SHOTS / f"training-induction-{size[0]}.png"), full_page=True)
    finally:
        context.close()


def test_head_statistics_name_the_induction_head(server, browser) -> None:
    card = load_checkpoint(FOLDER).card["metrics"]["induction"]["best_induction_head"]
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/heads?{urlencode({'model': 'induction', 'text': RUN})}")
        page.get_by_text(f"the best is layer {card['layer']}, head {card['head']}").wait_for()
        page.screenshot(path=str(SHOTS / "heads-induction.png"), full_page=True)
    finally:
        context.close()
