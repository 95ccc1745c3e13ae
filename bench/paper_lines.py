"""The Paper view's worst case: how long viz.paper.attention_lines takes to build and serialise 256 tokens.

The page allows 8 heads × 256 queries, each spreading its weight evenly over 20 keys (the most lines a row can have
at the page's lowest threshold, 0.05): 40,960 segments. The figure is built and turned into the JSON st.plotly_chart
sends; the median of `--repeats` runs and the JSON's bytes are printed beside the load. No model is needed.

    python bench/paper_lines.py [--repeats N] [--quick]
"""

from __future__ import annotations

import statistics
import subprocess

import common
import numpy as np
import plotly.io as pio

from viz.paper import attention_lines

HEADS, TOKENS, SPREAD, THRESHOLD = 8, 256, 20, 0.05
TARGET_S, TARGET_BYTES = 0.5, 2_500_000


def worst_case() -> tuple[np.ndarray, list[str]]:
    w = np.zeros((HEADS, TOKENS, TOKENS), np.float32)
    for h in range(HEADS):
        for q in range(TOKENS):
            w[h, q, (np.arange(SPREAD) * 7 + q + h) % TOKENS] = 1 / SPREAD
    return w, [f"▁w{i}" for i in range(TOKENS)]


def run(args) -> str:
    common.setup(args)
    w, pieces = worst_case()
    repeats = min(args.repeats, 3) if args.quick else args.repeats
    load_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    def build_and_send() -> str:
        return pio.to_json(attention_lines(w, pieces, pieces, threshold=THRESHOLD), validate=False)

    times, text = [], ""
    for _ in range(repeats):
        took, text = common.timed(build_and_send)
        times.append(took)
    load_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    median = statistics.median(times)
    table = common.Table(
        ["case", "segments", "build + JSON (median)", "target", "JSON bytes", "target"],
        [
            [
                f"{HEADS} heads × {TOKENS} tokens",
                HEADS * TOKENS * SPREAD,
                common.ms(median),
                f"≤ {common.ms(TARGET_S)} ({common.verdict(median, TARGET_S)})",
                common.kib(len(text)),
                f"≤ {common.kib(TARGET_BYTES)} ({common.verdict(len(text), TARGET_BYTES)})",
            ]
        ],
    )
    return common.emit(
        [
            common.header("The Paper view's worst case (bench/paper_lines.py)", "none (a synthetic attention)"),
            f"{repeats} runs. Load before: {common.load_average(load_before)}; after: "
            f"{common.load_average(load_after)}.\n",
            table.markdown(),
        ]
    )


def main(argv=None) -> None:
    run(common.parser(__doc__.splitlines()[0]).parse_args(argv))


if __name__ == "__main__":
    main()
