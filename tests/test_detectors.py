"""Head detectors (analysis.detectors, atlas.detect_heads, Head statistics' "Detect a pattern"): each named
pattern is the positions it names, a head that follows a pattern exactly scores 1 and one that never does 0, the
score of a uniform head is worked out by hand, many texts average, an array pattern must fit, the induction
model's heads are found, and the page draws the same scores."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from plotly_data import decode_typed_array
from streamlit.testing.v1 import AppTest
from test_app import APP, chart, ok

import atlas
from analysis.detectors import detect, pattern_for
from analysis.imported import from_arrays

ROOT = Path(__file__).resolve().parents[1]
REPEATED = "freedom election movies garden river freedom election movies garden river"


def test_each_named_pattern_points_where_its_name_says() -> None:
    tokens = ["<s>", "a", "b", "a", "b"]
    previous, first, current = (pattern_for(n, tokens) for n in ("previous token", "first token", "current token"))
    assert [tuple(x) for x in np.argwhere(previous)] == [(1, 0), (2, 1), (3, 2), (4, 3)]
    assert first[:, 0].all() and first[:, 1:].sum() == 0 and (current == np.eye(5)).all()
    assert [tuple(x) for x in np.argwhere(pattern_for("same token", tokens))] == [(3, 1), (4, 2)]
    # "a" at 3 saw "a" at 1, followed by "b" at 2; "b" at 4 saw "b" at 2, followed by "a" at 3
    assert [tuple(x) for x in np.argwhere(pattern_for("induction", tokens))] == [(3, 2), (4, 3)]
    with pytest.raises(ValueError, match="pattern is one of 'previous token'"):
        pattern_for("sideways", tokens)


def causal_uniform(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]


def test_exact_heads_score_one_and_a_uniform_head_its_worked_value() -> None:
    n = 5
    previous = np.zeros((n, n))
    previous[0, 0] = 1.0
    previous[np.arange(1, n), np.arange(n - 1)] = 1.0
    heads = np.stack([previous, np.eye(n), causal_uniform(n)])  # (3, n, n)
    analysis = from_arrays([heads], ["<s>", "a", "b", "c", "d"])
    scores = detect([analysis], "previous token")["decoder.self_attn"][0]
    # head 1: every query but the first looks at its previous token: 4 of 5 rows; head 2: never; head 3:
    # 1/2 + 1/3 + 1/4 + 1/5 of 5 rows
    np.testing.assert_allclose(scores, [4 / 5, 0.0, (1 / 2 + 1 / 3 + 1 / 4 + 1 / 5) / 5], atol=1e-6)
    np.testing.assert_allclose(
        detect([analysis], "current token")["decoder.self_attn"][0], [1 / 5, 1, 0.457], atol=1e-3
    )
    twice = detect([analysis, from_arrays([heads[:, :3, :3]], ["<s>", "a", "b"])], "first token")
    one = detect([analysis], "first token")["decoder.self_attn"][0]
    other = detect([from_arrays([heads[:, :3, :3]], ["<s>", "a", "b"])], "first token")["decoder.self_attn"][0]
    np.testing.assert_allclose(twice["decoder.self_attn"][0], (one + other) / 2)  # many texts: the mean
    custom = np.zeros((n, n))
    custom[:, 0] = 1.0
    np.testing.assert_allclose(
        detect([analysis], custom)["decoder.self_attn"], detect([analysis], "first token")["decoder.self_attn"]
    )
    with pytest.raises(ValueError, match="the pattern is 3 × 3 but the text"):
        detect([analysis], np.zeros((3, 3)))


def test_the_induction_models_heads_are_found_through_the_api() -> None:
    model = atlas.load("induction")
    previous = atlas.detect_heads(model, REPEATED, "previous token")
    assert previous.iloc[0]["layer"] == 1 and previous.iloc[0]["score"] > 0.8
    induction = atlas.detect_heads(
        model, [REPEATED, "the old man went down to the river and the old man went"], "induction"
    )
    assert induction.iloc[0]["layer"] == 2 and set(induction.columns) == {"attention", "layer", "head", "score"}
    analysis = atlas.analyze(model, REPEATED)
    again = atlas.detect_heads(analysis, pattern="previous token")
    np.testing.assert_allclose(again["score"], previous["score"])
    with pytest.raises(ValueError, match="needs texts"):
        atlas.detect_heads(model)


def test_head_statistics_draws_the_detectors_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(ROOT / "checkpoints" / "induction", tmp_path / "induction")
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"text": REPEATED, "detect": "induction"})
    at.run()
    at.switch_page("views/head_stats.py").run()
    spec = chart(ok(at), "detector")
    expected = detect([atlas.analyze(atlas.load(tmp_path / "induction"), REPEATED)], "induction")["decoder.self_attn"]
    values = spec["data"][0]["z"]
    z = decode_typed_array(values) if isinstance(values, dict) else np.asarray(values, dtype=float)
    np.testing.assert_allclose(z, expected, atol=1e-6)
    at.text_area(key="detect_texts").set_value("the old man went down to the river and the old man went").run()
    assert "over 2 texts" in chart(ok(at), "detector")["layout"]["title"]["text"]
