"""The training budget's rules at their edges (training/clock.py, training/loop.py), on a clock the test moves:
the guard stops a run exactly when what is left no longer covers one and a half validations and the save, a refit
times the steps since the last fit without the validation it was made after, and a refit never plans past the
task's own steps."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from inference.checkpoint import load_checkpoint
from tests.test_training import tiny_spec, write_task
from tests.test_training_budget import drive_the_clock
from training import clock as clock_module
from training import loop as train_module
from training.clock import SAVE_SECONDS, Clock
from training.loop import train


def test_the_guard_stops_when_what_is_left_falls_below_one_and_a_half_validations_and_the_save(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    monkeypatch.setattr(clock_module, "now", lambda: now[0])
    clock = Clock(minutes=1.0, started=0.0)
    clock.validation_seconds = 2.0
    edge = 60.0 - (1.5 * 2.0 + SAVE_SECONDS)
    now[0] = edge
    assert not clock.must_stop(), "exactly enough left: it goes on"
    now[0] = edge + 0.5
    assert clock.must_stop()
    now[0] = 60.0 - (1.0 * 2.0 + SAVE_SECONDS) - 0.5  # more than one validation and the save, less than 1.5
    assert clock.must_stop()


def costed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validation_s: float, minutes: float, max_steps: int):
    """A tiny language model's budgeted run at 0.1 s a step on the test's clock, each validation costing
    `validation_s` there (the first fit's timed one nothing): its card's training record."""
    write_task(tmp_path / "data", "lm")
    now = drive_the_clock(monkeypatch, lambda step: 0.1)
    validate = train_module.validate

    def costed_validation(*args, **kwargs) -> None:
        now[0] += validation_s
        return validate(*args, **kwargs)

    monkeypatch.setattr(train_module, "validate", costed_validation)
    spec = replace(tiny_spec("lm"), max_steps=max_steps, eval_every=50, cooldown_share=0.2)
    out = train(spec, tmp_path / "data", tmp_path / "run", seed=0, threads=1, command="t", minutes=minutes)
    return load_checkpoint(out).card["training"]


def test_a_refit_times_the_steps_without_the_validation_it_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.1 s a step and a 5 s validation every 50 steps: the refit at step 50 measures 0.1 s a step (the 25 steps
    since the first fit and the validation's 5 s were 7.5 s: the validation is its own share, not the steps')."""
    training = costed_run(tmp_path, monkeypatch, validation_s=5.0, minutes=1.0, max_steps=100_000)
    refit = training["budget"]["refits"][0]
    assert refit["step"] == 50 and refit["seconds_per_step"] == pytest.approx(0.1)


def test_a_refit_never_plans_past_the_tasks_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Half a minute holds about 200 steps at 0.1 s; the task asks 100: the first fit and every refit stop there."""
    training = costed_run(tmp_path, monkeypatch, validation_s=0.0, minutes=0.5, max_steps=100)
    budget = training["budget"]
    assert budget["steps_fitted"] == 100 == budget["planned_last_step"] == training["steps_done"]
    assert training["finished"]
