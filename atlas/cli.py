"""`python -m atlas`: the command line on top of running a checkpoint (trace, generate, score, info), of serving
the app (app) and of training one (prepare, train, evaluate, …): those hand over to their package's own commands."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

from analysis.analyze import analyze, generate_text
from analysis.export import to_json, to_npz_bytes
from inference import catalog
from inference.checkpoint import CARD, Checkpoint, CheckpointError, load_checkpoint
from inference.files import read_source, user_path, write_file
from inference.jsonfile import MAX_BYTES, JsonFileError, parse_json
from inference.score import perplexity
from inference.text import InputError
from model.transformer import EncoderDecoder


class UsageError(ValueError):
    """A command-line argument or input file is wrong."""


MAX_BEAM = 16  # beams decode side by side: the paper's 4 is plenty; hundreds take minutes and gigabytes
MAX_TOP_K = 100


def text_or_error(value: str, where: str) -> str | InputError:
    """`value` if it can be written as UTF-8, as the tokenizer that scores it must: a lone surrogate ("\\ud800" in
    JSON) cannot. (trace and generate clean such characters out of a text and say so; score reads text as is.)"""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start : exc.end].encode("unicode_escape").decode()
        return InputError(f"{where}: holds {bad}, half of a UTF-16 surrogate pair, which is not text")
    return value


def read_inputs(path: str, utf8_only: bool = False) -> Iterator[str]:
    """`.jsonl`: one JSON string per line (inputs may hold newlines); otherwise one input per line. `utf8_only`: a
    string that cannot be written as UTF-8 comes as an InputError naming its line (see text_or_error). The file is
    read here, before any output is opened: one that is not a readable regular file of at most MAX_BYTES, or is
    mostly NUL bytes, is a UsageError (inference.files.read_source)."""
    try:
        file = user_path(path)
        data = read_source(file, MAX_BYTES)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    # UTF-8 text holds no NUL; a stray one stays its line's own input, but a file mostly of them is binary (UTF-16
    # text of Latin letters is half NULs)
    if data.count(0) * 4 > len(data):
        raise UsageError(f"{path}: the input file is mostly NUL bytes: binary (or UTF-16), not text; save it as UTF-8")
    return _inputs(path, file.suffix, data.decode("utf-8", errors="replace").splitlines(), utf8_only)


def _inputs(path: str, suffix: str, lines: list[str], utf8_only: bool) -> Iterator[str]:
    for number, line in enumerate(lines, 1):
        if suffix == ".jsonl":
            if not line.strip():
                continue
            try:  # depth and digits checked as for every JSON file read here: one line's error, never a crash
                value = parse_json(line, f"{path}:{number}")
            except JsonFileError as exc:
                yield InputError(str(exc))  # type: ignore[misc]
                continue
            if not isinstance(value, str):
                yield InputError(f"{path}:{number}: expected a JSON string")  # type: ignore[misc]
            else:
                yield text_or_error(value, f"{path}:{number}") if utf8_only else value  # type: ignore[misc]
        else:
            yield line


def open_output(path: str, mode: str) -> IO[Any]:
    """The `-o` file, opened; a path that cannot be written (no such folder, a folder, read-only) is a UsageError."""
    try:
        return open(path, mode, encoding=None if "b" in mode else "utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write there ({exc.strerror}); give -o a file in a writable folder") from exc


def trace_to_folder(args: argparse.Namespace, ckpt: Checkpoint, texts: Iterator[str]) -> int:
    """--input-file with -o DIR: one NumPy archive per input (analysis.export.to_npz_bytes: float32 arrays, read
    with np.load(allow_pickle=False)), DIR/1.npz, DIR/2.npz, … counted from 1 and zero-padded so that they sort;
    the folder is made if missing. An input that cannot be analysed writes no archive: its error goes to stderr,
    naming its number, and the others go on."""
    texts = list(texts)
    folder = user_path(args.output)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{args.output}: cannot make that folder ({exc.strerror}); give -o a writable one") from exc
    width = len(str(len(texts)))
    for number, text in enumerate(texts, 1):
        try:
            if isinstance(text, InputError):
                raise text
            data = to_npz_bytes(analyze(ckpt, text, args.target, args.top_k))
        except InputError as exc:
            print(f"error: input {number}: {exc}", file=sys.stderr)
            continue
        try:
            write_file(folder / f"{number:0{width}d}.npz", data)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return 0


def cmd_trace(args: argparse.Namespace, ckpt: Checkpoint) -> int:
    if args.input_file:
        texts = read_inputs(args.input_file)  # read before the output is opened: a bad input writes nothing
        if args.output and (args.output.endswith(("/", os.sep)) or os.path.isdir(args.output)):
            return trace_to_folder(args, ckpt, texts)
        out = open_output(args.output, "w") if args.output else sys.stdout
        with out if args.output else contextlib.nullcontext(out):
            for text in texts:
                try:
                    if isinstance(text, InputError):
                        raise text
                    line = to_json(analyze(ckpt, text, args.target, args.top_k))
                except InputError as exc:
                    line = json.dumps({"input": text if isinstance(text, str) else None, "error": str(exc)})
                out.write(line + "\n")
        return 0
    if args.text is None:
        raise UsageError("give TEXT or --input-file FILE")
    analysis = analyze(ckpt, args.text, args.target, args.top_k)
    if args.output and args.output.endswith(".npz"):
        with open_output(args.output, "wb") as file:
            file.write(to_npz_bytes(analysis))
    elif args.output:
        with open_output(args.output, "w") as file:
            file.write(to_json(analysis) + "\n")
    else:
        sys.stdout.write(to_json(analysis) + "\n")
    for note in analysis.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def cmd_generate(args: argparse.Namespace, ckpt: Checkpoint) -> int:
    texts = read_inputs(args.input_file) if args.input_file else [args.text]
    if args.text is None and not args.input_file:
        raise UsageError("give TEXT or --input-file FILE")
    status = 0
    for text in texts:
        try:
            if isinstance(text, InputError):
                raise text
            # one output line per input: a generated newline byte must not split it
            print(generate_text(ckpt, text, args.max_tokens, args.beam).replace("\r", " ").replace("\n", " "))
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            print()
            status = 1
    return status


def cmd_score(args: argparse.Namespace, ckpt: Checkpoint) -> int:
    if isinstance(ckpt.model, EncoderDecoder):
        raise UsageError("score is for language models; use `python -m training.evaluate` for translation")
    lines = list(read_inputs(args.input_file, utf8_only=True))
    bad = next((line for line in lines if isinstance(line, InputError)), None)
    if bad is not None:
        raise UsageError(f"{bad}; score reads every line, so fix or remove it")
    if not any(line.strip() for line in lines):
        raise UsageError("the input has no text to score")
    ppl, acc, count = perplexity(ckpt, lines)
    print(f"perplexity {ppl:.3f}  top1_accuracy {acc:.4f}  tokens {count}")
    return 0


def cmd_info(args: argparse.Namespace, ckpt: Checkpoint) -> int:
    print(json.dumps(ckpt.card, indent=2, ensure_ascii=False))
    return 0


def cmd_defaults(args: argparse.Namespace, ckpt: Checkpoint) -> int:
    """Measure the views the model opens on (analysis.defaults) and record them on its card under `defaults`."""
    from analysis.defaults import measure  # only this command needs the measurements

    record = measure(ckpt)
    card = {**ckpt.card, "defaults": record}
    (ckpt.path / CARD).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(record, indent=2, ensure_ascii=False))
    return 0


def cmd_corpus(args: argparse.Namespace, ckpt: Checkpoint) -> int:
    """Reduce every head over a corpus into --out (analysis.corpus; docs/corpus.md); run again, it continues."""
    from analysis.corpus.run import Settings, run_corpus  # only this command reads a corpus
    from analysis.corpus.texts import CorpusError

    try:
        settings = Settings(args.batch, args.shard, args.top_k, args.sample)
        out = run_corpus(
            ckpt,
            user_path(args.texts),
            user_path(args.out),
            settings,
            progress=not args.quiet,
            ray=args.ray,
            workers=args.workers,
            patterns=args.pattern,
        )
    except CorpusError as exc:
        raise UsageError(str(exc)) from None
    print(f"corpus written to {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m atlas", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("trace", help="the whole trace as JSON (docs/trace-format.md; the file says its format)")
    p.add_argument("checkpoint")
    p.add_argument("text", nargs="?")
    p.add_argument(
        "--target", help="decoder text for an encoder-decoder (default: its own output, greedy or its card's beam)"
    )
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--input-file", help=".txt (one input per line) or .jsonl (one JSON string per line)")
    p.add_argument(
        "-o", "--output", help="OUT.json, OUT.npz; with --input-file OUT.jsonl, or a folder DIR/ (one .npz per input)"
    )
    p = sub.add_parser("generate", help="translate or continue text")
    p.add_argument("checkpoint")
    p.add_argument("text", nargs="?")
    p.add_argument("--max-tokens", type=int, default=50)
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--input-file")
    p = sub.add_parser("score", help="perplexity and top-1 accuracy of a language model on a text file")
    p.add_argument("checkpoint")
    p.add_argument("--input-file", required=True)
    p = sub.add_parser("info", help="print the model card")
    p.add_argument("checkpoint")
    p = sub.add_parser("defaults", help="measure the head and texts each page opens on; record them on the card")
    p.add_argument("checkpoint")
    p = sub.add_parser("corpus", help="every head's scores, top contexts and vectors over a corpus (docs/corpus.md)")
    p.add_argument("checkpoint")
    p.add_argument(
        "texts", help='a .txt (a text a line), .jsonl ({"text": ...}), .parquet (a text column), or a folder'
    )
    p.add_argument("--out", required=True, help="the corpus's folder: new, empty, or this same run's to continue it")
    p.add_argument("--batch", type=int, default=16, help="texts a forward pass")
    p.add_argument("--shard", type=int, default=1000, help="texts a shard (what a killed run loses at most)")
    p.add_argument("--top-k", type=int, default=20, help="top contexts kept a head")
    p.add_argument("--sample", type=int, default=256, help="positions whose query and key vectors are kept")
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="reduce the shards on Ray Data's workers: a Ray started here, or a cluster's HOST:PORT (or auto)",
    )
    p.add_argument("--workers", type=int, help="with --ray: workers, a model each (default: the GPUs, else the CPUs)")
    p.add_argument(
        "--pattern",
        action="append",
        metavar="NAME=SOURCE",
        help="a custom pattern scored beside the built-in ones (again for more): SOURCE is MODULE:FUNCTION or "
        "PATH.py:FUNCTION, a function of a text's pieces that returns its T × T pattern (docs/corpus.md)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    for name, (_, text) in HANDED_OVER.items():
        sub.add_parser(name, help=f"{text} (python -m atlas {name} --help)", add_help=False)
    return parser


COMMANDS = {
    "trace": cmd_trace,
    "generate": cmd_generate,
    "score": cmd_score,
    "info": cmd_info,
    "defaults": cmd_defaults,
    "corpus": cmd_corpus,
}
HANDED_OVER = {
    "app": ("ui.serve", "start the app as a classroom server, its first page run before it answers anyone"),
    "prepare": ("training.data.prepare", "obtain, clean and split a task's data, train its tokenizer"),
    "train": ("training.train", "train a task's model from its prepared data, or an LM on any text (--text FILE)"),
    "evaluate": ("training.evaluate", "compute a checkpoint's card metrics on its test split"),
    "average": ("training.average", "average a run's last checkpoints into one (the paper's section 6.1)"),
    "snapshots": ("training.snapshots", "ship a run's snapshots (4-bit by default) with a checkpoint"),
    "quantize": ("training.quantize", "store a checkpoint's weights in 8 bits if that costs <= 0.01 nats of test loss"),
    "experiment": ("training.experiment", "train and evaluate seed 003's table of 5-gram models (fivegram-*)"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in HANDED_OVER:  # imported only here: running a checkpoint needs no training or app code
        # HANDED_OVER names modules as the repository lays them out; the wheel has them under one prefix
        # (setup.py), read off a module imported by that same name.
        house = catalog.__name__.removesuffix("inference.catalog")
        module = importlib.import_module(house + HANDED_OVER[argv[0]][0])
        return module.main(argv if argv[0] == "prepare" else argv[1:]) or 0
    args = build_parser().parse_args(argv)
    try:
        if not 1 <= getattr(args, "top_k", 1) <= MAX_TOP_K:
            raise UsageError(f"--top-k must be between 1 and {MAX_TOP_K}")
        if not 1 <= getattr(args, "beam", 1) <= MAX_BEAM:
            raise UsageError(f"--beam must be between 1 and {MAX_BEAM} (the paper decodes with 4)")
        if getattr(args, "max_tokens", 1) < 0:
            raise UsageError("--max-tokens must be at least 0")
        ckpt = load_checkpoint(catalog.find_checkpoint(args.checkpoint))
        if getattr(args, "max_tokens", 0) > ckpt.config.max_len:
            raise UsageError(
                f"--max-tokens {args.max_tokens} is more than {ckpt.name} can hold ({ckpt.config.max_len})"
            )
        status = COMMANDS[args.command](args, ckpt)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, inside the try
        return status
    except (CheckpointError, InputError, UsageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # writing the output failed: a full disk, a closed pipe
        print(f"error: could not write the output: {exc.strerror or exc}", file=sys.stderr)
        return 2
