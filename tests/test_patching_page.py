"""Compare's activation patching (views/compare.py) in AppTest, on the induction model: nothing runs before the
button; then the grid is analysis.patching's; the choices come back from a link; texts that cannot be paired get
a sentence."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from plotly_data import decode_typed_array
from streamlit.testing.v1 import AppTest
from test_app import APP, chart, ok

from analysis.patching import attribution_patch, patch
from inference.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
CLEAN = "freedom election movies garden river freedom election movies garden"
CORRUPTED = "freedom election movies garden river window science market doctor"


@pytest.fixture
def induction_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    shutil.copytree(ROOT / "checkpoints" / "induction", tmp_path / "induction")
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))

    def make(**query: str) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=90)
        at.query_params.update({"text": CLEAN, "compare": CORRUPTED, **query})
        at.run()
        return at.switch_page("views/compare.py").run()

    return make


def z(spec: dict) -> np.ndarray:
    values = spec["data"][0]["z"]
    return decode_typed_array(values) if isinstance(values, dict) else np.asarray(values, dtype=float)


def test_the_heads_grid_is_the_patched_runs_after_the_button(induction_app) -> None:
    at = ok(induction_app())
    assert "patching" not in {el.key for el in at.get("plotly_chart")}  # nothing is run before the button
    at.button(key="patch_run").click().run()
    expected = patch(load_checkpoint(ROOT / "checkpoints" / "induction"), CLEAN, CORRUPTED, "heads")
    np.testing.assert_allclose(z(chart(ok(at), "patching")), expected.scores, atol=1e-5)
    assert at.query_params["patch"] == "heads" and at.query_params["patch_answer"] == "▁river"


def test_the_stream_and_the_approximation_come_back_from_a_link(induction_app) -> None:
    ckpt = load_checkpoint(ROOT / "checkpoints" / "induction")
    at = ok(induction_app(patch="residual"))
    at.button(key="patch_run").click().run()
    residual = patch(ckpt, CLEAN, CORRUPTED, "residual")
    np.testing.assert_allclose(z(chart(ok(at), "patching")), residual.scores, atol=1e-5)
    at = ok(induction_app(patch="heads", patch_method="approximate"))
    at.button(key="patch_run").click().run()
    approximate = attribution_patch(ckpt, CLEAN, CORRUPTED)
    spec = chart(ok(at), "patching")
    np.testing.assert_allclose(z(spec), approximate.scores, atol=1e-5)
    assert "approximate" in spec["layout"]["title"]["text"]


def test_texts_of_other_lengths_get_a_sentence(induction_app) -> None:
    at = ok(induction_app(compare=CORRUPTED + " river"))
    assert "different token counts" in " ".join(i.value for i in at.info)
    assert not [b for b in at.button if b.key == "patch_run"]
