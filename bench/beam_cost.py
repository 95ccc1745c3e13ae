"""What the translator's default decoding (its card's beam 4) costs beside greedy, in one run.

For each sentence: the decoding alone (beam_many against greedy_many, one text, with the cache); a whole
analysis as analyze() runs it (the CLI and the API: the traced pass decodes from its own first step); and as the
server's model worker runs it (decode_outputs, then the traced pass over that output: ModelWorker._analyse), each
as the translator's card says (or with --beam N: the card's decoding set to that beam) and with the card's decoding
set to greedy. Then a class's batch: 16 everyday sentences (bench/classroom.py's) decoded together and traced, as the
worker runs a class typing at once. The machine is shared: read the ratios, not the times; each figure is the best
of --repeats runs, greedy's and the beam's taking turns.

    python bench/beam_cost.py [--repeats N] [--beam N] [--checkpoints DIR]
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess

import common
from classroom import everyday_sentences

from analysis.analyze import Request, analyze, analyze_many, decode_outputs, encode_source
from inference.decoding import beam_many, greedy_many
from inference.text import clean_text

SENTENCES = (
    "Good morning!",
    "The cat sat on the mat.",
    "Where is the train station?",
    "I would like a cup of coffee, please.",
    "My brother lives in a small house near the river and works at the school.",
    "We went to the market on Saturday, bought fresh bread and cheese, and ate it in the park.",
)
TARGET_RATIO = 1.3  # the translator's default decoding may cost at most 1.3 × greedy's
CLASS_TEXTS = 16  # a class's batch: the worker gathers up to 16 sentences (analysis.worker's max_batch)


def best_pair(greedy_fn, beam_fn, repeats: int) -> tuple[float, float]:
    """The best time of each of two functions over `repeats` runs, taking turns: a burst of the shared machine's
    other work then slows both, instead of one block of runs."""
    greedy, beam = float("inf"), float("inf")
    for _ in range(repeats):
        greedy = min(greedy, common.timed(greedy_fn)[0])
        beam = min(beam, common.timed(beam_fn)[0])
    return greedy, beam


def worker_page(ckpt, text: str):
    """What ModelWorker._analyse does for one page: decode the output, then trace the pass over it."""
    (ids,) = decode_outputs(ckpt, [Request(text)])
    return analyze_many(ckpt, [Request(text, target_ids=ids)])


def worker_batch(ckpt, texts: list[str]):
    """What ModelWorker._analyse does for a class's batch: every output decoded in one batch, then traced."""
    ids = decode_outputs(ckpt, [Request(t) for t in texts])
    return analyze_many(ckpt, [Request(t, target_ids=i) for t, i in zip(texts, ids)])


def with_beam(ckpt, beam: int):
    """The same checkpoint with its card's decoding set to `beam` (1: greedy)."""
    defaults = {**ckpt.card.get("defaults", {}), "decoding": {"beam": beam}}
    return dataclasses.replace(ckpt, card={**ckpt.card, "defaults": defaults})


def main() -> None:
    p = common.parser(__doc__.splitlines()[0], repeats=5)
    p.add_argument("--beam", type=int, default=0, help="the beam to compare with greedy (default: the card's)")
    args = p.parse_args()
    common.setup(args)
    ckpts, _ = common.load_all(args)
    ckpt = next(c for c in ckpts if c.name.startswith("translate"))
    width = args.beam or ckpt.card["defaults"]["decoding"]["beam"]
    ckpt, greedy = with_beam(ckpt, width), with_beam(ckpt, 1)
    print(f"{ckpt.name}: beam {width} against greedy; best of {args.repeats}")
    columns = f"{'dec greedy':>10} {'dec beam':>9} {'ratio':>6} {'analyze':>8} {'server':>7}  (ratios beam/greedy)"
    print(f"{'sentence':<40} {columns}")
    dec_ratios, page_ratios, server_ratios = [], [], []
    for text in SENTENCES:
        source = encode_source(ckpt, clean_text(text).text, [])
        analyze(ckpt, text), analyze(greedy, text)  # warm up
        d_g, d_b = best_pair(
            lambda s=source: greedy_many(ckpt.model, [s], 64),
            lambda s=source: beam_many(ckpt.model, [s], [64], width),
            args.repeats,
        )
        p_g, p_b = best_pair(lambda t=text: analyze(greedy, t), lambda t=text: analyze(ckpt, t), args.repeats)
        s_g, s_b = best_pair(lambda t=text: worker_page(greedy, t), lambda t=text: worker_page(ckpt, t), args.repeats)
        dec_ratios.append(d_b / d_g)
        page_ratios.append(p_b / p_g)
        server_ratios.append(s_b / s_g)
        print(
            f"{text[:40]:<40} {common.ms(d_g):>10} {common.ms(d_b):>9} {d_b / d_g:>6.2f}"
            f" {p_b / p_g:>8.2f} {s_b / s_g:>7.2f}"
        )
    dec, page, server = (statistics.median(r) for r in (dec_ratios, page_ratios, server_ratios))
    print(
        f"median ratio beam/greedy: decoding {dec:.2f}, analyze {page:.2f}, server's page {server:.2f}"
        f" (target ≤ {TARGET_RATIO})"
    )
    texts = everyday_sentences(CLASS_TEXTS, seed=0)
    c_g, c_b = best_pair(lambda: worker_batch(greedy, texts), lambda: worker_batch(ckpt, texts), args.repeats)
    print(
        f"a class's batch ({CLASS_TEXTS} of bench/classroom.py's sentences decoded together, then traced, as the"
        f" worker runs a class typing at once): greedy {common.ms(c_g)}, beam {common.ms(c_b)}, ratio"
        f" {c_b / c_g:.2f} (target ≤ {TARGET_RATIO})"
    )
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), f"cores {os.cpu_count()}")


if __name__ == "__main__":
    main()
