"""Training snapshots: loading them (inference.snapshots) and the Training steps page that shows heads forming."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from plotly_data import decode_typed_array
from streamlit.testing.v1 import AppTest

from analysis.analyze import analyze
from inference.checkpoint import CheckpointError, load_checkpoint
from inference.snapshots import list_snapshots, load_snapshot
from model.factory import build_model
from training.checkpoint import save_snapshot

APP = str(Path(__file__).resolve().parents[1] / "app.py")
STEPS, LOSSES = [0, 5, 20], [4.5, 3.25, 1.5]
TEXT = "the cat sat on the mat"
RECORDED = {"layer": 2, "head": 3, "block": "decoder.layers.1.self_attn", "score": 0.9}


@pytest.fixture(scope="module")
def with_snapshots(good_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoints folder: the tiny translator with three snapshots (differently seeded weights, as a run's
    steps would be) and its run's history on the card; the tiny LM without snapshots."""
    root = tmp_path_factory.mktemp("snapshots")
    for name in ("translate-tiny", "lm-tiny"):
        shutil.copytree(good_dir / name, root / name)
    card = json.loads((root / "lm-tiny" / "card.json").read_text(encoding="utf-8"))
    card["training"] = {"history": [{"step": 50, "valid_loss": 6.5}, {"step": 100, "valid_loss": 5.75}]}
    (root / "lm-tiny" / "card.json").write_text(json.dumps(card), encoding="utf-8")
    folder = root / "translate-tiny"
    ckpt = load_checkpoint(folder)
    for seed, (step, loss) in enumerate(zip(STEPS, LOSSES, strict=True)):
        torch.manual_seed(100 + seed)
        save_snapshot(folder, build_model(ckpt.config).eval(), step, loss)
    card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
    card["training"] = {"history": [{"step": s, "valid_loss": v} for s, v in ((5, 3.25), (10, 2.0), (20, 1.5))]}
    # the evaluate command's probe names the head that formed, counted from 1 as the card is read
    card.setdefault("metrics", {})["induction"] = {"best_induction_head": RECORDED}
    (folder / "card.json").write_text(json.dumps(card), encoding="utf-8")
    return root


def weights_at(ckpt, step: int, sublayer: str) -> np.ndarray:
    """The sub-layer's weights on TEXT by the weights the fixture saved for `step`, rebuilt from its seed (not read
    back through inference.snapshots, which is what is under test)."""
    torch.manual_seed(100 + STEPS.index(step))
    model = build_model(ckpt.config).half().float().eval()
    target = analyze(ckpt, TEXT).output_text  # every step's decoder reads the shipped model's output
    return analyze(dataclasses.replace(ckpt, model=model), TEXT, target).sublayers[sublayer].weights


def test_snapshots_are_listed_by_step_and_load_their_own_weights(with_snapshots: Path) -> None:
    folder = with_snapshots / "translate-tiny"
    assert [(s.step, s.valid_loss) for s in list_snapshots(folder)] == list(zip(STEPS, LOSSES, strict=True))
    assert list_snapshots(with_snapshots / "lm-tiny") == []
    ckpt = load_checkpoint(folder)
    early, late = load_snapshot(ckpt, 0), load_snapshot(ckpt, 20)
    torch.manual_seed(102)
    expected = build_model(ckpt.config).half().float().state_dict()  # saved as float16
    for name, tensor in late.model.state_dict().items():
        assert torch.equal(tensor, expected[name]), name
    assert late.tokenizer is ckpt.tokenizer and late.name == "translate-tiny@20"
    a, b = analyze(early, TEXT), analyze(late, TEXT)
    assert not np.allclose(
        a.sublayers["decoder.layers.0.cross_attn"].weights, b.sublayers["decoder.layers.0.cross_attn"].weights
    )
    with pytest.raises(CheckpointError, match="no snapshot of step 7"):
        load_snapshot(ckpt, 7)


def test_a_damaged_snapshot_index_is_named(with_snapshots: Path, tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    shutil.copytree(with_snapshots / "translate-tiny", folder)
    (folder / "snapshots" / "step-000005.safetensors").unlink()
    with pytest.raises(CheckpointError, match="lists step-000005.safetensors, which is not in"):
        list_snapshots(folder)
    (folder / "snapshots" / "index.json").write_text('{"snapshots": [{"step": 1}]}', encoding="utf-8")
    with pytest.raises(CheckpointError, match="index.json: expected"):
        list_snapshots(folder)
    (folder / "snapshots" / "index.json").write_text(
        '{"snapshots": [{"step": 1, "valid_loss": 2, "file": "../model.safetensors"}]}', encoding="utf-8"
    )
    with pytest.raises(CheckpointError, match="not a .safetensors file name inside"):
        list_snapshots(folder)


@pytest.fixture
def app(with_snapshots: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., AppTest]:
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(with_snapshots))

    def make(**query: str) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params.update(query)
        at.run()
        return at.switch_page("views/training.py").run()

    return make


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def chart(at: AppTest, key: str) -> dict:
    charts = {el.key: el for el in at.get("plotly_chart")}
    assert key in charts, list(charts)
    return json.loads(charts[key].proto.spec)


def test_the_slider_shows_the_chosen_steps_head_and_every_step_side_by_side(app, with_snapshots: Path) -> None:
    at = ok(app(model="translate-tiny", text=TEXT, attention="decoder.cross_attn", L="2", H="3"))
    slider = at.select_slider(key="step")
    assert slider.options == ["0", "5", "20"] and slider.value == 5  # the middle snapshot first
    ckpt = load_checkpoint(with_snapshots / "translate-tiny")
    for step in (20, 0):
        ok(slider.set_value(step).run())
        expected = weights_at(ckpt, step, "decoder.layers.1.cross_attn")[2]
        shown = chart(at, "training_head")
        assert np.allclose(decode_typed_array(shown["data"][0]["z"]), expected, atol=1e-4)
        assert f"step {step:,} · loss" in shown["layout"]["title"]["text"]
        assert at.query_params["step"] == str(step)
    strip = chart(at, "training_strip")
    assert len(strip["data"]) == len(STEPS)
    assert np.allclose(
        decode_typed_array(strip["data"][2]["z"]),
        weights_at(ckpt, 20, "decoder.layers.1.cross_attn")[2],
        atol=1e-4,
    )
    curve = chart(at, "training_loss")
    line, points, ring = curve["data"]
    assert line["x"] == [5, 10, 20] and points["y"] == LOSSES and ring["x"] == [1]  # step 0 drawn at 1 (log axis)
    assert at.code[0].value == (analyze(load_snapshot(ckpt, 0), TEXT).output_text or "(empty)")


def picked(at: AppTest) -> tuple[str, int, int]:
    return at.radio(key="attention").value, at.selectbox(key="layer").value, at.selectbox(key="head").value


def test_the_page_opens_on_the_head_the_run_recorded_forming(app) -> None:
    """The card's recorded head (layer 2, head 3) is where the page opens, and said; a head the URL names or the
    person picks is kept instead."""
    at = ok(app(model="translate-tiny", text=TEXT))
    assert picked(at) == ("decoder.self_attn", 1, 2)
    assert "induction head forming: layer 2, head 3" in " ".join(c.value for c in at.caption)
    linked = ok(app(model="translate-tiny", text=TEXT, attention="decoder.cross_attn", L="1", H="4"))
    assert picked(linked) == ("decoder.cross_attn", 0, 3)
    ok(at.selectbox(key="head").select(0).run())
    ok(at.switch_page("views/explore.py").run())
    ok(at.switch_page("views/training.py").run())
    assert picked(at) == ("decoder.self_attn", 1, 0)  # the person's choice, not the page's opening head


def test_a_copied_link_restores_the_step(app) -> None:
    at = ok(app(model="translate-tiny", text=TEXT, step="20"))
    assert at.select_slider(key="step").value == 20
    stale = ok(app(model="translate-tiny", text=TEXT, step="7"))  # not a saved step: back to the middle one
    assert stale.select_slider(key="step").value == 5


def test_a_model_without_snapshots_says_so_and_offers_one_that_has_them(app) -> None:
    at = ok(app(model="lm-tiny", text=TEXT))
    assert "has no training snapshots" in at.info[0].value
    line = chart(at, "training_loss")["data"][0]  # the run's curve, from its card
    assert line["x"] == [50, 100] and line["y"] == [6.5, 5.75]
    at.button(key="training_switch_translate-tiny").click().run()
    assert ok(at).select_slider(key="step").options == ["0", "5", "20"]
