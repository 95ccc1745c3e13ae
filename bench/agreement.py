"""What "Do the explanations agree?" costs on a shipped language model: each step of analysis.agreement timed apart
(the setup: the text's analysis, one traced pass and the two patching runs; the one-pass methods; one layer's
zero ablation, scaled to both modes and every layer; activation patching of every head in batches), and the whole
call, with the number of forward passes it runs.

Function level, in this process: the server's worker queue and the browser are not in these figures.

    python bench/agreement.py [--model lm-english] [--text "..."]
"""

from __future__ import annotations

import argparse
import os
import time

import common  # noqa: F401  (the repository on sys.path)
import torch

from analysis import agreement as agree
from analysis.patching import BATCH
from inference import catalog
from inference.checkpoint import load_checkpoint

TEXT = "The cat sat on the mat because it was"


def timed(fn, *args):
    start = time.perf_counter()
    value = fn(*args)
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="lm-english")
    parser.add_argument("--text", default=TEXT)
    args = parser.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    ckpt = load_checkpoint(catalog.find_checkpoint(args.model))
    layers, heads = ckpt.config.n_decoder_layers, ckpt.config.n_heads
    print(f"{args.model}: {layers} layers × {heads} heads; load average {os.getloadavg()[0]:.2f}")
    s, setup_s = timed(agree.setup, ckpt, args.text)
    print(f"setup ({s.ids.shape[1]} tokens; analysis, one traced pass, the patching runs): {setup_s:.2f} s")
    _, one_s = timed(agree.one_pass_scores, ckpt, s)
    print(f"attention, value-weighted, logit attribution, attribution patching: {one_s:.2f} s")
    _, layer_s = timed(agree.ablation_scores, ckpt, s, "zero", 0)
    print(f"ablation: {layer_s:.2f} s a layer ({heads} passes) → {2 * layers * layer_s:.1f} s for both modes (scaled)")
    _, patch_s = timed(agree.patching_scores, ckpt, s)
    print(f"activation patching: {patch_s:.2f} s ({layers * heads} runs in batches of {BATCH})")
    _, whole_s = timed(agree.agreement, ckpt, args.text)
    passes = 2 * layers * heads + -(-layers * heads // BATCH) + 6
    print(f"agreement, whole: {whole_s:.2f} s, about {passes} forward passes")


if __name__ == "__main__":
    main()
