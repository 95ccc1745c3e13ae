"""What "Do the explanations agree?" costs on a shipped language model: each step of analysis.agreement timed apart
(the setup: the text's analysis, one traced pass and the two patching runs; the one-pass methods; both ablations
of every head batched (ablation.batch_rows heads a pass), against one pass a head timed on one layer and scaled;
activation patching of every head in batches), and the whole call, with the number of forward passes it runs.
Each figure the fastest of three runs; prints the ratio one-a-head / batched beside `uptime`: compare ratios
within one run, never figures across loads.

Function level, in this process: the server's worker queue and the browser are not in these figures.

    python bench/agreement.py [--model lm-english] [--text "..."]
"""

from __future__ import annotations

import argparse
import os
import subprocess

import common  # noqa: F401  (the repository on sys.path)
import torch
from common import fastest

from analysis import agreement as agree
from analysis.ablation import batch_rows, rank_one_at_a_time
from analysis.patching import BATCH as PATCH_BATCH
from inference import catalog
from inference.checkpoint import load_checkpoint
from model.names import sublayer_name

TEXT = "The cat sat on the mat because it was"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="lm-english")
    parser.add_argument("--text", default=TEXT)
    args = parser.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    ckpt = load_checkpoint(catalog.find_checkpoint(args.model))
    layers, heads = ckpt.config.n_decoder_layers, ckpt.config.n_heads
    print(f"{args.model}: {layers} layers × {heads} heads; {torch.get_num_threads()} threads; {uptime()}")
    s, setup_s = fastest(agree.setup, ckpt, args.text)
    print(f"setup ({s.ids.shape[1]} tokens; analysis, one traced pass, the patching runs): {setup_s:.2f} s")
    _, one_s = fastest(agree.one_pass_scores, ckpt, s)
    print(f"attention, value-weighted, logit attribution, attribution patching: {one_s:.2f} s")
    first = [(sublayer_name("decoder", 0, "self_attn"), head) for head in range(heads)]
    _, layer_s = fastest(rank_one_at_a_time, ckpt, s.ranking, first, "zero")
    alone_s = 2 * layers * layer_s
    print(
        f"ablation, one pass a head: {layer_s:.2f} s a layer ({heads} passes) → {alone_s:.1f} s for both modes (scaled)"
    )
    _, zero_s = fastest(agree.every_ablation_score, ckpt, s, "zero")
    _, mean_s = fastest(agree.every_ablation_score, ckpt, s, "mean")
    rows = batch_rows(ckpt, s.ranking)
    batches = -(-layers * heads // rows)
    print(
        f"ablation, batched ({rows} heads a pass, {batches} passes a mode): {zero_s + mean_s:.2f} s for both modes; "
        f"ratio one-a-head / batched {alone_s / (zero_s + mean_s):.1f}×"
    )
    _, patch_s = fastest(agree.patching_scores, ckpt, s)
    print(f"activation patching: {patch_s:.2f} s ({layers * heads} runs in batches of {PATCH_BATCH})")
    _, whole_s = fastest(agree.agreement, ckpt, args.text)
    passes = 2 * batches + 1 + -(-layers * heads // PATCH_BATCH) + 6
    print(f"agreement, whole: {whole_s:.2f} s, about {passes} forward passes")
    print(f"after: {uptime()}")


if __name__ == "__main__":
    main()
