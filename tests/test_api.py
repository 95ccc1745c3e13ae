"""The notebook API's traces and tables (atlas.api): `read_trace` reads back, from its path, what `save` wrote, and
`head_stats` given the model adds the Head statistics page's two probe columns."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import atlas
from analysis.record import Analysis
from viz.stats import PROBE_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
TEXT = "The cat sat on the mat."


@pytest.fixture(scope="module")
def tiny_lm(tiny_checkpoints):
    return atlas.load(tiny_checkpoints["decoder-only"])


@pytest.fixture(scope="module")
def tiny_analysis(tiny_lm) -> Analysis:
    return atlas.analyze(tiny_lm, "abcab")


# --- read_trace reads a path -------------------------------------------------------------------------------------


def assert_same_trace(back: Analysis, analysis: Analysis) -> None:
    assert back.kind == analysis.kind and back.target_pieces == analysis.target_pieces
    assert back.source_pieces == analysis.source_pieces
    assert list(back.sublayers) == list(analysis.sublayers)
    for name, sublayer in analysis.sublayers.items():
        np.testing.assert_allclose(back.sublayers[name].weights, sublayer.weights, atol=1e-6)
        np.testing.assert_array_equal(back.sublayers[name].mask, sublayer.mask)


@pytest.mark.parametrize("suffix", ["json", "npz"])
@pytest.mark.parametrize("as_path", [str, Path], ids=["str", "Path"])
def test_read_trace_reads_back_from_its_path_what_save_wrote(tiny_analysis, tmp_path, suffix, as_path) -> None:
    written = atlas.save(tiny_analysis, tmp_path / f"trace.{suffix}")
    assert_same_trace(atlas.read_trace(as_path(written)), tiny_analysis)


def test_read_trace_still_takes_bytes_with_their_file_name(tiny_analysis, tmp_path) -> None:
    written = atlas.save(tiny_analysis, tmp_path / "trace.npz")
    assert_same_trace(atlas.read_trace(written.read_bytes(), "trace.npz"), tiny_analysis)


def test_read_trace_names_a_missing_file_and_a_folder(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nowhere\.json: no such file"):
        atlas.read_trace(tmp_path / "nowhere.json")
    with pytest.raises(FileNotFoundError, match="a folder, not a trace file"):
        atlas.read_trace(str(tmp_path))
    with pytest.raises(atlas.TraceError, match="a trace file's path .*, not int"):
        atlas.read_trace(3)  # type: ignore[arg-type]


def test_read_trace_names_the_file_whose_content_is_wrong(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(atlas.TraceError, match=r"bad\.json"):
        atlas.read_trace(bad)


# --- head_stats with the model: the probe columns ---------------------------------------------------------------


def test_head_stats_without_the_model_has_no_probe_columns(tiny_analysis) -> None:
    table = atlas.head_stats(tiny_analysis)
    assert not set(PROBE_COLUMNS) & set(table.columns)


def test_head_stats_of_lm_english_finds_its_cards_induction_head_counted_from_one() -> None:
    lm = atlas.load("lm-english")
    table = atlas.head_stats(atlas.analyze(lm, TEXT), model=lm)
    assert set(PROBE_COLUMNS) <= set(table.columns)
    card = json.loads((ROOT / "checkpoints" / "lm-english" / "card.json").read_text())
    best = card["metrics"]["induction"]["best_induction_head"]
    top = table.loc[table["induction"].idxmax()]
    assert (top["layer"], top["head"]) == (best["layer"], best["head"]) == (3, 7)
    assert top["induction"] == pytest.approx(best["score"], abs=1e-3)
    assert table[list(PROBE_COLUMNS)].notna().all().all()  # a decoder's every head is a self-attention head


def test_head_stats_probe_columns_are_the_pages(tiny_lm, tiny_analysis) -> None:
    from analysis.induction import measure
    from viz.stats import for_display, head_table, with_probe_scores

    probe = measure(tiny_lm.model, tiny_lm.config.vocab_size, tiny_lm.config.bos_id)
    page = for_display(with_probe_scores(head_table(tiny_analysis), probe.induction, probe.previous_token))
    pd.testing.assert_frame_equal(atlas.head_stats(tiny_analysis, model=tiny_lm), page)


def test_head_stats_refuses_a_translator_and_names_why(tiny_checkpoints) -> None:
    translator = atlas.load(tiny_checkpoints["encoder-decoder"])
    analysis = atlas.analyze(translator, "abc", target="cba")
    with pytest.raises(ValueError, match="induction probe runs a decoder-only model.*leave model out"):
        atlas.head_stats(analysis, model=translator)
    with pytest.raises(TypeError, match="loaded model .*, not str"):
        atlas.head_stats(analysis, model="lm-english")  # type: ignore[arg-type]
