"""A run given minutes, not steps (`--minutes`): it times its first steps, fits its schedule to the budget, stops
in time with every file a resumable run needs, and runs as the GPU machine has it (no app packages)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from inference.checkpoint import CheckpointError, load_checkpoint
from tests.test_training import tiny_spec, write_task
from training import clock as clock_module
from training import loop as train_module
from training.checkpoint import OPTIMIZER
from training.clock import MARGIN, SAVE_SECONDS, TIMED_STEPS, WARM_STEPS, Clock
from training.loop import train

ROOT = Path(__file__).resolve().parent.parent
# What the GPU machine lacks (training must not import them): the app's packages and the data preparers'.
NOT_ON_THE_GPU_MACHINE = ["streamlit", "plotly", "pandas", "rdata", "psutil", "transformers", "tokenizers", "gguf"]


def test_the_clock_fits_steps_and_a_validation_share_into_what_is_left() -> None:
    clock = Clock(minutes=1.0, started=time.time())
    more = clock.fit(seconds_per_step=0.1, validation_seconds=2.0, eval_every=10)
    # 60 s, less one validation and the save, at 0.1 s per step plus a tenth of a 2 s validation, with a margin
    assert abs(more - MARGIN * (60 - 2.0 - SAVE_SECONDS) / 0.3) <= 2
    assert not clock.must_stop()
    assert Clock(minutes=0.05, started=time.time() - 10).fit(0.1, 0.5, 10) == 0, "nothing left: no more steps"
    assert Clock(minutes=0.05, started=time.time() - 10).must_stop()


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_a_budget_fits_the_run_and_leaves_a_finished_resumable_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clock_module, "SAVE_SECONDS", 0.5)  # a tiny model saves in milliseconds
    monkeypatch.setattr(clock_module.Clock, "must_stop", lambda self: False)  # the guard has its own test
    write_task(tmp_path / "data", "lm")
    spec = replace(tiny_spec("lm"), max_steps=1_000_000, eval_every=50, cooldown_share=0.2)
    out = train(spec, tmp_path / "data", tmp_path / "run", seed=0, threads=1, command="t", minutes=0.1)
    card = load_checkpoint(out).card
    budget = card["training"]["budget"]
    fitted = budget["steps_fitted"]
    assert WARM_STEPS + TIMED_STEPS < fitted < 1_000_000, "the schedule was fitted to six seconds"
    assert budget["budget_minutes"] == 0.1 and budget["cooldown"] == round(0.2 * fitted)
    assert card["training"]["finished"] and card["training"]["steps_done"] == fitted == budget["stopped_at"]
    assert card["training"]["tokens_seen"] > 0
    for name in ("model.safetensors", "config.json", "card.json", "tokenizer.model", OPTIMIZER):
        assert (out / name).is_file(), name
    snapshots = json.loads((out / "snapshots" / "index.json").read_text(encoding="utf-8"))["snapshots"]
    assert snapshots[0]["step"] == 0 and snapshots[-1]["step"] == fitted, "snapshots over the fitted run"
    assert load_file(out / OPTIMIZER).keys() >= {f"weights.{k}" for k in load_file(out / "model.safetensors")}

    assert replays(spec, tmp_path, out, fitted), "--max-steps with the fitted count replays the run"


def drive_the_clock(monkeypatch: pytest.MonkeyPatch, seconds_per_step) -> list[float]:
    """A budget that reads a clock the test moves: each training step costs `seconds_per_step(step)` on it, and
    nothing else (validations, saves) costs anything. Returns the clock, [now]."""
    now = [0.0]
    monkeypatch.setattr(clock_module, "now", lambda: now[0])
    step_once = train_module.train_step

    def costed_step(run, step):
        now[0] += seconds_per_step(step)
        return step_once(run, step)

    monkeypatch.setattr(train_module, "train_step", costed_step)
    return now


def first_fit(minutes: float, seconds_per_step: float) -> int:
    """The steps the first fit adds, validations costing nothing: Clock.fit after the warm-up and timed steps."""
    spent = (WARM_STEPS + TIMED_STEPS) * seconds_per_step
    return int(MARGIN * (60 * minutes - spent - SAVE_SECONDS) / seconds_per_step)


def run_on_the_clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seconds_per_step, minutes: float):
    """A tiny language model's budgeted run (a validation every 50 steps, a fifth of it cooling down) on a clock
    the test moves (drive_the_clock): its spec, folder, card's training record and the clock."""
    write_task(tmp_path / "data", "lm")
    now = drive_the_clock(monkeypatch, seconds_per_step)
    spec = replace(tiny_spec("lm"), max_steps=100_000, eval_every=50, cooldown_share=0.2)
    out = train(spec, tmp_path / "data", tmp_path / "run", seed=0, threads=1, command="t", minutes=minutes)
    return spec, out, load_checkpoint(out).card["training"], now


def replays(spec, tmp_path: Path, out: Path, steps: int) -> bool:
    """Whether the same spec run for `steps` steps without a clock ends on the same weights as `out`."""
    replay = train(replace(spec, max_steps=steps), tmp_path / "data", tmp_path / "b", seed=0, threads=1, command="r")
    a, b = load_file(out / "model.safetensors"), load_file(replay / "model.safetensors")
    return all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_a_run_slow_at_first_refits_its_budget_and_fills_its_minutes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A niced run whose first steps met a busy machine: 1 s a step until step 40, then 0.1 s. The first fit lays
    the schedule over what 1 s a step allows; the refits at the validations before the cool-down lengthen it."""
    spec, out, training, now = run_on_the_clock(tmp_path, monkeypatch, lambda step: 1.0 if step <= 40 else 0.1, 2.0)
    budget, first = training["budget"], WARM_STEPS + TIMED_STEPS + first_fit(2.0, 1.0)
    fitted = budget["steps_fitted"]
    assert budget["refits"] and budget["refits"][0]["step"] == 50, "refitted at the first validation"
    assert fitted > 5 * first, f"{fitted} steps: the faster steps were not fitted (first fit: {first})"
    assert budget["cooldown"] == round(0.2 * fitted)
    assert training["finished"] and training["steps_done"] == fitted == budget["stopped_at"]
    assert 0.8 * 120 < now[0] <= 120, f"{now[0]:.1f} of 120 s used"
    assert replays(spec, tmp_path, out, fitted), "the refits bent no rate: --max-steps replays the run"


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_a_run_slowed_later_shortens_its_plan_and_still_cools_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.1 s a step, then 0.3 s from step 61 (another process began): the plan the first fit laid would overrun and
    be cut by the guard before its cool-down; the refits shorten it, and the run ends on its finished schedule."""
    spec, out, training, now = run_on_the_clock(tmp_path, monkeypatch, lambda step: 0.1 if step <= 60 else 0.3, 1.0)
    budget, first = training["budget"], WARM_STEPS + TIMED_STEPS + first_fit(1.0, 0.1)
    fitted = budget["steps_fitted"]
    assert fitted < first / 2, f"{fitted} steps: the slower steps were not fitted (first fit: {first})"
    assert all(refit["step"] <= fitted - budget["cooldown"] for refit in budget["refits"]), "none in the cool-down"
    assert training["finished"] and training["steps_done"] == fitted == budget["stopped_at"], "not cut: cooled"
    assert now[0] <= 60
    assert replays(spec, tmp_path, out, fitted), "the refits bent no rate: --max-steps replays the run"


def test_a_refit_never_lays_the_cool_down_before_the_step_it_is_made_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten times slower from step 61: what is left fits fewer steps than the cool-down needs from step 100 on, so the
    plan ends as soon as a cool-down beginning at step 100 allows (the guard then stops what still overruns)."""
    _, _, training, _ = run_on_the_clock(tmp_path, monkeypatch, lambda step: 0.1 if step <= 60 else 1.0, 1.0)
    refit = training["budget"]["refits"][-1]
    assert refit["step"] == 100
    last = refit["steps_fitted"]
    assert last - round(0.2 * last) == 100, f"{last}: its cool-down begins at {last - round(0.2 * last)}"


def test_a_run_that_would_overrun_its_budget_stops_saved_and_says_how_to_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    write_task(tmp_path / "data", "lm")
    spec = replace(tiny_spec("lm"), max_steps=1_000, eval_every=1_000)
    monkeypatch.setattr(clock_module.Clock, "must_stop", lambda self: self.validation_seconds > 0)  # once fitted
    out = train(spec, tmp_path / "data", tmp_path / "run", seed=0, threads=1, command="t", minutes=60)
    stop = WARM_STEPS + TIMED_STEPS  # the guard asks from the fit on
    training = load_checkpoint(out).card["training"]
    assert not training["finished"] and training["steps_done"] == stop == training["best_step"]
    assert training["budget"]["stopped_at"] == stop < training["budget"]["planned_last_step"] == 1_000
    assert f"--resume {out} --max-steps {1_000 - stop}" in capsys.readouterr().err
    assert (out / OPTIMIZER).is_file()
    again = train(
        replace(spec, max_steps=2), tmp_path / "data", tmp_path / "b", seed=0, threads=1, command="g", resume=out
    )
    assert load_checkpoint(again).card["training"]["steps_done"] == stop + 2


# lm-english's size took 2 minutes a run on one core (two steps of 16,384 tokens and three validations); what this
# test asks of it (the imports, the files of a resumable run) does not depend on the size.
SMALL = ["--set", "batch_tokens=512", "--set", "model.d_model=64", "--set", "model.d_ff=128",
         "--set", "model.n_decoder_layers=2"]  # fmt: skip


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_the_training_command_runs_without_the_apps_packages(tmp_path: Path) -> None:
    """As on the GPU machine (torch, numpy, safetensors, sentencepiece, tqdm, sacrebleu): `python -m atlas train
    --task lm --minutes …` trains from a prepared folder and writes what a resumable run needs."""
    folder = write_task(tmp_path / "data", "lm")
    for split in ("train", "valid"):  # windows of the task's own block size
        (folder / f"{split}.txt").write_text((folder / f"{split}.txt").read_text("utf-8") * 40, "utf-8")
    script = textwrap.dedent(
        f"""
        import importlib.machinery, runpy, sys
        BLOCKED = {NOT_ON_THE_GPU_MACHINE!r}
        class Absent:  # found with no origin (what torch's probes skip), and importing it fails
            def create_module(self, spec):
                raise ModuleNotFoundError(f"{{spec.name}} is not on the GPU machine")
            def exec_module(self, module):
                pass
        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0].lower() in BLOCKED:
                    return importlib.machinery.ModuleSpec(name, Absent(), origin=None)
        sys.meta_path.insert(0, Blocker())
        sys.argv = ["atlas", "train", "--task", "lm", "--data", {str(tmp_path / "data")!r}, "--max-steps", "2",
                    "--minutes", "5", "--device", "auto", "--threads", "1", "--out", {str(tmp_path / "out")!r},
                    *{SMALL!r}]
        runpy.run_module("atlas", run_name="__main__")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    for name in ("model.safetensors", "config.json", "card.json", "tokenizer.model", OPTIMIZER):
        assert (out / name).is_file(), name
    training = json.loads((out / "card.json").read_text(encoding="utf-8"))["training"]
    assert training["steps_done"] == 2 and training["finished"]
    assert training["budget"] == {"stopped_at": 2, "planned_last_step": 2}, "two steps: too few to fit"


def test_snapshots_around_the_induction_head_catch_it_before_and_after_it_forms(tmp_path: Path, capsys) -> None:
    from training.snapshots import around_induction, spread
    from training.snapshots import main as snapshots_main

    rise = [0.02, 0.02, 0.03, 0.02, 0.05, 0.2, 0.45, 0.6, 0.7, 0.72]  # a phase change between steps 50 and 90
    history = [{"step": 10 * (i + 1), "induction": score} for i, score in enumerate(rise)]
    assert around_induction(history, before=100, count=2) == [50, 90]
    assert around_induction(history, before=100, count=3) == [50, 70, 90]
    assert around_induction(history, before=80, count=2) == [50, 70], "only steps before the shipped weights"
    with pytest.raises(CheckpointError, match="no induction head formed: the best score went from 0.020 to 0.050"):
        around_induction(history[:5], before=100)
    assert spread(history, before=100, count=3) == [10, 50, 90], "no head: evenly over the run instead"
    with pytest.raises(CheckpointError, match="no validation before its shipped weights"):
        spread(history, before=10, count=3)

    write_task(tmp_path / "data", "lm")
    spec = replace(tiny_spec("lm"), max_steps=10, eval_every=1, snapshot_every=1)
    run = train(spec, tmp_path / "data", tmp_path / "run", seed=0, threads=1, command="t")
    card = json.loads((run / "card.json").read_text(encoding="utf-8"))
    best = card["training"]["best_step"]
    for entry, score in zip(card["training"]["history"], rise, strict=True):
        entry["induction"] = score  # the tiny model forms no head: its history is given one
    (run / "card.json").write_text(json.dumps(card), encoding="utf-8")
    args = [str(run), "--from", str(run), "--data", str(tmp_path / "data"), "--around-induction", "2"]
    assert snapshots_main(args) == 0
    index = json.loads((run / "snapshots" / "index.json").read_text(encoding="utf-8"))
    assert [e["step"] for e in index["snapshots"]] == [*around_induction(card["training"]["history"], best, 2), best]
    assert "around the induction head's forming" in capsys.readouterr().err
