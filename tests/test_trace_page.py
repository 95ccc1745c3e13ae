"""The "Open a trace file" page (AppTest): an exported trace opens and draws the heads it holds, the same weights as
the analysis it was exported from; every bad file is one message in the page, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from plotly_data import decode_typed_array
from streamlit.testing.v1 import AppTest

from analysis.analyze import analyze
from analysis.export import to_json, to_json_object, to_npz_bytes
from inference.checkpoint import load_checkpoint

pytestmark = pytest.mark.usefixtures("fresh_models")  # the budget a trace may take (conftest.py)

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture
def page(good_dir: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/trace.py").run()
    return at


def head_z(at: AppTest) -> np.ndarray:
    spec = json.loads(next(el for el in at.get("plotly_chart") if el.key == "trace_chart_head").proto.spec)
    heat = next(t for t in spec["data"] if t["type"] == "heatmap")
    return decode_typed_array(heat["z"]) if isinstance(heat["z"], dict) else np.asarray(heat["z"], dtype=float)


@pytest.mark.parametrize("model", ["lm-tiny", "translate-tiny"])
@pytest.mark.parametrize("suffix", ["json", "npz"])
def test_an_exported_trace_draws_the_heads_it_was_exported_with(page, good_dir: Path, model: str, suffix: str) -> None:
    assert "No trace opened yet" in " ".join(i.value for i in page.info)
    analysis = analyze(load_checkpoint(good_dir / model), "Where is it?")
    data = to_json(analysis).encode() if suffix == "json" else to_npz_bytes(analysis)
    page.get("file_uploader")[0].upload(f"trace.{suffix}", data).run()
    assert not page.exception and not page.error, [e.value for e in [*page.exception, *page.error]]
    keys = {el.key for el in page.get("plotly_chart")}
    assert {"trace_chart_head", "trace_chart_heads", "trace_chart_paper", "trace_chart_rollout"} <= keys
    attention = "decoder.cross_attn" if model == "translate-tiny" else "decoder.self_attn"  # Explore's opening
    assert page.radio(key="attention").value == attention
    assert np.allclose(head_z(page), analysis.sublayer(attention, 0).weights[0], atol=1e-6)
    page.selectbox(key="layer").set_value(1).run()  # 0-based: layer 2
    page.selectbox(key="head").set_value(2).run()  # head 3
    assert np.allclose(head_z(page), analysis.sublayer(attention, 1).weights[2], atol=1e-6)  # layer 2, head 3
    assert "run the model itself" in " ".join(c.value for c in page.caption)


def test_the_shipped_example_trace_opens_from_its_button_and_draws_its_heads(page) -> None:
    page.button(key="trace_example").click().run()
    assert not page.exception and not page.error, [e.value for e in [*page.exception, *page.error]]
    keys = {el.key for el in page.get("plotly_chart")}
    assert {"trace_chart_head", "trace_chart_heads", "trace_chart_paper", "trace_chart_rollout"} <= keys
    assert page.radio(key="attention").value == "decoder.cross_attn"  # the translator's, as Explore opens on
    assert head_z(page).shape[1] == 5  # the source's tokens: ▁The ▁cat ▁sat . </s>


def bad_files(analysis) -> dict[str, tuple[bytes, str]]:
    """name → (bytes, a phrase its message must hold)."""
    obj = to_json_object(analysis)
    nan = json.loads(json.dumps(obj))
    nan["attention"][0]["weights"][0][1][0] = float("nan")
    short = json.loads(json.dumps(obj))
    short["attention"][0]["weights"] = [head[:-1] for head in short["attention"][0]["weights"]]  # a query row short
    sums = json.loads(json.dumps(obj))
    sums["attention"][0]["weights"][0][1] = [0.9] + [0.0] * (len(sums["attention"][0]["weights"][0][1]) - 1)
    surrogate = {**obj, "checkpoint": "tiny\ud800"}  # json.dumps writes it as the escape "\\ud800"
    return {
        "nan.json": (json.dumps(nan).encode(), "finite"),
        "surrogate.json": (json.dumps(surrogate).encode(), "surrogate"),
        "shape.json": (json.dumps(short).encode(), "query"),
        "sums.json": (json.dumps(sums).encode(), "sum"),
        "other.json": (b'{"hello": "world"}', "not a trace"),
        "broken.json": (b"{not json", "JSON"),
        "broken.npz": (b"PK not a zip", "npz"),
    }


def test_every_bad_file_is_one_message_and_no_traceback(page, good_dir: Path) -> None:
    analysis = analyze(load_checkpoint(good_dir / "lm-tiny"), "Where is it?")
    for name, (data, phrase) in bad_files(analysis).items():
        page.get("file_uploader")[0].upload(name, data).run()
        assert not page.exception, (name, [e.value for e in page.exception])
        assert len(page.error) == 1, (name, [e.value for e in page.error])
        message = page.error[0].value
        assert message.startswith("This file cannot be opened") and phrase.lower() in message.lower(), (name, message)
        assert not page.get("plotly_chart"), name
