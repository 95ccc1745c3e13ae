"""The induction and previous-token scores and the copy losses of analysis.induction."""

from __future__ import annotations

import torch

from analysis.induction import copy_losses, head_scores, measure, repeated_tokens
from model.config import ModelConfig
from model.factory import build_model

L = 5


def test_the_probe_is_bos_and_a_run_of_ordinary_tokens_twice() -> None:
    ids = repeated_tokens(50, 2, length=L, batch=3, seed=1)
    assert ids.shape == (3, 1 + 2 * L)
    assert (ids[:, 0] == 2).all() and (ids[:, 1:] >= 4).all()
    assert torch.equal(ids[:, 1 : L + 1], ids[:, L + 1 :])


def _pattern(offset: int) -> torch.Tensor:
    """Weights (1, 1, T, T) that put everything on key t - offset (on key 0 where that does not exist)."""
    t = 1 + 2 * L
    weights = torch.zeros(1, 1, t, t)
    for q in range(t):
        weights[0, 0, q, max(q - offset, 0)] = 1.0
    return weights


def test_a_head_reading_the_token_after_the_earlier_occurrence_scores_one_for_induction() -> None:
    induction, previous = head_scores(_pattern(L - 1), L)
    assert induction == [1.0] and previous == [0.0]


def test_a_head_reading_the_token_before_scores_one_as_previous_token() -> None:
    induction, previous = head_scores(_pattern(1), L)
    assert previous == [1.0] and induction == [0.0]


def test_copy_losses_read_the_first_and_second_run_apart() -> None:
    ids = repeated_tokens(20, 2, length=L, batch=1)
    logits = torch.zeros(1, ids.shape[1], 20)
    for pos in range(ids.shape[1] - 1):  # certain of every next token in the second run only
        if pos >= L + 1:
            logits[0, pos, ids[0, pos + 1]] = 50.0
    first, second = copy_losses(logits, ids, L)
    assert abs(first - torch.log(torch.tensor(20.0)).item()) < 1e-4
    assert second < 1e-6


def test_measure_scores_every_self_attention_head_of_a_decoder() -> None:
    torch.manual_seed(0)
    config = ModelConfig(
        kind="decoder-only",
        vocab_size=40,
        d_model=16,
        n_heads=2,
        n_encoder_layers=0,
        n_decoder_layers=2,
        d_ff=32,
        max_len=128,
    )
    report = measure(build_model(config).eval(), 40, 2, length=L)
    assert sorted(report.induction) == ["decoder.layers.0.self_attn", "decoder.layers.1.self_attn"]
    assert all(len(row) == 2 and all(0 <= s <= 1 for s in row) for row in report.induction.values())
    summary = report.summary()
    assert summary["best_induction_head"]["layer"] in (1, 2) and summary["first_copy_loss"] > 0


def test_the_probe_is_shortened_to_fit_a_model_of_few_positions() -> None:
    torch.manual_seed(0)
    config = ModelConfig(
        kind="decoder-only", vocab_size=40, d_model=16, n_heads=2, n_encoder_layers=0, n_decoder_layers=1,
        d_ff=32, max_len=21,
    )  # fmt: skip
    report = measure(build_model(config).eval(), 40, 2)
    assert report.length == 10
