"""Do the explanations agree (analysis.agreement, viz.agreement, atlas.agreement): each column equals its method's own
function, at the last position and at an earlier one; Spearman's correlations equal the hand formula; the heads the
methods disagree on are the ones whose ranks spread; a bad position, a translator and a text too short to shuffle
each get one clear message."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

import atlas
from analysis.ablation import _kl, head_importance
from analysis.agreement import METHODS, agreement, shuffled
from analysis.analyze import analyze
from analysis.attribution import attribute
from analysis.patching import attribution_patch, pair_ids, patch, patch_runs, prepare_ids
from inference.checkpoint import Checkpoint, load_checkpoint
from model.attention import Ablation
from model.forward import forward
from model.names import sublayer_name
from viz.agreement import (
    agreement_frame,
    correlation_heatmap,
    disagreement_line,
    disagreements,
    importance_ranks,
    rank_correlations,
    ranks_heatmap,
)

TEXT = "the cat sat on the mat"
CORRUPTED = "the cat sat on the hat"


@pytest.fixture(scope="module")
def lm(tiny_checkpoints: dict[str, Path]) -> Checkpoint:
    return load_checkpoint(tiny_checkpoints["decoder-only"])


@pytest.fixture(scope="module")
def last(lm: Checkpoint):
    return agreement(lm, TEXT, corrupted=CORRUPTED)


def by_head(lm: Checkpoint, table: list[tuple[str, int, float]]) -> np.ndarray:
    """(sub-layer name, head, value) rows as (L, H)."""
    grid = np.full((lm.config.n_decoder_layers, lm.config.n_heads), np.nan)
    for name, head, value in table:
        grid[int(name.split(".")[2]), head] = value
    return grid


def largest_but_first(weights: np.ndarray, position: int) -> np.ndarray:
    return weights[:, position, 1 : position + 1].max(axis=-1)


def test_the_pair_has_one_token_count(lm: Checkpoint) -> None:
    clean, corrupted = pair_ids(lm, TEXT, CORRUPTED)
    assert clean.shape == corrupted.shape and not torch.equal(clean, corrupted)


def test_each_column_equals_its_methods_own_function_at_the_last_token(lm: Checkpoint, last) -> None:
    analysis = analyze(lm, TEXT)
    ids = torch.tensor([list(analysis.target_ids)])
    p = ids.shape[1] - 1
    assert last.position == p and list(last.scores) == list(METHODS)
    names = [sublayer_name("decoder", i, "self_attn") for i in range(lm.config.n_decoder_layers)]
    expected = {
        "attention": np.stack([largest_but_first(analysis.sublayers[n].weights, p) for n in names]),
        "value-weighted attention": np.stack(
            [largest_but_first(analysis.value_weighted().sublayers[n].weights, p) for n in names]
        ),
        "direct logit attribution": attribute(lm, None, ids, p).heads["decoder.self_attn"],
        "ablation (zero)": by_head(lm, head_importance(lm, TEXT, "zero")),
        "ablation (mean)": by_head(lm, head_importance(lm, TEXT, "mean")),
        "activation patching": patch(lm, TEXT, CORRUPTED, "heads", last.answer, last.versus).scores,
        "attribution patching": attribution_patch(lm, TEXT, CORRUPTED, last.answer, last.versus).scores,
    }
    for method, values in expected.items():
        np.testing.assert_allclose(last.scores[method], values, rtol=1e-6, atol=1e-9, err_msg=method)
    assert last.answer == attribute(lm, None, ids, p).token
    assert last.corrupted == tuple(pair_ids(lm, TEXT, CORRUPTED)[1][0].tolist())


def test_an_earlier_position_scores_its_own_prediction(lm: Checkpoint) -> None:
    analysis = analyze(lm, TEXT)
    ids = torch.tensor([list(analysis.target_ids)])
    p = 3
    found = agreement(lm, TEXT, position=p)
    assert found.position == p
    np.testing.assert_allclose(
        found.scores["attention"][1],
        largest_but_first(analysis.sublayers[sublayer_name("decoder", 1, "self_attn")].weights, p),
    )
    np.testing.assert_allclose(
        found.scores["direct logit attribution"], attribute(lm, None, ids, p).heads["decoder.self_attn"]
    )
    logits = forward(lm.model, ids, record=False)[0][0].float()
    cut = forward(
        lm.model, ids, record=False, ablate={sublayer_name("decoder", 1, "self_attn"): Ablation((2,), "zero")}
    )
    by_hand = float(_kl(logits[p : p + 1], cut[0][0].float()[p : p + 1])[0])
    assert found.scores["ablation (zero)"][1, 2] == pytest.approx(by_hand, rel=1e-3)
    clean = ids[:, : p + 1]
    corrupted = torch.tensor([shuffled(clean[0].tolist())])
    assert corrupted[0, 0] == clean[0, 0] and corrupted[0, -1] == clean[0, -1] and not torch.equal(corrupted, clean)
    runs = prepare_ids(lm, clean, corrupted, found.answer, found.versus)
    np.testing.assert_allclose(found.scores["activation patching"], patch_runs(lm, runs, "heads").scores)


def test_spearman_equals_the_hand_formula_and_signed_methods_rank_by_magnitude() -> None:
    scores = {
        "a": np.array([[0.9, 0.1, 0.5], [0.3, 0.7, 0.2]]),
        "b": np.array([[0.2, 0.8, 0.4], [0.6, 0.1, 0.9]]),
        "direct logit attribution": np.array([[-0.95, 0.05, 0.4], [0.2, -0.6, 0.1]]),
    }
    frame = agreement_frame(scores)
    assert list(frame.index[1]) == [1, 2] and frame.loc[(2, 3), "b"] == 0.9
    ranks = importance_ranks(frame)
    assert ranks.loc[(1, 1), "direct logit attribution"] == 1  # -0.95: the largest push, against
    corr = rank_correlations(frame)
    n = len(frame)
    for x in scores:
        for y in scores:
            d = ranks[x].to_numpy() - ranks[y].to_numpy()
            rho = 1 - 6 * float((d * d).sum()) / (n * (n * n - 1))  # no ties: Spearman's formula
            assert corr.loc[x, y] == pytest.approx(rho)
    assert corr.loc["a", "direct logit attribution"] == pytest.approx(1.0)  # the same order by magnitude


def test_the_heads_whose_ranks_spread_most_are_marked() -> None:
    a = np.array([[5.0, 4.0, 3.0, 2.0, 1.0]])
    b = np.array([[1.0, 4.0, 3.0, 2.0, 5.0]])  # heads 1 and 5 change places
    frame = agreement_frame({"a": a, "b": b})
    worst = disagreements(frame, 2)
    assert {(r.layer, r.head) for r in worst.itertuples()} == {(1, 1), (1, 5)}
    assert worst.iloc[0]["spread"] == 4
    line = disagreement_line(frame)
    assert line.startswith("They disagree most on layer 1 head 1: ranked 1 of 5 by a and 5 by b.")
    assert "a and b (Spearman ρ = -0.60)" in line
    labels = ranks_heatmap(frame, "ranks", marked=2).data[0].y
    assert [label.endswith("◀") for label in labels] == [True, False, False, False, True]
    fig = correlation_heatmap(rank_correlations(frame), "correlations")
    assert fig.data[0].z[0][1] == pytest.approx(-0.6)


def test_a_text_too_short_to_shuffle_leaves_patching_empty_and_says_why(lm: Checkpoint) -> None:
    found = agreement(lm, TEXT, position=1)  # the start of text and one token: nothing to shuffle
    assert np.isnan(found.scores["activation patching"]).all()
    assert np.isnan(found.scores["attribution patching"]).all()
    assert "too few" in found.note and found.versus is None
    assert np.isfinite(found.scores["ablation (zero)"]).all()
    weights = analyze(lm, TEXT).sublayers[sublayer_name("decoder", 0, "self_attn")].weights[:, 1]  # (H, Tk), query 2
    assert (weights[:, 0] > weights[:, 1]).any()  # a head that puts more on the start of text: left out
    np.testing.assert_allclose(found.scores["attention"][0], weights[:, 1])
    assert "too few" not in disagreement_line(agreement_frame(found.scores))


def test_the_notebook_function_counts_from_1_and_keeps_the_methods_columns(lm: Checkpoint, last) -> None:
    frame = atlas.agreement(lm, TEXT, corrupted=CORRUPTED)
    assert list(frame.columns) == list(METHODS) and frame.index.names == ["layer", "head"]
    for method in METHODS:
        np.testing.assert_allclose(frame[method].to_numpy(), last.scores[method].reshape(-1), err_msg=method)
    assert frame.attrs["position"] == last.position + 1
    assert frame.attrs["answer"] == lm.tokenizer.pieces([last.answer])[0]
    assert frame.attrs["corrupted"] == CORRUPTED and frame.attrs["note"] == ""


@pytest.mark.parametrize("position", [0, 99, -1])
def test_a_position_out_of_range_is_one_message(lm: Checkpoint, position: int) -> None:
    count = len(analyze(lm, TEXT).target_ids)
    with pytest.raises(
        ValueError, match=rf"^position {position} is outside the text's tokens: choose one of 1\.\.{count}$"
    ):
        atlas.agreement(lm, TEXT, position=position)


def test_a_translator_is_compared_and_a_position_that_is_no_number_refused(tiny_checkpoints, lm) -> None:
    translator = atlas.agreement(
        load_checkpoint(tiny_checkpoints["encoder-decoder"]), TEXT
    )  # test_translator_agreement
    assert translator.index.names == ["attention", "layer", "head"]
    with pytest.raises(ValueError, match="whole number counted from 1"):
        atlas.agreement(lm, TEXT, position="2")
    with pytest.raises(
        ValueError, match=r"^the corrupted text \(the text given\) has \d+ tokens and the text \d+: patching pairs"
    ):
        atlas.agreement(lm, TEXT, corrupted="the dog")


@pytest.mark.parametrize("position", [None, 4])
def test_the_corrupted_run_kept_as_ids_reproduces_the_patching_columns(lm: Checkpoint, position) -> None:
    frame = atlas.agreement(lm, TEXT, position=position)  # a shuffled corrupted run: decoded, it may read otherwise
    ids = frame.attrs["corrupted_ids"]
    assert ids[0] == lm.config.bos_id and len(ids) == frame.attrs["position"]  # the start of text, up to the position
    assert frame.attrs["corrupted"] == lm.tokenizer.decode(ids[1:])
    again = atlas.agreement(lm, TEXT, position=position, corrupted=ids)
    assert again.attrs["corrupted_ids"] == ids
    for method in METHODS:
        np.testing.assert_allclose(again[method].to_numpy(), frame[method].to_numpy(), err_msg=method)
    without_start = atlas.agreement(lm, TEXT, position=position, corrupted=ids[1:])
    assert without_start.attrs["corrupted_ids"] == ids


def test_corrupted_ids_of_another_count_or_outside_the_vocabulary_are_refused(lm: Checkpoint) -> None:
    with pytest.raises(ValueError, match=r"^the corrupted token ids \(the token ids given\) have 2 tokens and"):
        atlas.agreement(lm, TEXT, corrupted=[5, 6])
    count = len(analyze(lm, TEXT).target_ids) - 1
    with pytest.raises(ValueError, match="token ids are 0 to"):
        atlas.agreement(lm, TEXT, corrupted=[lm.config.vocab_size] * count)
    with pytest.raises(ValueError, match="corrupted is a text or a list of token ids"):
        atlas.agreement(lm, TEXT, corrupted=[])


def test_the_notebook_guides_induction_example_gives_its_correlation() -> None:
    guide = " ".join((Path(__file__).resolve().parents[1] / "docs" / "notebook.md").read_text().split())
    call = re.search(r'atlas\.agreement\(m, "([^"]+)", corrupted="([^"]+)"\)', guide)
    assert call, "the ρ = −0.55 example shows the corrupted text it needs"
    frame = atlas.agreement(atlas.load("induction"), call[1], corrupted=call[2])
    rho = frame.abs().rank().corr().loc["attention", "activation patching"]
    assert f"ρ = {rho:.2f}".replace("-", "−") in guide
    assert frame.loc[(2, 1), "activation patching"] == pytest.approx(0.160, abs=5e-4)
