"""The induction model in the app: Head statistics finds its induction head on the probe."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")


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


def test_a_first_visit_opens_on_lm_english_though_induction_sorts_first(tmp_path, monkeypatch) -> None:
    for name in ("induction", "lm-english"):
        shutil.copytree(ROOT / "checkpoints" / name, tmp_path / name)
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=90).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="model").value == "lm-english"
