"""`python -m training.train --task {reverse,translate,lm}`: train a shipped model from the prepared data;
`--task lm --text FILE`: a small language model on any UTF-8 text, into a folder the app lists (train_text).

The paper's recipe (section 5.3): Adam with β=(0.9, 0.98), ε=1e-9, lrate = factor · d_model^-0.5 ·
min(step^-0.5, step · warmup^-1.5), label smoothing 0.1 for translation; `--cooldown N` takes the rate of a run's
last N steps in a straight line down to 0 (not the paper's: see cooled_rate). Validation every `eval_every` steps;
the best validation loss is what gets saved. Deterministic under `--seed` for a given thread count.
"""

from __future__ import annotations

import argparse
import bisect
import copy
import dataclasses
import hashlib
import json
import random
import shlex
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file, save_model
from torch import Tensor, nn
from tqdm import tqdm

from analysis.induction import measure
from inference.catalog import checkpoints_dir
from inference.checkpoint import CARD, Checkpoint, CheckpointError, load_checkpoint, recorded, save_checkpoint
from inference.decoding import pad_rows
from inference.snapshots import INDEX as SNAPSHOT_INDEX
from inference.snapshots import SNAPSHOTS
from inference.tokenizer import Tokenizer
from model.config import ModelConfig
from model.factory import build_model
from model.forward import forward
from training import clock as wall
from training.clock import TIMED_STEPS, WARM_STEPS, Clock
from training.data.common import read_lines
from training.data.induction import random_run
from training.data.text import TextError, prepare_text, slug
from training.evaluate import evaluate
from training.tasks import TASKS, TEXT_MODEL, TaskSpec, data_dir, text_spec

FIRST_WORD = 4  # ids below are the special pieces (pad, unk, <s>, </s>)


def encode_pairs(tok: Tokenizer, folder: Path, split: str, max_len: int) -> list[tuple[list[int], list[int]]]:
    """(source + eos, bos + target + eos) id pairs, dropping pairs longer than `max_len` on either side."""
    sources, targets = read_lines(folder / f"{split}.src"), read_lines(folder / f"{split}.tgt")
    pairs = []
    for s, t in zip(sources, targets, strict=True):
        src, tgt = tok.encode(s) + [tok.eos_id], [tok.bos_id] + tok.encode(t) + [tok.eos_id]
        if len(src) <= max_len and len(tgt) <= max_len:
            pairs.append((src, tgt))
    return pairs


def pair_batches(pairs: list, batch_tokens: int, rng: random.Random, pad_id: int) -> Iterator[tuple[Tensor, Tensor]]:
    """Endless batches of similar-length pairs, about `batch_tokens` padded target tokens each."""
    while True:
        order = list(range(len(pairs)))
        rng.shuffle(order)
        for start in range(0, len(order), 4096):  # sort within large shuffled pools: little padding, still random
            pool = sorted(order[start : start + 4096], key=lambda i: (len(pairs[i][1]), len(pairs[i][0])))
            batches, batch, width = [], [], 0
            for i in pool:
                width = max(width, len(pairs[i][1]), len(pairs[i][0]))
                if batch and width * (len(batch) + 1) > batch_tokens:
                    batches.append(batch)
                    batch, width = [], max(len(pairs[i][1]), len(pairs[i][0]))
                batch.append(i)
            batches.append(batch)
            rng.shuffle(batches)
            for b in batches:
                yield pad_rows([pairs[i][0] for i in b], pad_id), pad_rows([pairs[i][1] for i in b], pad_id)


def fixed_batches(pairs: list, batch_tokens: int, pad_id: int) -> list[tuple[Tensor, Tensor]]:
    """Every pair once, sorted by length, in batches of about `batch_tokens` padded tokens (validation)."""
    ordered = sorted(pairs, key=lambda p: (len(p[1]), len(p[0])))
    batches, batch = [], []
    for pair in ordered:
        if batch and max(len(pair[0]), len(pair[1])) * (len(batch) + 1) > batch_tokens:
            batches.append(batch)
            batch = []
        batch.append(pair)
    batches.append(batch)
    return [(pad_rows([p[0] for p in b], pad_id), pad_rows([p[1] for p in b], pad_id)) for b in batches if b]


def encode_stream(tok: Tokenizer, lines: list[str]) -> tuple[Tensor, Tensor]:
    """All lines as one id stream (bos line eos …) and the offset of each line's bos."""
    ids, starts = [], []
    for line in tqdm(lines, desc="tokenizing", unit="line", mininterval=2, leave=False):
        starts.append(len(ids))
        ids += [tok.bos_id] + tok.encode(line) + [tok.eos_id]
    return torch.tensor(ids), torch.tensor(starts)


def lm_batches(
    stream: Tensor, starts: Tensor, block: int, batch: int, rng: random.Random, spec: TaskSpec | None = None
) -> Iterator[Tensor]:
    """Endless (batch, block + 1) windows of the stream. A window begins at a document's `<s>` (as inference
    does), the document drawn with a probability proportional to its length (a token drawn uniformly, and the
    start of its document: drawing documents uniformly would fill most windows with the corpus's many one-sentence
    documents), or, for `spec.anywhere_share` of them, at any token; `spec.repeat_span_share` of the windows repeat a
    span of their own text later in the window, and `spec.repeat_random_share` are `<s>` and a run of random
    tokens repeated (see :func:`repeat_span`, :func:`repeated_random`): text that rewards copying from the
    context, which is how induction heads are made to form (Olsson et al. 2022)."""
    anywhere = spec.anywhere_share if spec else 0.0
    span_share = spec.repeat_span_share if spec else 0.0
    random_share = spec.repeat_random_share if spec else 0.0
    usable = starts[starts + block + 1 <= len(stream)].tolist()
    last = len(stream) - block - 1
    end = len(stream)  # a token in a document too near the end to fill a window counts for the one before
    vocab = int(stream.max()) + 1
    bos = int(stream[usable[0]]) if usable else 0
    while True:
        windows = []
        for _ in range(batch):
            if rng.random() < anywhere:
                p = rng.randrange(last + 1)
            else:  # the document holding a uniformly drawn token
                p = usable[bisect.bisect_right(usable, rng.randrange(end)) - 1]
            window = stream[p : p + block + 1]
            roll = rng.random()
            if roll < span_share:
                window = repeat_span(window, rng)
            elif roll < span_share + random_share:
                window = repeated_random(block + 1, bos, vocab, rng)
            windows.append(window)
        yield torch.stack(windows)


def repeat_span(window: Tensor, rng: random.Random, shortest: int = 8) -> Tensor:
    """The window with a span of its first half copied in again at a later point, the rest pushed on and cut to
    the same length: "… A … A …", so the tokens of the second A are predictable from the first."""
    n = len(window)
    length = rng.randint(shortest, max(shortest, n // 4))
    first = rng.randrange(0, max(1, n // 2 - length))
    at = rng.randint(first + length, max(first + length, n - length))
    return torch.cat([window[:at], window[first : first + length], window[at:]])[:n]


def repeated_random(
    n: int, bos: int, vocab: int, rng: random.Random, shortest: int = 8, first_ordinary: int = 4
) -> Tensor:
    """`<s>` and a run of random ordinary tokens, repeated until the window is full (n tokens)."""
    length = rng.randint(shortest, max(shortest, (n - 1) // 2))
    run = [rng.randrange(first_ordinary, vocab) for _ in range(length)]
    ids = [bos] + run * (n // length + 1)
    return torch.tensor(ids[:n])


def induction_batches(vocab_size: int, bos: int, pad: int, batch: int, rng: random.Random) -> Iterator[Tensor]:
    """Endless batches of the induction task: each row `<s>` and a run of random words twice, padded."""
    n_words = vocab_size - FIRST_WORD
    while True:
        rows = []
        for _ in range(batch):
            run = [FIRST_WORD + i for i in random_run(rng, n_words)]
            rows.append([bos, *run, *run])
        yield pad_rows(rows, pad)


def sequence_batches(tok: Tokenizer, lines: list[str], batch: int = 32) -> list[Tensor]:
    """Each line as its own row, `<s>` first, no `</s>` (the induction task's sequences), padded, `batch` a batch."""
    rows = [[tok.bos_id, *tok.encode(line)] for line in lines]
    return [pad_rows(rows[i : i + batch], tok.pad_id) for i in range(0, len(rows), batch)]


def lm_eval_windows(stream: Tensor, block: int, limit: int = 400) -> list[Tensor]:
    step = block + 1
    return [stream[i : i + step] for i in range(0, min(len(stream) - step, limit * step), step)]


def validation_batches(
    tok: Tokenizer, folder: Path, kind: str, max_len: int, batch_tokens: int, block_size: int, split: str = "valid"
) -> list:
    """The fixed batches of a task's valid split, which every validation (and training.average) measures: pairs
    sorted by length (encoder-decoder), or windows of `block_size` + 1 tokens, 16 to a batch (language model).
    `split="test"`: the same batches of the test split (training.quantize measures a change of weights on them)."""
    if kind == "encoder-decoder":
        return fixed_batches(encode_pairs(tok, folder, split, max_len), batch_tokens, tok.pad_id)
    if folder.name == "induction":
        return sequence_batches(tok, read_lines(folder / f"{split}.txt"))
    stream, _ = encode_stream(tok, read_lines(folder / f"{split}.txt"))
    windows = [w.unsqueeze(0) for w in lm_eval_windows(stream, block_size)]
    return [torch.cat(windows[i : i + 16]) for i in range(0, len(windows), 16)]


def run_validation_batches(ckpt: Checkpoint, data_root: Path, split: str = "valid") -> list:
    """The validation batches the run that trained `ckpt` measured it on, from the settings its card records (or
    the same batches of another split)."""
    training = ckpt.card["hyperparameters"]["training"]
    folder = data_dir(training["name"], data_root)
    return validation_batches(
        ckpt.tokenizer,
        folder,
        ckpt.config.kind,
        ckpt.config.max_len,
        training["batch_tokens"],
        training["block_size"],
        split,
    )


def explicit_heads(device: torch.device) -> bool:
    """Whether a training pass on `device` computes its heads step by step (QKᵀ, mask, softmax, V: the path the
    pages show, record=True) rather than by torch's fused kernel. On a GPU it does: the kernel torch picks there
    (cuDNN) plans every new batch shape, and the translator's batches change shape every step; the kernels left
    without cuDNN are not yet checked against the explicit path on such masks (scripts/gpu_attention.py does)."""
    return device.type == "cuda"


def loss_of(
    model: nn.Module, batch: Tensor | tuple[Tensor, Tensor], kind: str, criterion: nn.Module
) -> tuple[Tensor, int]:
    """Mean loss over the non-padding target tokens of a batch, and their number; the batch goes to the model's
    device (batches are built on the CPU)."""
    device = next(model.parameters()).device
    source, text = batch if kind == "encoder-decoder" else (None, batch)  # a pair batch: (source, target)
    source = None if source is None else source.to(device, non_blocking=True)
    text = text.to(device, non_blocking=True)
    logits, _ = forward(model, text[:, :-1], source, record=explicit_heads(device))
    gold = text[:, 1:]
    loss = criterion(logits.reshape(-1, logits.shape[-1]), gold.reshape(-1))
    return loss, int((gold != criterion.ignore_index).sum())


@torch.no_grad()
def evaluate_loss(model: nn.Module, batches: list, kind: str, pad_id: int) -> float:
    model.eval()
    criterion = nn.CrossEntropyLoss(ignore_index=pad_id, reduction="sum")
    total, count = 0.0, 0
    for batch in batches:
        loss, n = loss_of(model, batch, kind, criterion)
        total, count = total + float(loss), count + n
    model.train()
    return total / max(count, 1)


def learning_rate(step: int, d_model: int, warmup: int, factor: float) -> float:
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def cooled_rate(step: int, last: int, cooldown: int, d_model: int, warmup: int, factor: float) -> float:
    """The paper's rate, except over the run's last `cooldown` steps (those after ``last - cooldown``): there it
    falls in a straight line from the paper's rate at ``last - cooldown`` to 0 after the last step (a
    "cool-down", as in warmup-stable-decay schedules: the inverse square root alone never lets the weights
    settle, and the validation loss wavers from one evaluation to the next)."""
    begin = last - cooldown
    if cooldown <= 0 or step <= begin:
        return learning_rate(step, d_model, warmup, factor)
    return learning_rate(begin, d_model, warmup, factor) * (last - step + 1) / (cooldown + 1)


SNAPSHOT_FRACTIONS = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0)


def snapshot_steps(start: int, max_steps: int, fractions: tuple[float, ...] = SNAPSHOT_FRACTIONS) -> list[int]:
    """The steps of a run (`start` .. `start + max_steps`) at which it keeps a snapshot: 0, 1 %, 3 % … of it."""
    return sorted({start + round(f * max_steps) for f in fractions})


def save_snapshot(out: Path, model: nn.Module, step: int, valid_loss: float) -> Path:
    """`out/snapshots/step-NNNNNN.safetensors` (float16, the config values recorded in its header, as
    model.safetensors) and its entry in `out/snapshots/index.json`; the app loads one with
    `inference.snapshots.load_snapshot(checkpoint, step)`."""
    folder = out / SNAPSHOTS
    folder.mkdir(parents=True, exist_ok=True)
    name = f"step-{step:06d}.safetensors"
    meta = {**recorded(model.config), "step": str(step), "valid_loss": f"{valid_loss:.4f}"}
    save_model(copy.deepcopy(model).cpu().half(), str(folder / name), metadata=meta)
    index_path = folder / SNAPSHOT_INDEX
    index = json.loads(index_path.read_text(encoding="utf-8")) if index_path.is_file() else {}
    entries = [e for e in index.get("snapshots", []) if e["step"] != step]
    entries.append({"step": step, "valid_loss": round(valid_loss, 4), "file": name})
    index = {
        "dtype": "float16",
        "load_with": "inference.snapshots.load_snapshot(checkpoint, step)",
        "snapshots": sorted(entries, key=lambda e: e["step"]),
    }
    index_path.write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    return folder / name


OPTIMIZER = "optimizer.safetensors"  # a run's float32 weights and Adam's moments; never shipped with a checkpoint


def save_optimizer(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer, step: int) -> None:
    """The float32 weights and Adam's state at `step`, so that `--resume` goes on as if the run never stopped.

    The checkpoint beside it holds float16 weights (half the bytes in the repository); resuming from those
    alone would round every weight by about a tenth of one late step's update.
    """
    tensors = {f"weights.{k}": v.detach().cpu().clone().contiguous() for k, v in model.state_dict().items()}
    for index, state in optimizer.state_dict()["state"].items():
        for key, value in state.items():
            tensors[f"adam.{index}.{key}"] = torch.as_tensor(value).detach().cpu().clone().contiguous()
    save_file(tensors, str(folder / OPTIMIZER), metadata={"step": str(step)})


def load_optimizer(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer, step: int) -> str:
    """Restore what :func:`save_optimizer` wrote; says in one line what happened (absent or mismatched: fresh)."""
    path = folder / OPTIMIZER
    if not path.is_file():
        return f"{folder}: no {OPTIMIZER}; Adam's moments start afresh (the first evaluations may rise a little)"
    with safe_open(str(path), framework="pt") as f:
        saved_step = int((f.metadata() or {}).get("step", -1))
    if saved_step != step:
        return f"{path}: written at step {saved_step}, the weights are step {step}; Adam's moments start afresh"
    tensors = load_file(str(path))
    weights = {k.removeprefix("weights."): v for k, v in tensors.items() if k.startswith("weights.")}
    params = [p for g in optimizer.param_groups for p in g["params"]]
    state: dict[int, dict[str, Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith("adam."):
            index, name = key.removeprefix("adam.").split(".", 1)
            state.setdefault(int(index), {})[name] = value
    own = model.state_dict()
    if (
        weights.keys() != own.keys()
        or any(weights[k].shape != own[k].shape for k in own)
        or sorted(state) != list(range(len(params)))
        or any(state[i]["exp_avg"].shape != p.shape for i, p in enumerate(params))
    ):
        return f"{path}: does not match this model's parameters; Adam's moments start afresh"
    model.load_state_dict(weights)
    optimizer.load_state_dict({"state": state, "param_groups": optimizer.state_dict()["param_groups"]})
    return f"{path}: float32 weights and Adam's moments restored at step {step}"


EVALS = "evals"  # a run's last weights at each validation, float32, for `python -m atlas average`
KEEP_EVALS = 5  # the paper averages the last 5 checkpoints (section 6.1); older ones are deleted


def save_eval_weights(out: Path, model: nn.Module, step: int, valid_loss: float, keep: int = KEEP_EVALS) -> Path:
    """The weights at a validation step, in `out`/evals/, keeping the last `keep` (training.average reads them)."""
    folder = out / EVALS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step-{step:06d}.safetensors"
    meta = {**recorded(model.config), "step": str(step), "valid_loss": f"{valid_loss:.4f}"}
    save_model(on_cpu(model), str(path), metadata=meta)
    for old in sorted(folder.glob("step-*.safetensors"))[:-keep]:
        old.unlink()
    return path


def build(spec: TaskSpec, tok: Tokenizer) -> ModelConfig:
    ids = dict(pad_id=tok.pad_id, unk_id=tok.unk_id, bos_id=tok.bos_id, eos_id=tok.eos_id)
    return ModelConfig(vocab_size=tok.vocab_size, **spec.model, **ids)


def on_cpu(model: nn.Module) -> nn.Module:
    """`model` itself on the CPU, else a CPU copy to save from (the training model stays on its GPU)."""
    return model if next(model.parameters()).device.type == "cpu" else copy.deepcopy(model).cpu()


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
class Resumed:
    """Where a run begins: at step 0 with no history, or where the checkpoint it resumes stopped (:func:`resumed`)."""

    command: str  # the command line that ran it: a resumed run's is its predecessors' `&&` its own
    start: int = 0  # the schedule's step and the place in the data order
    history: list = field(default_factory=list)
    hyperparameters: dict | None = None  # the resumed run's training settings (the card's setup.resumed_from)
    seconds_before: float = 0  # the resumed runs' seconds, all together
    train_pairs: int | None = None  # the resumed run's training pairs (sequence-to-sequence), to tell a data change


def same_draws(before: Resumed, spec: TaskSpec, size: dict[str, int]) -> bool:
    """Whether skipping the resumed run's `start` batches replays its draws: only with the same batch size and the
    same training data. Otherwise the skip would read on nowhere in particular, and costs a step's batching each
    (a CPU run's 13,750 steps are two minutes of a GPU session's batching)."""
    if before.hyperparameters is None:
        return True
    return before.hyperparameters.get("batch_tokens") == spec.batch_tokens and before.train_pairs in (
        None,
        size.get("train_pairs"),
    )


def resumed(resume: Path, folder: Path, spec: TaskSpec, config: ModelConfig, model: nn.Module, command: str) -> Resumed:
    """The run of the checkpoint at `resume`, its weights loaded into `model`; refused when its tokenizer is not
    the one `folder`'s data was cut with or its config is not the task's (dropout aside)."""
    previous = load_checkpoint(resume)
    data_sha = hashlib.sha256((folder / "tokenizer.model").read_bytes()).hexdigest()
    if previous.card.get("tokenizer_sha256") not in (None, data_sha):
        raise ValueError(
            f"{resume}: trained with another tokenizer than {folder}'s; prepare the data with its pieces "
            f"(python -m training.data prepare {spec.name} --tokenizer {resume}/tokenizer.model)"
        )
    if replace(previous.config, dropout=config.dropout) != config:  # dropout is the run's, not the model's
        raise ValueError(f"{resume}: its config differs from the task's; cannot resume")
    model.load_state_dict(previous.model.state_dict())
    earlier = previous.card["training"]["history"]
    done = previous.card["training"]  # the runs it resumed: their total, or its own seconds on an older card
    return Resumed(
        command=f"{previous.card['command']} && {command}",
        start=done.get("steps_done") or max(h["step"] for h in earlier),
        history=earlier,
        hyperparameters=previous.card["hyperparameters"]["training"],
        seconds_before=done.get("seconds_total", done.get("seconds", 0)),
        train_pairs=done.get("train_pairs"),
    )


@dataclass
class TrainingData:
    """A run's endless training batches, its fixed validation batches, and their sizes (for the card)."""

    batches: Iterator
    valid: list
    size: dict[str, int]


def training_data(
    spec: TaskSpec, tok: Tokenizer, folder: Path, config: ModelConfig, rng: random.Random
) -> TrainingData:
    """The task's batches: pairs of similar length (encoder-decoder), the induction task's sequences drawn on the
    fly, or windows of the text (language model); `rng` orders them."""
    if config.has_cross_attention:  # pairs of texts, source and target
        train_pairs = encode_pairs(tok, folder, "train", spec.max_train_len)
        batches = pair_batches(train_pairs, spec.batch_tokens, rng, tok.pad_id)
    elif spec.name == "induction":
        stream = torch.zeros(0)  # drawn on the fly: no training file
        per_batch = max(1, spec.batch_tokens // spec.block_size)
        batches = induction_batches(config.vocab_size, tok.bos_id, tok.pad_id, per_batch, rng)
    else:
        stream, starts = encode_stream(tok, read_lines(folder / "train.txt"))
        per_batch = max(1, spec.batch_tokens // spec.block_size)
        batches = lm_batches(stream, starts, spec.block_size, per_batch, rng, spec)
    valid = validation_batches(tok, folder, config.kind, config.max_len, spec.batch_tokens, spec.block_size)
    if config.has_cross_attention:
        size = {"train_pairs": len(train_pairs), "valid_pairs": sum(src.shape[0] for src, _ in valid)}
    else:
        size = {"train_tokens": len(stream), "valid_tokens": sum(v.numel() for v in valid)}
    return TrainingData(batches, valid, size)


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


def spec_cooldown(spec: TaskSpec, steps: int) -> int:
    """The run's cool-down in steps for a run of `steps` steps (training.clock.cooldown_steps of the task's)."""
    return wall.cooldown_steps(spec.cooldown, spec.cooldown_share, steps)


def planned_snapshots(spec: TaskSpec, start: int, last: int) -> set[int]:
    """The steps of a run from `start` to `last` that keep a snapshot (see snapshot_steps, and spec.snapshot_every)."""
    snapshots = set(snapshot_steps(start, last - start))
    if spec.snapshot_every:
        snapshots |= set(range(start, last + 1, spec.snapshot_every))
    return snapshots


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


def finish_card(
    path: Path,
    history: list,
    steps: int,
    tokens: int,
    elapsed: float,
    before: float = 0,
    finished: bool = True,
    extra: dict | None = None,
) -> None:
    """The saved weights are the best step's; the card records the whole run once it is over (`finished` False: a
    wall-clock budget stopped it before its last step). Its best_step stays the one the weights were saved at: the
    history's losses are rounded, and a tie there must not name another."""
    card_path = path / "card.json"
    card = json.loads(card_path.read_text(encoding="utf-8"))
    card["training"].update(
        history=history,
        steps_done=steps,
        finished=finished,
        seconds=round(elapsed),
        seconds_total=round(before + elapsed),
        tokens_seen=tokens,
        tokens_per_second=round(tokens / elapsed),
        **(extra or {}),
    )
    card_path.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def build_card(spec: TaskSpec, config: ModelConfig, sources: dict, run: dict, command: str) -> dict:
    """The model card of a (possibly still running) training run; training.evaluate fills in the metrics."""
    return {
        "task": spec.description,
        "name": spec.checkpoint,
        "data": sources,
        "hyperparameters": {"model": config.to_dict(), "training": {**asdict(replace(spec, model={})), **run["setup"]}},
        "metrics": {"status": "not evaluated yet: run python -m training.evaluate --write-card"},
        "training": {k: v for k, v in run.items() if k != "setup"},
        "command": command,
        "samples": [],
    }


def train_text(
    text: Path,
    out: Path | None,
    seed: int,
    threads: int,
    command: str,
    max_steps: int | None = None,
    resume: Path | None = None,
    minutes: float | None = None,
) -> Path:
    """A small language model on any UTF-8 text: its data prepared into `out`/data (training.data.text), the
    model sized to it (training.tasks.text_spec) and trained by :func:`train`, then scored on the text's own
    test split (training.evaluate) into the card. `out` defaults to lm-<the file's name> in the folder the app
    lists (checkpoints/ beside it, or $ATLAS_CHECKPOINTS)."""
    out = out or checkpoints_dir() / f"lm-{slug(text.stem)}"
    if out.exists() and not out.is_dir():
        raise TextError(f"{out}: is a file; give --out a folder")
    if out.is_dir() and any(out.iterdir()) and (resume is None or out.resolve() != resume.resolve()):
        raise TextError(f"{out}: already holds files; give another --out, delete it, or go on with --resume {out}")
    expected = load_checkpoint(resume).card["tokenizer_sha256"] if resume else None
    model, data = TEXT_MODEL, out / "data"  # TEXT_MODEL read here, not bound at import: a test makes it tiny
    manifest = prepare_text(text, data_dir("lm", data), command, expected, min_valid_tokens=model["max_len"] + 2)
    source, splits = manifest["sources"][0], manifest["splits"]
    description = f"Language model (decoder-only) on {text.name}: {source['lines']:,} lines, {source['words']:,} words."
    spec = text_spec(out.name, description, splits["train"]["train.txt"]["tokens"], model)
    if max_steps:
        spec = replace(spec, max_steps=max_steps, eval_every=min(spec.eval_every, max_steps))
    path = train(spec, data, out, seed, threads, command, resume, minutes=minutes)
    print(f"evaluating on the test split of {text.name} …", file=sys.stderr)
    metrics, samples = evaluate(load_checkpoint(path), data)
    metrics["command"] += f" --data {data}"  # the text's own test split, not data/lm's
    card = {**json.loads((path / CARD).read_text(encoding="utf-8")), "metrics": metrics, "samples": samples}
    (path / CARD).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def with_settings(spec: TaskSpec, settings: list[str]) -> TaskSpec:
    """The task with `KEY=VALUE` settings changed (`--set`): a field of the task (`repeat_random_share=0.3`) or of
    its model (`model.positional="sinusoidal"`), VALUE read as JSON. A key the task lacks, or a value of another
    type than the task's own (an int where it has a float is a float), is a ValueError naming it."""
    fields = {f.name for f in dataclasses.fields(TaskSpec)} - {"name", "checkpoint", "description", "model", "notes"}
    for setting in settings:
        key, sep, text = setting.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"--set {setting!r}: give KEY=VALUE")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"--set {key}: {text!r} is not a JSON value (a string needs quotes)") from None
        in_model = key.startswith("model.")
        name = key.removeprefix("model.")
        if in_model and name not in spec.model or not in_model and name not in fields:
            known = sorted(f"model.{k}" for k in spec.model) + sorted(fields)
            raise ValueError(f"--set {key}: not a setting of task {spec.name!r} (one of {', '.join(known)})")
        old = spec.model[name] if in_model else getattr(spec, name)
        if isinstance(old, float) and type(value) is int:
            value = float(value)
        if type(value) is not type(old):
            raise ValueError(
                f"--set {key}: {value!r} is of type {type(value).__name__}, the task's of {type(old).__name__}"
            )
        spec = replace(spec, model={**spec.model, name: value}) if in_model else replace(spec, **{name: value})
    return spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.train", description=__doc__)
    parser.add_argument("--task", choices=sorted(TASKS), required=True)
    parser.add_argument("--text", type=Path, help="with --task lm: a small LM on this UTF-8 text (data in OUT/data)")
    parser.add_argument("--out", help="checkpoint folder (default: checkpoints/<task's name>, with --text lm-<file>)")
    parser.add_argument("--data", help="prepared data root (default: data; python -m training.data prepare)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-steps", type=int, help="override the task's number of steps (e.g. for a smoke run)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change one of the task's settings for this run, VALUE as JSON: a task field (repeat_random_share=0.3) "
        "or a model field (model.positional='\"sinusoidal\"'); the card records the settings run",
    )
    parser.add_argument("--resume", type=Path, help="continue this checkpoint's run for --max-steps more steps")
    parser.add_argument(
        "--cooldown",
        type=int,
        default=0,
        metavar="N",
        help="the last N steps of this run take the learning rate linearly down to 0 (default 0: the paper's rate)",
    )
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="cpu",
        help="where to train (default cpu; auto: the GPU when torch sees one, with bfloat16 autocast there)",
    )
    parser.add_argument(
        "--minutes",
        type=float,
        help="wall-clock budget: the run times its first steps, fits its steps (at most the task's or --max-steps) "
        "and its schedule to the budget, and stops in time to validate and save (training.clock)",
    )
    args = parser.parse_args(argv)
    if args.minutes is not None and not 0 < args.minutes <= 24 * 60:
        parser.error("--minutes must be more than 0 and at most a day (1440)")
    if args.max_steps is not None and args.max_steps < 1:
        parser.error("--max-steps must be at least 1")
    if args.cooldown < 0:
        parser.error("--cooldown must be 0 or more")
    if args.cooldown and args.text is not None:
        parser.error("--cooldown is for --task runs; --text sizes its own schedule")
    if args.set and args.text is not None:
        parser.error("--set changes a --task run's settings; --text sizes its own model")
    if args.text is not None and (args.task != "lm" or args.data):
        parser.error("--text trains a language model on its own data: give it with --task lm and without --data")
    command = "python -m training.train " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    try:
        if args.text is not None:
            out = Path(args.out) if args.out else None
            path = train_text(
                args.text, out, args.seed, args.threads, command, args.max_steps, args.resume, args.minutes
            )
        else:
            try:
                spec = with_settings(TASKS[args.task], args.set)
            except ValueError as exc:
                parser.error(str(exc))
            if args.max_steps:
                spec = replace(spec, max_steps=args.max_steps, eval_every=min(spec.eval_every, args.max_steps))
            if args.cooldown > spec.max_steps:
                parser.error(f"--cooldown {args.cooldown} is longer than the run ({spec.max_steps} steps)")
            spec = replace(spec, cooldown=args.cooldown or spec.cooldown)
            out = Path(args.out or Path("checkpoints") / spec.checkpoint)
            data = Path(args.data or "data")
            path = train(spec, data, out, args.seed, args.threads, command, args.resume, args.device, args.minutes)
    except (FileNotFoundError, TextError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
