"""What Attention math's "why this score" and "fork here" cost on the shipped checkpoints, at function level in this
process (the server, its worker queue and the browser are not in these figures), one thread:

- score parts: one traced pass with activations, the stream's parts walked to the sub-layer and projected in float64
  (analysis.score_parts), for the last layer's head 1, the last query and the first key; on lm-english (a 6-layer
  pre-norm LM, 48 parts a side at layer 6) and the translator's last cross-attention (post-norm, the encoder's
  parts on the key side);
- fork: both branches of `--tokens` tokens from one cache of the prompt (analysis.fork, every step traced), beside
  plain greedy decoding of the same length with the cache (inference.decoding.generate, fused attention).

Median of `--repeats` runs after one warm-up.

    python bench/why_fork.py [--tokens 20] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import common
import torch

from analysis.fork import fork, source_of
from analysis.score_parts import score_parts
from inference.checkpoint import load_checkpoint
from inference.decoding import generate
from inference.text import encode_prefix, encode_source

TEXT = "The cat sat on the mat because it was tired, and the dog slept by the door."


def timed(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=20, help="tokens each branch writes")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    lm = load_checkpoint(common.ROOT / "checkpoints" / "lm-english")
    translator = load_checkpoint(common.ROOT / "checkpoints" / "translate-en-de")
    ids = torch.tensor([encode_prefix(lm, TEXT, [])])
    last = f"decoder.layers.{lm.config.n_decoder_layers - 1}.self_attn"
    t = timed(lambda: score_parts(lm.model, ids, None, last, 0, ids.shape[1] - 1, 0), args.repeats)
    print(f"score parts, lm-english, {ids.shape[1]} tokens, {last}: {t * 1000:.0f} ms")
    source = torch.tensor([encode_source(translator, TEXT, [])])
    target = torch.tensor([[translator.config.bos_id, *translator.tokenizer.encode("Die Katze saß auf der Matte")]])
    cross = f"decoder.layers.{translator.config.n_decoder_layers - 1}.cross_attn"
    t = timed(lambda: score_parts(translator.model, target, source, cross, 0, target.shape[1] - 1, 0), args.repeats)
    print(f"score parts, translate-en-de, {source.shape[1]} source tokens, {cross}: {t * 1000:.0f} ms")
    fork_figures(lm, encode_prefix(lm, TEXT, []), None, args)
    fork_figures(translator, [translator.config.bos_id], source_of(translator, TEXT), args)


def fork_figures(ckpt, prompt: list[int], source: torch.Tensor | None, args: argparse.Namespace) -> None:
    tok = ckpt.tokenizer
    both = timed(
        lambda: fork(ckpt.model, prompt, source, 0, 2, args.tokens, tok.pieces, tok.never_written), args.repeats
    )
    plain = timed(lambda: generate(ckpt.model, prompt, source, max_tokens=args.tokens), args.repeats)
    print(
        f"fork, {ckpt.name}, two branches of up to {args.tokens} tokens: {both * 1000:.0f} ms; "
        f"greedy decoding of one: {plain * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
