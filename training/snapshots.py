"""`python -m training.snapshots CHECKPOINT --from RUN [RUN …] --steps S [S …]`: ship a run's snapshots with a model.

Every run keeps float16 snapshots of its weights along the way (training.train). A shipped model is often the end of
several resumed runs, and its float16 snapshots may not fit the repository (lm-english's are 11.7 MB each). This
copies the chosen steps from the run folders into CHECKPOINT/snapshots/, in 4 bits by default (3.3 MB each for
lm-english; the format is inference.snapshots.QUANTIZED), adds the checkpoint's own weights as the last step (an
index entry with no file), and measures each one's validation loss on the weights as shipped, beside the loss the
run measured in float16, so what the page shows is what was measured.
"""

from __future__ import annotations

import argparse
import copy
import json
import shlex
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from inference.checkpoint import CheckpointError, check_recorded, load_checkpoint, read_metadata, recorded
from inference.snapshots import INDEX, QUANTIZED, SNAPSHOTS, quantize, read_weights
from training.batches import evaluate_loss, run_validation_batches


def find_step(runs: list[Path], step: int, tokenizer_sha256: str) -> tuple[Path, float]:
    """The snapshot of `step` in the first of `runs` that kept one (a run's float16 file, or a shipped checkpoint's
    4-bit one: an earlier model of the same line), and the loss the run measured then."""
    for run in runs:
        index = run / SNAPSHOTS / INDEX
        if not index.is_file():
            continue
        entries = {e["step"]: e for e in json.loads(index.read_text(encoding="utf-8"))["snapshots"]}
        if step in entries:
            card = json.loads((run / "card.json").read_text(encoding="utf-8"))
            if card.get("tokenizer_sha256") != tokenizer_sha256:
                raise CheckpointError(f"{run}: trained with another tokenizer than the checkpoint's")
            entry = entries[step]  # a shipped folder's 4-bit entry keeps the run's float16 loss beside its own
            return run / SNAPSHOTS / entry["file"], float(entry.get("valid_loss_float16", entry["valid_loss"]))
    raise CheckpointError(f"no snapshot of step {step} in {', '.join(str(r) for r in runs)}")


def around_induction(history: list[dict], before: int, count: int = 3) -> list[int]:
    """`count` validation steps before `before` that catch a run's induction head forming: the last one still near
    the run's starting score, the first one near its highest, and (count > 2) the first to reach evenly spaced
    levels between. A run whose best score never rose by 0.3 formed no head, and a step list would show nothing."""
    scored = [(h["step"], h["induction"]) for h in history if "induction" in h and h["step"] < before]
    if len(scored) < 2:
        raise CheckpointError("the run's history has too few validations with an induction score")
    start, peak = scored[0][1], max(score for _, score in scored)
    if peak - start < 0.3:
        raise CheckpointError(f"no induction head formed: the best score went from {start:.3f} to {peak:.3f}")
    levels = [0.1 + 0.8 * i / (count - 1) for i in range(count)]  # 10 % … 90 % of the rise
    steps = []
    for i, level in enumerate(levels):
        threshold = start + level * (peak - start)
        first = next(k for k, (_, score) in enumerate(scored) if score >= threshold)
        steps.append(scored[max(first - 1, 0)][0] if i == 0 else scored[first][0])  # the first: the step before
    return sorted(set(steps))


def spread(history: list[dict], before: int, count: int) -> list[int]:
    """`count` validation steps before `before`, evenly spaced over the run's validations (the first included)."""
    steps = sorted({h["step"] for h in history if h["step"] < before})
    if not steps:
        raise CheckpointError("the run's history has no validation before its shipped weights")
    picks = {steps[round(i * (len(steps) - 1) / max(count - 1, 1))] for i in range(count)}
    return sorted(picks)


def ship(checkpoint: Path, runs: list[Path], steps: list[int], data_root: Path, bits: int, command: str) -> dict:
    """Write CHECKPOINT/snapshots/ (replacing what was there) and return its index."""
    ckpt = load_checkpoint(checkpoint)
    averaged = ckpt.card["training"].get("averaged")  # training.average: the mean of the steps up to its last
    run = ckpt.card["training"]  # the weights are the run's best validation step, which need not be its last
    last = averaged["steps"][-1] if averaged else run.get("best_step", run["steps_done"])
    if any(step >= last for step in steps):
        raise CheckpointError(f"{checkpoint}: its own weights are step {last:,}; give --steps before it")
    found = {step: find_step(runs, step, ckpt.card["tokenizer_sha256"]) for step in sorted(set(steps))}
    for path, _ in found.values():
        check_recorded(path, ckpt.config)
    tok, kind = ckpt.tokenizer, ckpt.config.kind
    device = "cuda" if torch.cuda.is_available() else "cpu"  # on the GPU machine: seconds, not minutes
    batches = run_validation_batches(ckpt, data_root)
    out = checkpoint / SNAPSHOTS
    staging = checkpoint / f".{SNAPSHOTS}-new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    entries = []
    for step, (path, trained_loss) in found.items():
        name = f"step-{step:06d}.safetensors"
        if bits == 16 or read_metadata(path).get("quantized") == QUANTIZED:  # a shipped 4-bit step goes as it is
            shutil.copyfile(path, staging / name)
        else:
            meta = {**read_metadata(path), **recorded(ckpt.config), "step": str(step), "quantized": QUANTIZED}
            save_file(quantize(load_file(str(path))), str(staging / name), metadata=meta)
        loss = evaluate_loss(read_weights(staging / name, ckpt.config).to(device), batches, kind, tok.pad_id)
        entries.append({"step": step, "valid_loss": round(loss, 4), "valid_loss_float16": trained_loss, "file": name})
        print(f"step {step:,}: valid loss {loss:.4f} (float16 in training: {trained_loss:.4f})", file=sys.stderr)
    loss = evaluate_loss(copy.deepcopy(ckpt.model).to(device), batches, kind, tok.pad_id)
    entries.append({"step": last, "valid_loss": round(loss, 4), "file": None})
    index = {
        "dtype": "float16"
        if bits == 16
        else "4 bits, in groups of 32 with a float16 scale each (the last step: the shipped weights themselves)",
        "load_with": "inference.snapshots.load_snapshot(checkpoint, step)",
        "valid_loss": "measured on the weights as shipped; valid_loss_float16: what the run measured in training",
        "command": command,
        "snapshots": entries,
    }
    (staging / INDEX).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.snapshots", description=__doc__)
    parser.add_argument("checkpoint", type=Path, help="the checkpoint folder the snapshots ship with")
    parser.add_argument(
        "--from", dest="runs", type=Path, nargs="+", required=True, help="run folders, searched in order"
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--steps", type=int, nargs="+", help="the steps to ship")
    which.add_argument(
        "--around-induction",
        type=int,
        metavar="N",
        help="ship N steps around the forming of the run's induction head, read from the checkpoint's history",
    )
    which.add_argument(
        "--spread", type=int, metavar="N", help="ship N validation steps evenly spaced over the run before its weights"
    )
    parser.add_argument("--bits", type=int, choices=(4, 16), default=4, help="4 (default) or 16 (float16, as kept)")
    parser.add_argument("--data", type=Path, default=Path("data"), help="prepared data root (default: data)")
    args = parser.parse_args(argv)
    command = "python -m training.snapshots " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    try:
        steps = args.steps
        if args.around_induction is not None:
            if args.around_induction < 2:
                parser.error("--around-induction needs at least 2 steps: one before the head forms, one after")
            training = load_checkpoint(args.checkpoint).card["training"]
            steps = around_induction(training["history"], training["best_step"], args.around_induction)
            print(f"around the induction head's forming: steps {steps}", file=sys.stderr)
        elif args.spread is not None:
            training = load_checkpoint(args.checkpoint).card["training"]
            steps = spread(training["history"], training["best_step"], max(args.spread, 1))
        index = ship(args.checkpoint, args.runs, steps, args.data, args.bits, command)
    except (CheckpointError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in (args.checkpoint / SNAPSHOTS).iterdir())
    print(f"{args.checkpoint / SNAPSHOTS}: {len(index['snapshots'])} steps, {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
