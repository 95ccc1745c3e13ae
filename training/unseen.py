"""`python -m training.unseen CHECKPOINT`: the translator on everyday sentences written for judging it by hand.

Reads training/data/unseen_en_de.tsv (set, English, our German reference: training.data.unseen), says of each
sentence whether its English or its reference occurs in the prepared training data (data/translate/train.*,
compared as the data preparation compares sentences: lower case, letters and digits), and prints the model's
output greedy and as the app writes it (the card's measured beam), beside the reference. Whether an output is
right is a person's judgement: the command prints, it does not grade; an output equal to the reference is
marked "=".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from analysis.analyze import generate_text
from inference.catalog import decoding_beam
from inference.checkpoint import CheckpointError, load_checkpoint
from training.data.common import read_lines
from training.data.pairs import pair_key
from training.data.unseen import SENTENCES, read_sentences


def in_training(rows: list[tuple[str, str, str]], data: Path) -> list[bool]:
    """Whether each row's English occurs in train.src or its reference in train.tgt."""
    en_keys = {pair_key(s) for s in read_lines(data / "train.src")}
    de_keys = {pair_key(s) for s in read_lines(data / "train.tgt")}
    return [pair_key(en) in en_keys or pair_key(de) in de_keys for _, en, de in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.unseen", description=__doc__)
    parser.add_argument("checkpoint", help="a translator's checkpoint folder")
    parser.add_argument("--sentences", type=Path, default=SENTENCES, help="set<TAB>English<TAB>German lines")
    parser.add_argument("--data", type=Path, default=Path("data/translate"), help="prepared data (train.src/.tgt)")
    parser.add_argument("--set", dest="only", help="only the rows of this set")
    parser.add_argument("--json", action="store_true", help="one JSON object per sentence instead of a table")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        rows = [r for r in read_sentences(args.sentences) if args.only in (None, r[0])]
        seen = in_training(rows, args.data)
        ckpt = load_checkpoint(args.checkpoint)
        if not ckpt.config.has_cross_attention:
            raise CheckpointError(f"{ckpt.path}: not a translator (no cross-attention)")
    except (CheckpointError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    beam = decoding_beam(ckpt.card)
    for (name, en, de), known in zip(rows, seen, strict=True):
        greedy = generate_text(ckpt, en, 80, 1)
        shown = generate_text(ckpt, en, 80, beam) if beam > 1 else greedy
        if args.json:
            record = {"set": name, "input": en, "reference": de, "in_training": known, "greedy": greedy}
            print(json.dumps({**record, f"beam{beam}": shown} if beam > 1 else record, ensure_ascii=False))
            continue
        same = "=" if pair_key(shown) == pair_key(de) else " "
        print(f"{name}  {'IN TRAINING ' if known else ''}{en}\n  {same} app (beam {beam}): {shown}")
        if beam > 1:
            print(f"    greedy:       {greedy}")
        print(f"    reference:    {de}")
    print(f"{sum(seen)} of {len(rows)} in the training data ({args.data})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
