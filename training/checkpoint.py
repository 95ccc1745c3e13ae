"""What a run writes and reads back: the best checkpoint's card, its snapshots along the way, the weights of each
validation kept for averaging, the float32 weights and Adam's state for `--resume`, and where a resumed run
begins.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file, save_model
from torch import Tensor, nn

from inference.checkpoint import load_checkpoint, recorded
from inference.snapshots import INDEX as SNAPSHOT_INDEX
from inference.snapshots import SNAPSHOTS
from model.config import ModelConfig
from training.tasks import TaskSpec


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


def on_cpu(model: nn.Module) -> nn.Module:
    """`model` itself on the CPU, else a CPU copy to save from (the training model stays on its GPU)."""
    return model if next(model.parameters()).device.type == "cpu" else copy.deepcopy(model).cpu()


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
