"""What the model worker's batch costs beside Python threads that hold the interpreter's lock, as pages being drawn do.

torch lets go of the interpreter lock in each operation and takes it back after it. A thread that wants the lock
back while another runs Python waits until that one lets go: at the latest after the switch interval (5 ms by
default, `sys.setswitchinterval`). A decoding is thousands of small operations, so beside a class's pages the
worker's batch can take many times its time alone. This bench runs what ModelWorker._analyse runs for a class's
batch (decode_outputs, then the traced pass over the outputs: analyze_many), for `--batch` distinct everyday
sentences (bench/classroom.py's), alone and beside `--threads-beside` Python threads busy in a loop (the worst
case: a drawn page also waits for the worker and its socket), at each `--switch` interval. Prints the median of
`--repeats` batches per row, with the load.

    python bench/worker_beside_pages.py [--model translate-en-de] [--batch 16] [--beside 0 1]
                                        [--switch 0.005 0.001 0.0001] [--repeats 3]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import threading
import time
from dataclasses import replace

import common
import torch
from classroom import everyday_sentences

from analysis.analyze import Request, analyze_many, decode_outputs


def batch_times(ckpt, sentences: list[str]) -> tuple[float, float]:
    """(decoding seconds, traced pass seconds) of one batch, as the worker runs it."""
    requests = [Request(s) for s in sentences]
    start = time.perf_counter()
    if ckpt.config.has_cross_attention:
        outputs = decode_outputs(ckpt, requests)
        requests = [replace(r, target_ids=o) for r, o in zip(requests, outputs)]
    decoded = time.perf_counter()
    analyze_many(ckpt, requests)
    return decoded - start, time.perf_counter() - decoded


def busy(stop: threading.Event) -> None:
    """Python held busy until `stop`: what a page being drawn does with the interpreter's lock, at its worst."""
    x = 0
    while not stop.is_set():
        for i in range(1000):
            x += i


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__.splitlines()[0], repeats=3)
    p.add_argument("--model", default="translate-en-de")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--beside", type=int, nargs="+", default=[0, 1], help="busy Python threads beside the batch")
    p.add_argument("--switch", type=float, nargs="+", default=[0.005, 0.001, 0.0001], help="switch intervals (s)")
    args = p.parse_args(argv)
    common.setup(args)
    torch.set_num_threads(1)  # as the worker's light thread runs a class's batch
    ckpts, _ = common.load_all(args)
    ckpt = next((c for c in ckpts if c.name == args.model), None)
    if ckpt is None:
        print(f"error: no checkpoint named {args.model!r}", file=sys.stderr)
        return 2
    sentences = everyday_sentences(args.batch * (args.repeats + 1) * len(args.beside) * len(args.switch), 7)
    batch_times(ckpt, sentences[: args.batch])  # warm
    print(f"# {ckpt.name}: one worker batch of {args.batch} sentences beside busy Python threads")
    print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print("| switch interval | busy threads beside | decoding | traced pass | × alone |")
    print("|---|---|---|---|---|")
    used, alone = args.batch, None
    default = sys.getswitchinterval()
    try:
        for switch in args.switch:
            sys.setswitchinterval(switch)
            for beside in args.beside:
                stop = threading.Event()

                threads = [threading.Thread(target=busy, args=(stop,), daemon=True) for _ in range(beside)]
                for t in threads:
                    t.start()
                runs = []
                for _ in range(args.repeats):
                    runs.append(batch_times(ckpt, sentences[used : used + args.batch]))
                    used += args.batch
                stop.set()
                for t in threads:
                    t.join()
                decoding, traced = (statistics.median(r[i] for r in runs) for i in (0, 1))
                if alone is None and beside == 0:
                    alone = decoding + traced
                ratio = f"{(decoding + traced) / alone:.1f}" if alone else "–"
                print(f"| {switch * 1000:g} ms | {beside} | {common.ms(decoding)} | {common.ms(traced)} | {ratio} |")
    finally:
        sys.setswitchinterval(default)
    print("load after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
