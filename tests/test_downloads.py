"""The circuit views' downloads (ui.downloads.table_downloads) in AppTest: under Logit attribution's figures,
Compare's activation patching, Head statistics' detector and composition, and Head ablation's ranking, a CSV and a
JSON button whose files read back into the numbers the figure draws, layers, heads and positions counted from 1 —
the same table the notebook API returns."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from plotly_data import decode_typed_array
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest
from test_app import APP, LM, chart, frame, ok, z

import atlas
from inference.checkpoint import load_checkpoint
from ui.downloads import csv_text, json_text

ROOT = Path(__file__).resolve().parents[1]
TEXT = "the cat sat on the mat"
REPEATED = "freedom election movies garden river freedom election movies garden"
CHANGED = "freedom election movies garden river window science market doctor"


@pytest.fixture
def downloaded(monkeypatch: pytest.MonkeyPatch):
    """`downloaded(at, key)` → (file name, bytes) of the download button `key` as a click would fetch them: AppTest
    keeps each run's media files in a manager of its own, recorded here."""
    managers: list[MediaFileManager] = []

    class Recorded(MediaFileManager):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            managers.append(self)

    monkeypatch.setattr("streamlit.testing.v1.app_test.MediaFileManager", Recorded)

    def fetch(at: AppTest, key: str) -> tuple[str, bytes]:
        buttons = {b.key: b for b in at.get("download_button")}
        assert key in buttons, f"no download {key!r}; downloads: {list(buttons)}"
        url = managers[-1].execute_deferred(buttons[key].proto.deferred_file_id)  # the button's click
        file = managers[-1].read_file(url.rsplit("/", 1)[1].split(".")[0])
        return file.filename, file.content

    return fetch


def both(downloaded, at: AppTest, key: str) -> pd.DataFrame:
    """The table of the `key` downloads: its CSV read by pandas, checked equal to its JSON read by json."""
    csv_name, csv = downloaded(at, f"{key}_csv")
    json_name, data = downloaded(at, f"{key}_json")
    assert csv_name.endswith(".csv") and json_name == csv_name[: -len(".csv")] + ".json"
    assert " " not in csv_name and "/" not in csv_name
    table = pd.read_csv(io.BytesIO(csv))
    records = pd.DataFrame(json.loads(data.decode("utf-8")))
    pd.testing.assert_frame_equal(table, records, check_dtype=False)
    return table


def labels(at: AppTest) -> set[str]:
    return {b.label for b in at.get("download_button")}


def test_the_files_read_back_as_the_table_and_no_cell_runs_as_a_formula() -> None:
    table = pd.DataFrame({"layer": pd.array([1, None], dtype="Int64"), "token": ["=1+2", "3:▁cat"], "p": [0.5, -1.0]})
    csv = pd.read_csv(io.StringIO(csv_text(table)))
    assert csv["token"].tolist() == ["'=1+2", "3:▁cat"] and csv["p"].tolist() == [0.5, -1.0]
    records = json.loads(json_text(lambda: table))  # a function builds the table when a button is clicked
    assert records == [{"layer": 1, "token": "=1+2", "p": 0.5}, {"layer": None, "token": "3:▁cat", "p": -1.0}]


def test_logit_attribution_downloads_its_heads_parts_and_lens(app, downloaded, good_dir: Path) -> None:
    at = ok(app(text=TEXT))
    at.switch_page("views/attribution.py").run()
    ok(at)
    assert {"CSV of the heads' contributions", "JSON of every part's contribution", "CSV of the logit lens"} <= labels(
        at
    )
    heads = both(downloaded, at, "attribution_heads")
    grid = z(chart(at, "attribution_heads"))  # layer × head
    assert set(heads["layer"]) == {1, 2} and set(heads["head"]) == {1, 2, 3, 4} and len(heads) == grid.size
    for row in heads.itertuples():
        assert row.contribution == pytest.approx(grid[row.layer - 1, row.head - 1], abs=1e-9)
    parts = both(downloaded, at, "attribution_parts")
    api = atlas.logit_attribution_scores(load_checkpoint(good_dir / LM), TEXT)  # the page's defaults
    pd.testing.assert_frame_equal(parts, pd.read_csv(io.StringIO(api.to_csv(index=False))), atol=1e-6)
    bars = chart(at, "attribution_parts")["data"][0]
    drawn = dict(zip(bars["y"], decode_typed_array(bars["x"]).astype(float)))
    per_layer = parts[parts["part"] == "head"].groupby("layer")["contribution"].sum()
    for layer, total in per_layer.items():
        assert drawn[f"layer {int(layer)} · Self-attention (masked), all heads"] == pytest.approx(total, abs=1e-6)
    for row in parts[parts["part"] == "feed-forward"].itertuples():
        assert drawn[f"layer {int(row.layer)} · feed-forward"] == pytest.approx(row.contribution, abs=1e-9)
    assert parts["contribution"].sum() == pytest.approx(sum(drawn.values()), abs=1e-6)
    lens = both(downloaded, at, "logit_lens")
    spec = chart(at, "logit_lens")["data"][0]
    probs = decode_typed_array(spec["z"])
    assert len(lens) == probs.size and lens["position"].min() == 1 and lens["layer"].max() == probs.shape[0] - 1
    assert lens["after"].unique().tolist() == spec["y"] and lens["token"].iloc[0] == "1:<s>"
    for row in lens.itertuples():
        assert row.probability == pytest.approx(probs[spec["y"].index(row.after), row.position - 1], abs=1e-6)


def test_compare_downloads_what_each_patch_restores(tmp_path: Path, monkeypatch, downloaded) -> None:
    shutil.copytree(ROOT / "checkpoints" / "induction", tmp_path / "induction")
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"text": REPEATED, "compare": CHANGED})
    at.run()
    at.switch_page("views/compare.py").run()
    assert not [b for b in at.get("download_button") if b.key.startswith("patching")]  # no figure, no download
    at.button(key="patch_run").click().run()
    table = both(downloaded, ok(at), "patching")
    grid = z(chart(at, "patching"))
    assert len(table) == grid.size and table["layer"].min() == 1 and table["head"].min() == 1
    for row in table.itertuples():
        assert row.restored == pytest.approx(grid[row.layer - 1, row.head - 1], abs=1e-6)
    api = atlas.patch_scores(atlas.load(tmp_path / "induction"), REPEATED, CHANGED)
    pd.testing.assert_frame_equal(table, api, atol=1e-5, check_dtype=False)
    assert "CSV of what each patch restores" in labels(at)


def test_head_statistics_downloads_the_detector_and_the_composition(tmp_path: Path, monkeypatch, downloaded) -> None:
    shutil.copytree(ROOT / "checkpoints" / "induction", tmp_path / "induction")
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"text": REPEATED, "detect": "induction"})
    at.run()
    at.switch_page("views/head_stats.py").run()
    detector = both(downloaded, ok(at), "detector")
    grid = z(chart(at, "detector"))
    assert len(detector) == grid.size and detector["layer"].min() == 1 and detector["head"].min() == 1
    for row in detector.itertuples():
        assert row.score == pytest.approx(grid[row.layer - 1, row.head - 1], abs=1e-6)
    composed = both(downloaded, at, "composition")
    model = atlas.load(tmp_path / "induction")
    pd.testing.assert_frame_equal(composed, atlas.composition_scores(model), atol=1e-6, check_dtype=False)
    spec = chart(at, "composition")["data"][0]  # K, the page's first mode: rows "L1 H2" write, columns read
    shown = decode_typed_array(spec["z"])
    pairs = composed[["earlier layer", "earlier head", "later layer", "later head", "K"]]
    for el, eh, ll, lh, k in pairs.itertuples(index=False, name=None):
        assert k == pytest.approx(shown[spec["y"].index(f"L{el} H{eh}"), spec["x"].index(f"L{ll} H{lh}")], abs=1e-6)
    assert {"CSV of the ‘induction’ scores", "JSON of the composition scores (Q, K and V)"} <= labels(at)


@pytest.mark.parametrize("method", ["exact", "approximate"])
def test_head_ablation_downloads_its_ranking(app, downloaded, good_dir: Path, method: str) -> None:
    at = ok(app(text=TEXT, rank=method))
    at.switch_page("views/ablation.py").run()
    assert not [b for b in at.get("download_button") if b.key.startswith("ablate_ranking")]  # before the button
    at.button(key="ablate_rank").click().run()
    column = "KL (nats)" if method == "exact" else "log p drop (approx.)"
    table = both(downloaded, ok(at), "ablate_ranking")
    pd.testing.assert_frame_equal(table, frame(at, column), check_dtype=False)
    assert set(table["layer"]) == {1, 2} and set(table["head"]) == {1, 2, 3, 4}
    api = atlas.rank_heads(load_checkpoint(good_dir / LM), TEXT, approximate=method == "approximate")
    pd.testing.assert_frame_equal(table, api, rtol=1e-4, atol=1e-9, check_dtype=False)
