"""The induction model in the app: Head statistics finds its induction head on the probe."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from plotly_data import decode_typed_array
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")


def decode(values) -> np.ndarray:
    return decode_typed_array(values) if isinstance(values, dict) else np.asarray(values)


@pytest.fixture
def induction_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(ROOT / "checkpoints" / "induction", tmp_path / "induction")
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))
    return tmp_path


def test_head_statistics_show_the_probe_and_name_the_induction_head(induction_only) -> None:
    at = AppTest.from_file(APP, default_timeout=90).run()
    at.switch_page("views/head_stats.py").run()
    assert not at.exception, [e.value for e in at.exception]
    table = next(df.value for df in at.dataframe if "induction" in df.value.columns)
    best = table.loc[table["induction"].idxmax()]
    assert (best["layer"], best["head"]) == (2, 1) and best["induction"] >= 0.8
    assert table["previous_token_probe"].max() >= 0.3
    captions = " ".join(c.value for c in at.caption)
    assert "the best is layer 2, head 1" in captions


def composition_chart(at: AppTest) -> dict:
    return json.loads(next(el for el in at.get("plotly_chart") if el.key == "composition").proto.spec)


def test_head_statistics_draw_how_the_heads_compose_and_name_what_the_induction_head_reads(induction_only) -> None:
    at = AppTest.from_file(APP, default_timeout=90).run()
    at.switch_page("views/head_stats.py").run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    assert at.radio(key="compose").value == "K"
    chart = composition_chart(at)
    assert chart["data"][0]["y"][0] == "L1 H1" and chart["layout"]["title"]["text"].startswith("K-composition")
    captions = " ".join(c.value for c in at.caption)
    assert "layer 2, head 1, reads most from: layer 1, head 4" in captions
    at.radio(key="compose").set_value("V").run()
    chart = composition_chart(at)
    assert chart["layout"]["title"]["text"].startswith("V-composition") and at.query_params["compose"] == "V"


@pytest.mark.parametrize(("name", "said"), [("fivegram-1L-8H", "weights:"), ("fivegram-2Ls-1H", "(run 2 times)")])
def test_a_model_of_one_layer_of_weights_has_no_pair_of_heads_to_compose(name, said, tmp_path, monkeypatch) -> None:
    """One layer, or one layer's weights run twice (the shared-layer model of the experiment's table)."""
    shutil.copytree(ROOT / "checkpoints" / name, tmp_path / name)
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=90).run()
    at.switch_page("views/head_stats.py").run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    assert any("no pair" in i.value and said in i.value for i in at.info)
    assert "composition" not in {el.key for el in at.get("plotly_chart")}


def test_a_first_visit_opens_on_lm_english_though_induction_sorts_first(tmp_path, monkeypatch) -> None:
    for name in ("induction", "lm-english"):
        shutil.copytree(ROOT / "checkpoints" / name, tmp_path / name)
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=90).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="model").value == "lm-english"


def test_training_steps_draw_the_copying_curve_of_the_run(induction_only) -> None:
    at = AppTest.from_file(APP, default_timeout=90).run()
    at.switch_page("views/training.py").run()
    assert not at.exception, [e.value for e in at.exception]
    charts = {el.key: el for el in at.get("plotly_chart")}
    assert "training_copying" in charts
    spec = json.loads(charts["training_copying"].proto.spec)
    score = decode(spec["data"][0]["y"])
    second = decode(spec["data"][2]["y"])
    assert score[0] < 0.1 and score[-1] >= 0.8 and second[-1] < second[0] / 4
