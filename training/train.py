"""`python -m training.train --task {reverse,translate,lm}`: train a shipped model from the prepared data;
`--task lm --text FILE`: a small language model on any UTF-8 text, into a folder the app lists (train_text).

The paper's recipe (section 5.3): Adam with β=(0.9, 0.98), ε=1e-9, lrate = factor · d_model^-0.5 ·
min(step^-0.5, step · warmup^-1.5), label smoothing 0.1 for translation; `--cooldown N` takes the rate of a run's
last N steps in a straight line down to 0 (not the paper's: see cooled_rate). Validation every `eval_every` steps;
the best validation loss is what gets saved. Deterministic under `--seed` for a given thread count.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from inference.catalog import checkpoints_dir
from inference.checkpoint import CARD, CheckpointError, load_checkpoint
from training.data.text import TextError, prepare_text, slug
from training.evaluate import evaluate
from training.loop import train
from training.tasks import TASKS, TEXT_MODEL, TaskSpec, data_dir, text_spec


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


def arguments() -> argparse.ArgumentParser:
    """The command line's options (`python -m training.train --help`)."""
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
    return parser


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Options that cannot go together, or out of their range: the parser's error (exit 2), before anything runs."""
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


def task_run(parser: argparse.ArgumentParser, args: argparse.Namespace, command: str) -> Path:
    """`--task`: the task's run with this command line's changes (`--set`, `--max-steps`, `--cooldown`)."""
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
    return train(spec, data, out, args.seed, args.threads, command, args.resume, args.device, args.minutes)


def main(argv: list[str] | None = None) -> int:
    """`python -m training.train ARGS`: 0 once the run saved its checkpoint; 2, with one line on stderr, for what is
    missing or refused (no prepared data, a text it cannot read, a checkpoint it cannot resume)."""
    parser = arguments()
    args = parser.parse_args(argv)
    check(parser, args)
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
            path = task_run(parser, args, command)
    except (FileNotFoundError, TextError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
