"""Head ablation's approximate ranking (analysis.ablation.rank_by_attribution): each head's number is the first-order
change of the mean log-probability of the top prediction, checked against a finite difference along the same
ablation; the page and atlas.rank_heads show it; the shared model gathers no gradient."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_app import LM, frame, ok

import atlas
from analysis.ablation import rank_by_attribution, ranking_setup
from inference.checkpoint import load_checkpoint
from model.attention import Patch
from model.forward import forward

ROOT = Path(__file__).resolve().parents[1]


def metric(ckpt, setup, ablate) -> float:
    logits, _ = forward(ckpt.model, setup.target, setup.source, record=False, ablate=ablate)
    log_p = torch.log_softmax(logits[0, setup.rows].double(), dim=-1)
    return float(log_p.gather(-1, setup.before.argmax(-1)[:, None]).mean())


@pytest.mark.parametrize(("name", "text"), [("lm-english", "The cat sat on the mat because it was"),
                                            ("translate-en-de", "Where is the station?")])  # fmt: skip
@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_each_heads_number_is_the_first_order_change_along_its_ablation(name: str, text: str, mode: str) -> None:
    ckpt = load_checkpoint(ROOT / "checkpoints" / name)
    setup = ranking_setup(ckpt, text)
    table = {(sublayer, head): drop for sublayer, head, drop in rank_by_attribution(ckpt, setup, mode)}
    ckpt.model.double()  # the differences below in float64: small steps (a ReLU's kink is not crossed), no rounding
    _, trace = forward(ckpt.model, setup.target, setup.source, record=True)
    eps = 1e-5
    for sublayer, head in sorted(table, key=lambda k: -abs(table[k]))[:3]:  # the three largest
        rec = trace.attention[sublayer]
        out = rec.weights @ rec.values  # (1, H, T, d_head)
        ablated = torch.zeros_like(out) if mode == "zero" else out.mean(dim=2, keepdim=True).expand_as(out)
        where = torch.zeros(1, out.shape[1], dtype=torch.bool)
        where[0, head] = True
        ahead, back = (
            metric(ckpt, setup, {sublayer: Patch(e * (ablated - out), where, added=True)}) for e in (eps, -eps)
        )
        assert -(ahead - back) / (2 * eps) == pytest.approx(table[sublayer, head], rel=1e-2, abs=1e-4)  # central
    assert all(p.grad is None for p in ckpt.model.parameters())


def test_the_page_and_the_api_show_the_approximate_ranking(app, good_dir: Path) -> None:
    at = ok(app(text="the cat sat on the mat", rank="approximate"))
    at.switch_page("views/ablation.py").run()
    at.button(key="ablate_rank").click().run()
    shown = frame(ok(at), "log p drop (approx.)")
    ckpt = load_checkpoint(good_dir / LM)
    expected = rank_by_attribution(ckpt, ranking_setup(ckpt, "the cat sat on the mat"))
    np.testing.assert_allclose(shown["log p drop (approx.)"], [d for *_, d in expected], rtol=1e-5, atol=1e-9)
    assert at.query_params["rank"] == "approximate"
    api = atlas.rank_heads(ckpt, "the cat sat on the mat", approximate=True)
    assert list(api.columns) == ["attention", "layer", "head", "log p drop (approx.)"] and len(api) == 8
