"""The shipped induction model: its heads copy, and its snapshots catch the moment they learned to."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.induction import measure
from inference.checkpoint import load_checkpoint
from inference.snapshots import list_snapshots, load_snapshot

INDUCTION = Path(__file__).resolve().parents[1] / "checkpoints" / "induction"


@pytest.fixture(scope="module")
def ckpt():
    return load_checkpoint(INDUCTION)


def test_its_best_head_copies_and_the_second_copy_costs_under_a_quarter_of_the_first(ckpt) -> None:
    report = measure(ckpt.model, ckpt.config.vocab_size, ckpt.config.bos_id)
    _, _, score = report.best(report.induction)
    assert score >= 0.8
    assert report.second_copy_loss < report.first_copy_loss / 4


def test_the_induction_head_sits_in_the_second_layer_after_a_previous_token_head_in_the_first(ckpt) -> None:
    report = measure(ckpt.model, ckpt.config.vocab_size, ckpt.config.bos_id)
    assert report.best(report.induction)[0] == "decoder.layers.1.self_attn"
    assert max(report.previous_token["decoder.layers.0.self_attn"]) >= 0.3


def test_the_snapshots_span_the_change_from_no_copying_to_copying(ckpt) -> None:
    snapshots = list_snapshots(INDUCTION)
    assert len(snapshots) >= 8
    scores = []
    for snapshot in snapshots:
        model = load_snapshot(ckpt, snapshot.step).model
        report = measure(model, ckpt.config.vocab_size, ckpt.config.bos_id)
        scores.append(report.best(report.induction)[2])
    assert scores[0] < 0.1 and scores[-1] >= 0.8
    assert sum(0.1 <= s < 0.7 for s in scores) >= 2, "some snapshots fall inside the change"


def test_its_card_records_the_probe_and_the_run_curve(ckpt) -> None:
    metrics = ckpt.card["metrics"]
    assert metrics["induction"]["best_induction_head"]["score"] >= 0.8
    history = ckpt.card["training"]["history"]
    assert all({"induction", "copy_loss"} <= set(h) for h in history)


def test_the_last_snapshot_is_the_step_the_shipped_weights_were_saved_at(ckpt) -> None:
    assert list_snapshots(INDUCTION)[-1].step == ckpt.card["training"]["best_step"] == 5900
