"""One training run: set up (seeded, its model built or resumed on its device, its data, Adam), then step by step:
an update, a validation every `eval_every` steps that saves the best checkpoint, snapshots, and, under
`--minutes`, the steps fitted to the wall-clock budget (training.clock).
"""

from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from tqdm import tqdm

from analysis.induction import measure
from inference.checkpoint import save_checkpoint
from inference.tokenizer import Tokenizer
from model.config import ModelConfig
from model.factory import build_model
from training import clock as wall
from training.batches import TrainingData, evaluate_loss, loss_of, training_data
from training.checkpoint import (
    Resumed,
    build_card,
    finish_card,
    load_optimizer,
    on_cpu,
    resumed,
    same_draws,
    save_eval_weights,
    save_optimizer,
    save_snapshot,
)
from training.clock import TIMED_STEPS, WARM_STEPS, Clock
from training.schedule import cooled_rate, planned_snapshots, spec_cooldown
from training.tasks import TaskSpec, data_dir


def build(spec: TaskSpec, tok: Tokenizer) -> ModelConfig:
    ids = dict(pad_id=tok.pad_id, unk_id=tok.unk_id, bos_id=tok.bos_id, eos_id=tok.eos_id)
    return ModelConfig(vocab_size=tok.vocab_size, **spec.model, **ids)


def pick_device(name: str) -> torch.device:
    """`auto`: the GPU when torch sees one, else the CPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise FileNotFoundError("--device cuda: torch sees no GPU here (torch.cuda.is_available() is False)")
    return torch.device(name)


def train(
    spec: TaskSpec,
    data_root: Path,
    out: Path,
    seed: int,
    threads: int,
    command: str,
    resume: Path | None = None,
    device: str = "cpu",
    minutes: float | None = None,
) -> Path:
    """Train `spec` on the prepared data; `resume` continues a checkpoint's run where its card says it stopped;
    `minutes` fits the run's steps (at most `spec.max_steps`) to a wall-clock budget (training.clock).

    Resuming restores the weights, the step of the learning-rate schedule and the place in the data order;
    Adam's moment estimates too when the folder holds the run's ``optimizer.safetensors`` (a run's folder
    does, a shipped checkpoint does not: there the first steps after a resume move a little differently).
    """
    run = set_up(spec, data_root, out, seed, threads, command, resume, device, minutes)
    if run.start in run.snapshots:  # the untrained (or resumed) weights, before the first update
        save_snapshot(out, run.model, run.start, run.valid_loss())
    bar = tqdm(desc=spec.name, unit="step", mininterval=1, initial=run.start, total=run.last)
    step = run.start
    while step < run.last:
        step += 1
        loss = train_step(run, step)
        bar.update(1)
        bar.set_postfix(
            loss=f"{loss.item():.3f}", tok_s=f"{run.tokens / (time.time() - run.started):.0f}", refresh=False
        )
        if run.clock is not None and not run.fitted:
            fit_to_budget(run, step, bar)
        cut = run.clock is not None and step < run.last and run.clock.must_stop()
        if step % spec.eval_every == 0 or step == run.last or cut:
            began = wall.now()
            validate(run, step, loss, snapshot=step in run.snapshots or cut)
            if run.fitted and not cut and step < run.last:
                refit_to_budget(run, step, wall.now() - began, bar)
        elif step in run.snapshots:
            save_snapshot(out, run.model, step, run.valid_loss())
        if cut:
            tqdm.write(
                f"stopped by the {minutes}-minute budget at step {step:,} of {run.last:,}; go on with "
                f"--resume {run.path} --max-steps {run.last - step}",
                file=sys.stderr,
            )
            break
    bar.close()
    budget = {"budget": {**run.fitted, "stopped_at": step, "planned_last_step": run.last}} if run.clock else {}
    elapsed = time.time() - run.started
    finish_card(run.path, run.history, step, run.tokens, elapsed, run.seconds_before, step == run.last, budget)
    return run.path


@dataclass
class Run:
    """One training run as its stages share it: what it trains with, where it writes, and how far it has come."""

    spec: TaskSpec
    config: ModelConfig
    tok: Tokenizer
    where: torch.device
    model: nn.Module
    optimizer: torch.optim.Optimizer
    criterion: nn.Module
    data: TrainingData
    out: Path
    command: str
    setup: dict[str, Any]  # the card's hyperparameters.training beyond the spec: seed, threads, device, …
    sources: dict
    tokenizer_bytes: bytes
    start: int
    seconds_before: float
    history: list
    started: float  # time.time() when the run began
    clock: Clock | None
    last: int  # the schedule's last step: start + max_steps, or fewer once fitted to a budget
    cooldown: int
    snapshots: set[int]
    path: Path  # the best checkpoint saved so far (`out` until the first is)
    best: float = float("inf")  # its validation loss
    tokens: int = 0  # target tokens trained on
    fitted: dict = field(default_factory=dict)  # the budget's fit, once made (training.clock)

    def valid_loss(self) -> float:
        return evaluate_loss(self.model, self.data.valid, self.config.kind, self.tok.pad_id)


def set_up(
    spec: TaskSpec,
    data_root: Path,
    out: Path,
    seed: int,
    threads: int,
    command: str,
    resume: Path | None,
    device: str,
    minutes: float | None,
) -> Run:
    """The run `train` makes: seeded, its model built (or resumed) on its device, its data, Adam, the schedule."""
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    rng = random.Random(seed)
    folder = data_dir(spec.name, data_root)
    if not (folder / "tokenizer.model").is_file():
        raise FileNotFoundError(f"{folder}: no prepared data; run `python -m training.data prepare {spec.name}` first")
    tok = Tokenizer.from_file(folder / "tokenizer.model")
    config = build(spec, tok)
    where = pick_device(device)
    model = build_model(config).train()
    before = Resumed(command) if resume is None else resumed(resume, folder, spec, config, model, command)
    model.to(where)  # after the resumed weights are in: the optimizer below is built on the moved parameters
    data = training_data(spec, tok, folder, config, rng)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{spec.name}: {n_params:,} parameters, {json.dumps(data.size)}", file=sys.stderr)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    if resume is not None:
        print(load_optimizer(resume, model, optimizer, before.start), file=sys.stderr)
        if same_draws(before, spec, data.size):  # the earlier steps' batches: a resumed run reads on, not from the top
            for _ in range(before.start):
                next(data.batches)
        else:
            print("another batch size or other data than the resumed run's: batches drawn afresh", file=sys.stderr)
    criterion = nn.CrossEntropyLoss(ignore_index=tok.pad_id, label_smoothing=spec.label_smoothing)
    started = time.time()
    last = before.start + spec.max_steps
    device_name = torch.cuda.get_device_name(where) if where.type == "cuda" else "cpu"
    return Run(
        spec=spec,
        config=config,
        tok=tok,
        where=where,
        model=model,
        optimizer=optimizer,
        criterion=criterion,
        data=data,
        out=out,
        command=before.command,
        setup={
            "seed": seed,
            "threads": threads,
            "device": device_name,
            "parameters": n_params,
            "resumed_from": before.hyperparameters,
        },
        sources=json.loads((folder / "sources.json").read_text(encoding="utf-8")),
        tokenizer_bytes=(folder / "tokenizer.model").read_bytes(),
        start=before.start,
        seconds_before=before.seconds_before,
        history=list(before.history),
        started=started,
        clock=Clock(minutes, wall.now()) if minutes else None,
        last=last,
        cooldown=spec_cooldown(spec, spec.max_steps),
        snapshots=planned_snapshots(spec, before.start, last),
        path=out,
    )


def train_step(run: Run, step: int) -> Tensor:
    """One update: the schedule's rate at `step`, a batch's loss (bf16 matmuls on a GPU), its gradient and Adam's
    step; returns the loss."""
    for group in run.optimizer.param_groups:
        group["lr"] = cooled_rate(step, run.last, run.cooldown, run.config.d_model, run.spec.warmup, run.spec.lr_factor)
    with torch.autocast(run.where.type, dtype=torch.bfloat16, enabled=run.where.type == "cuda"):  # H100: bf16 matmuls
        loss, n = loss_of(run.model, next(run.data.batches), run.config.kind, run.criterion)
    run.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    run.optimizer.step()
    run.tokens += n
    return loss


def fit_to_budget(run: Run, step: int, bar: tqdm) -> None:
    """The budget's clock at `step`: after the warm-up steps it starts timing; after the timed steps it times one
    validation, fits the run's last step, cool-down and snapshots to the minutes left, and records the fit."""
    clock = run.clock
    if step - run.start == WARM_STEPS:
        sync(run.where)
        clock.timing_from = wall.now()
    elif step - run.start == WARM_STEPS + TIMED_STEPS:
        sync(run.where)
        per_step = (wall.now() - clock.timing_from) / TIMED_STEPS
        begun = wall.now()
        run.valid_loss(), copying(run.model, run.config)  # timed, not recorded
        more = clock.fit(per_step, wall.now() - begun, run.spec.eval_every)
        clock.mark = (step, wall.now())
        run.last = min(run.last, step + more)
        run.cooldown = spec_cooldown(run.spec, run.last - run.start)
        run.snapshots = planned_snapshots(run.spec, run.start, run.last)
        bar.total = run.last
        run.fitted = {
            "budget_minutes": clock.minutes,
            "seconds_per_step": round(per_step, 4),
            "validation_seconds": round(clock.validation_seconds, 2),
            "steps_fitted": run.last - run.start,
            "cooldown": run.cooldown,
        }
        tqdm.write(f"{clock.minutes} min: {json.dumps(run.fitted)}", file=sys.stderr)


def refit_to_budget(run: Run, step: int, validation_seconds: float, bar: tqdm) -> None:
    """After a validation at `step`: the budget fitted again from the speed of the steps since the last fit
    (training.clock.refitted_last), the run's last step, cool-down and snapshots moved to match, the refit
    recorded."""
    clock = run.clock
    sync(run.where)
    mark, at = clock.mark, wall.now()
    clock.mark = (step, at)
    if step <= mark[0] or wall.cooling(step, run.last, run.cooldown):
        return  # nothing timed since the last fit, or the cool-down's line down is laid
    per_step = wall.speed_since(mark, step, at, validation_seconds)
    last = wall.refitted_last(
        start=run.start,
        cap=run.start + run.spec.max_steps,
        last=run.last,
        cooldown=run.cooldown,
        step=step,
        more=clock.fit(per_step, validation_seconds, run.spec.eval_every),
        cooldown_of=lambda steps: spec_cooldown(run.spec, steps),
    )
    if last == run.last:
        return
    run.last, run.cooldown = last, spec_cooldown(run.spec, last - run.start)
    run.snapshots = {s for s in run.snapshots if s <= step} | planned_snapshots(run.spec, run.start, run.last)
    bar.total = run.last
    refits = run.fitted.setdefault("refits", [])
    refits.append({"step": step, "seconds_per_step": round(per_step, 4), "steps_fitted": run.last - run.start})
    run.fitted.update(steps_fitted=run.last - run.start, cooldown=run.cooldown)
    tqdm.write(f"{clock.minutes} min, refitted at step {step:,}: {json.dumps(refits[-1])}", file=sys.stderr)


def validate(run: Run, step: int, train_loss: Tensor, snapshot: bool) -> None:
    """A validation at `step`: its losses (and a language model's copying scores) into the history, the weights
    kept for averaging, the checkpoint saved when it is the best yet, and a snapshot when `snapshot`."""
    valid_loss = run.valid_loss()
    run.history.append({"step": step, "valid_loss": round(valid_loss, 4), "train_loss": round(train_loss.item(), 4)})
    run.history[-1] |= copying(run.model, run.config)
    tqdm.write(f"step {step}: {json.dumps(run.history[-1])}", file=sys.stderr)
    save_eval_weights(run.out, run.model, step, valid_loss)
    if valid_loss < run.best:  # saved at once: a run stopped early still leaves its best checkpoint
        run.best = valid_loss
        run.path = save_best(run, step)
    if snapshot:
        save_snapshot(run.out, run.model, step, valid_loss)


def save_best(run: Run, step: int) -> Path:
    """The checkpoint of the best step so far, `step`: float16 weights, a card that records the run up to here
    (finish_card completes it once the run is over), and the float32 weights and Adam's state for a resume."""
    elapsed = time.time() - run.started
    training = {
        "setup": dict(run.setup),
        "steps_done": step,
        "best_step": step,
        "finished": False,
        "resumed_at": run.start,
        "best_valid_loss": round(run.best, 4),
        "history": list(run.history),
        "seconds": round(elapsed),
        "seconds_total": round(run.seconds_before + elapsed),  # with the runs it resumed, as their cards say
        "tokens_per_second": round(run.tokens / elapsed),
        **run.data.size,
    }
    run.model.eval()
    card = build_card(run.spec, run.config, run.sources, training, run.command)
    saved = save_checkpoint(run.out, on_cpu(run.model), run.tokenizer_bytes, card, bits=16)
    save_optimizer(saved, run.model, run.optimizer, step)
    run.model.train()
    return saved


def sync(device: torch.device) -> None:
    """Wait for the GPU's queued work, so that a time read after it is the time the work took."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def copying(model: nn.Module, config: ModelConfig) -> dict[str, float]:
    """A decoder-only model's best induction score and its copy losses on the probe of analysis.induction
    (nothing for other kinds): the history then shows when the model learns to copy from its context."""
    if config.has_encoder:
        return {}
    model.eval()
    report = measure(model, config.vocab_size, config.bos_id)
    model.train()
    return {
        "induction": round(report.best(report.induction)[2], 4),
        "previous_token": round(report.best(report.previous_token)[2], 4),
        "copy_loss": [round(report.first_copy_loss, 4), round(report.second_copy_loss, 4)],
    }
