"""Two models on one text, head by head (analysis/head_diff.py, atlas.compare_models), against a loop of our own
over the sub-layers' weights: a model and its tied-embedding sibling (same tokenizer and layout), a model against
itself, and the layouts that cannot be matched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import atlas
from analysis.analyze import analyze
from inference.checkpoint import Checkpoint, load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
TEXT = "the old man ___ to the river"


def loaded(name: str) -> Checkpoint:
    return load_checkpoint(ROOT / "checkpoints" / name)


@pytest.fixture(scope="module")
def pair() -> tuple[Checkpoint, Checkpoint]:
    return loaded("fivegram-3L-8H"), loaded("fivegram-3L-8H-tied")


def by_hand(first: Checkpoint, second: Checkpoint) -> dict[tuple[int, int], tuple[float, float, int]]:
    """(layer, head) from 1 → mean over queries of ½ Σ_k |a − b|, the largest |a − b|, the query (from 1) moved most."""
    a, b = analyze(first, TEXT), analyze(second, TEXT)
    found = {}
    for layer, name in enumerate(a.layers("encoder.self_attn"), start=1):
        wa, wb = a.sublayer("encoder.self_attn", name).weights, b.sublayer("encoder.self_attn", name).weights
        for head in range(wa.shape[0]):
            per_query = [
                0.5 * sum(abs(float(x) - float(y)) for x, y in zip(ra, rb, strict=True))
                for ra, rb in zip(wa[head], wb[head], strict=True)
            ]
            largest = max(
                abs(float(x) - float(y))
                for ra, rb in zip(wa[head], wb[head], strict=True)
                for x, y in zip(ra, rb, strict=True)
            )
            found[(layer, head + 1)] = (sum(per_query) / len(per_query), largest, int(np.argmax(per_query)) + 1)
    return found


def test_each_heads_change_is_the_mean_total_variation_of_its_rows(pair: tuple[Checkpoint, Checkpoint]) -> None:
    table = atlas.compare_models(*pair, TEXT)
    expected = by_hand(*pair)
    assert len(table) == len(expected) == 3 * 8
    for row in table.to_dict("records"):
        tv, largest, query = expected[(row["layer"], row["head"])]
        assert row["total variation"] == pytest.approx(tv, abs=1e-6)
        assert row["largest change"] == pytest.approx(largest, abs=1e-6)
        assert row["query"] == query
    assert list(table["total variation"]) == sorted(table["total variation"], reverse=True), "most changed first"
    assert table["total variation"].max() > 0.1, "two trainings of one recipe attend otherwise somewhere"


def test_a_model_against_itself_moves_nowhere(pair: tuple[Checkpoint, Checkpoint]) -> None:
    assert atlas.compare_models(pair[0], pair[0], TEXT)["total variation"].max() == 0.0
    translator = loaded("translate-en-de")
    same = atlas.compare_models(translator, translator, "The cat sat on the mat.")
    assert len(set(same["attention"])) == 3, "encoder, decoder and cross-attention, each matched"
    assert same["largest change"].max() == 0.0


def test_the_figure_is_the_tables_total_variation_layer_by_head(pair: tuple[Checkpoint, Checkpoint]) -> None:
    table = atlas.compare_models(*pair, TEXT)
    fig = atlas.compare_models(*pair, TEXT, figure=True)
    (heat,) = fig.data
    z = np.array(heat.z, dtype=float)
    assert z.shape == (3, 8)
    for row in table.to_dict("records"):
        assert z[row["layer"] - 1, row["head"] - 1] == pytest.approx(row["total variation"])


@pytest.mark.parametrize(
    ("second", "said"),
    [
        ("fivegram-3L-16H", "8 heads a layer in the first model, 16 in the second"),
        ("fivegram-2L-8H", "3 layers in the first model, 2 in the second"),
        ("lm-english", "other attentions"),
    ],
)
def test_models_that_cannot_be_matched_head_by_head_are_one_line(pair, second: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        atlas.compare_models(pair[0], loaded(second), TEXT)


def test_other_tokens_are_refused_in_one_line() -> None:
    """Two language models of other tokenizers read the text as other tokens."""
    from analysis.head_diff import LayoutError, check_layout

    lm = loaded("lm-english")
    a = analyze(lm, "The cat sat on the mat")
    b = analyze(lm, "The cat sat on the rug today")
    with pytest.raises(LayoutError, match="share a tokenizer"):
        check_layout(a, b)
