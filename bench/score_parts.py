"""What "why a head attends" costs for one query: one key's split (analysis.score_parts.score_parts) against the
query's whole row of keys (row_parts: one traced pass and one projection of every part serve every key), and one
plain forward pass beside them. Prints the ratios beside `uptime`: compare ratios within one run.

    python bench/score_parts.py [--model lm-english|smollm2] [--tokens 64]
"""

from __future__ import annotations

import argparse
import os

import common  # noqa: F401  (the repository on sys.path)
import torch
from common import fastest
from rank_heads import SENTENCE, load, uptime

from analysis.score_parts import row_parts, score_parts
from model.forward import forward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="lm-english", help="a shipped checkpoint, or smollm2 (installed package)")
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    ckpt = load(args.model)
    ids = [ckpt.config.bos_id, *ckpt.tokenizer.encode(SENTENCE * (args.tokens // 8 + 2))][: args.tokens]
    ids = torch.tensor([ids])
    sublayer, query = "decoder.layers.1.self_attn", ids.shape[1] - 1
    print(f"{ckpt.name}; {ids.shape[1]} tokens; {torch.get_num_threads()} threads; {uptime()}")
    with torch.inference_mode():
        _, pass_s = fastest(forward, ckpt.model, ids, None, warm=True)
    _, one_s = fastest(score_parts, ckpt.model, ids, None, sublayer, 0, query, 0, warm=True)
    _, row_s = fastest(row_parts, ckpt.model, ids, None, sublayer, 0, query, list(range(ids.shape[1])), warm=True)
    print(f"one traced forward pass: {pass_s:.2f} s")
    print(f"one key's split: {one_s:.2f} s; the query's whole row ({ids.shape[1]} keys): {row_s:.2f} s")
    print(f"ratio row / one key {row_s / one_s:.2f}×; a key at a time would take {ids.shape[1] * one_s:.1f} s")
    print(f"after: {uptime()}")


if __name__ == "__main__":
    main()
