"""The Training steps page in a real browser on the shipped models that ship their training snapshots (the reversal
model's in float16, the LM's in 4 bits with the shipped weights as the last step): the chosen step's head is drawn
with the weights that snapshot computes, and the strip shows one heatmap per snapshot; screenshots at 1600 wide and
1024×768 go to screenshots/ (git-ignored)."""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np
import pytest
import torch
from test_browser import ROOT, SHOTS

from analysis.analyze import analyze
from analysis.induction import head_scores
from inference.checkpoint import load_checkpoint
from inference.snapshots import list_snapshots, load_snapshot

pytestmark = pytest.mark.browser
TEXT = "abcdefghij"

# Every drawn heatmap's matrix (plotly.js's calculated z, typed arrays decoded), once all are painted.
MATRICES_JS = """n => {
  const plots = [...document.querySelectorAll('.stPlotlyChart .js-plotly-plot')];
  const maps = plots.flatMap(gd => (gd.calcdata || []).filter(c => c[0] && c[0].z && c[0].trace.type === 'heatmap')
    .map(c => c[0].z.map(row => Array.from(row))));
  return maps.length >= n ? maps : null;
}"""


SHOWN = {  # model: (text, attention, layer, the sub-layer's name)
    "reverse": (TEXT, "decoder.cross_attn", 1, "decoder.layers.1.cross_attn"),
    "lm-english": ("The children walked to school in the rain", "decoder.self_attn", 2, "decoder.layers.2.self_attn"),
}


@pytest.mark.parametrize("model", list(SHOWN))
@pytest.mark.parametrize("size", [(1600, 1000), (1024, 768)])
def test_a_head_at_each_saved_step(server, browser, size: tuple[int, int], model: str) -> None:
    text, attention, layer, sublayer = SHOWN[model]
    folder = ROOT / "checkpoints" / model
    saved = list_snapshots(folder)
    assert len(saved) >= 3, f"checkpoints/{model} ships its training snapshots"
    step = saved[-1].step
    query = {"model": model, "text": text, "attention": attention, "L": str(layer + 1), "H": "1"}
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/training?{urlencode({**query, 'step': step})}")
        page.get_by_role("heading", name="Training steps").wait_for()
        maps = page.wait_for_function(MATRICES_JS, arg=1 + len(saved)).json_value()
        ckpt = load_checkpoint(folder)
        target = analyze(ckpt, text).output_text  # every step's decoder reads the shipped model's output
        expected = [analyze(load_snapshot(ckpt, s.step), text, target).sublayers[sublayer].weights[0] for s in saved]
        assert np.allclose(maps[0], expected[-1], atol=1e-3)  # the chosen step's head
        assert len(maps) == 1 + len(saved)
        for drawn, weights in zip(maps[1:], expected, strict=True):  # the strip: every snapshot, earliest first
            assert np.allclose(drawn, weights, atol=1e-3)
        titles = " ".join(page.locator(".stPlotlyChart .gtitle").all_text_contents())
        assert f"step {step:,}" in titles and "Validation loss" in titles
        assert page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count() == 0
        page.wait_for_timeout(500)
        name = ("training" if model == "reverse" else f"training-{model}") + ("-1024x768" if size[0] < 1600 else "")
        name += ".png"
        page.screenshot(path=str(SHOTS / name), full_page=True)
    finally:
        context.close()


# A sentence written twice: in its second copy an induction head attends to the token after the current token's
# earlier copy (the probe's pattern, on words a class types).
TWICE = " ".join(["Mr Dursley was the director of a firm called Grunnings, which made drills."] * 2)


def test_the_lm_induction_head_forms_between_two_snapshots(server, browser) -> None:
    """lm-english ships the steps around its induction head's forming: on Training steps the strip draws that head
    barely copying at the first shipped step and copying at the next. The head is found here from the shipped
    weights (the best of the layer the probe names), the scores read from the heatmaps the browser drew."""
    folder = ROOT / "checkpoints" / "lm-english"
    ckpt = load_checkpoint(folder)
    best = ckpt.card["metrics"]["induction"]["best_induction_head"]
    sublayer = best["block"]
    analysis = analyze(ckpt, TWICE)
    ids = list(analysis.target_ids)
    length = (len(ids) - 1) // 2
    assert ids[1 : 1 + length] == ids[1 + length :], "the sentence's two copies are the same pieces"
    induction, _ = head_scores(torch.tensor(analysis.sublayers[sublayer].weights)[None], length)
    head = int(np.argmax(induction))
    saved = list_snapshots(folder)
    query = {"model": "lm-english", "text": TWICE, "attention": "decoder.self_attn", "L": str(best["layer"])}
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/training?{urlencode({**query, 'H': head + 1, 'step': saved[0].step})}")
        page.get_by_role("heading", name="Training steps").wait_for()
        maps = page.wait_for_function(MATRICES_JS, arg=1 + len(saved)).json_value()
        assert page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count() == 0
    finally:
        page.close()
    strip = [head_scores(torch.tensor(m)[None, None], length)[0][0] for m in maps[1:]]  # earliest step first
    assert len(strip) == len(saved) >= 3
    assert strip[0] < 0.2, f"step {saved[0].step}: the head copies already ({strip[0]:.2f})"
    assert strip[1] > 0.4, f"step {saved[1].step}: the head has not formed ({strip[1]:.2f})"
    assert strip[-1] > 0.4
