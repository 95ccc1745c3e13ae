"""`python -m training.average RUN [--last 5] [--out DIR]`: average a run's last checkpoints, as the paper does.

"For the base models, we used a single model obtained by averaging the last 5 checkpoints, which were written at
10-minute intervals" (Vaswani et al., 2017, section 6.1). A run keeps its weights at its last validations in
RUN/evals/ (training.train); this averages the last `--last` of them parameter by parameter, measures the
average's validation loss on the same split the run used, and writes a checkpoint folder (float16 weights,
config, tokenizer, the run's card with the average recorded under training.averaged). Evaluate it with
`python -m atlas evaluate DIR --write-card`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from inference.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from training.batches import evaluate_loss, run_validation_batches
from training.checkpoint import EVALS


def eval_files(run: Path, last: int) -> list[tuple[int, float, Path]]:
    """(step, valid loss, file) of the run's last `last` validations, oldest first."""
    found = []
    for path in sorted((run / EVALS).glob("step-*.safetensors")):
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        found.append((int(meta["step"]), float(meta["valid_loss"]), path))
    return sorted(found)[-last:]


def average_weights(paths: list[Path]) -> dict[str, torch.Tensor]:
    """The parameter-wise mean of several state dicts with the same names and shapes."""
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        tensors = load_file(str(path))
        if total and tensors.keys() != total.keys():
            raise CheckpointError(f"{path}: its tensors are not those of {paths[0]}")
        for name, tensor in tensors.items():
            total[name] = total.get(name, torch.zeros_like(tensor, dtype=torch.float64)) + tensor.double()
    return {name: (value / len(paths)).float() for name, value in total.items()}


def average(run: Path, last: int, out: Path, data_root: Path) -> dict:
    """Average `run`'s last `last` validation weights into `out`; what was averaged and its validation loss."""
    files = eval_files(run, last)
    if len(files) < 2:
        raise CheckpointError(f"{run / EVALS}: {len(files)} validation weights kept; averaging needs 2 or more")
    ckpt = load_checkpoint(run)
    mean = average_weights([p for _, _, p in files])
    params = dict(ckpt.model.named_parameters())  # tied weights once, as safetensors saved them
    if params.keys() - mean.keys():
        raise CheckpointError(f"{files[-1][2]}: lacks {sorted(params.keys() - mean.keys())[:3]}")
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(mean[name])
    batches = run_validation_batches(ckpt, data_root)
    loss = evaluate_loss(ckpt.model, batches, ckpt.config.kind, ckpt.tokenizer.pad_id)
    averaged = {
        "steps": [step for step, _, _ in files],
        "valid_losses": [round(v, 4) for _, v, _ in files],
        "valid_loss": round(loss, 4),
        "command": f"python -m training.average {run} --last {last} --out {out}",
    }
    card = json.loads(json.dumps(ckpt.card))
    card["training"]["averaged"] = averaged
    card["command"] = f"{card['command']} && {averaged['command']}"
    card["metrics"] = {"status": "not evaluated yet: run python -m training.evaluate --write-card"}
    card.pop("tokenizer_sha256", None)
    save_checkpoint(out, ckpt.model.eval(), (run / "tokenizer.model").read_bytes(), card, bits=16)
    return averaged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.average", description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a training run's folder (it keeps evals/)")
    parser.add_argument("--last", type=int, default=5, help="how many of the last validations (default 5)")
    parser.add_argument("--out", type=Path, help="the averaged checkpoint's folder (default: RUN-avgN)")
    parser.add_argument("--data", type=Path, default=Path("data"), help="prepared data root (the validation split)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = args.out or args.run.with_name(f"{args.run.name}-avg{args.last}")
    try:
        done = average(args.run, args.last, out, args.data)
    except (CheckpointError, FileNotFoundError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(done))
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
