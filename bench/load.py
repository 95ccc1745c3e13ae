"""K concurrent sessions (K = 1, 10, 30) on one loaded model: latency, memory, and results equal to sequential ones.

Each simulated session is a thread that submits its own sentence through the app's cached path (ui.run_model:
st.cache_data around analyze(), the model shared from st.cache_resource) and builds the
two Explore charts with their JSON, as one rerun of the page does. All K start together (a barrier); a session's
latency is from its submit to its charts' JSON. Every sentence is distinct, so each is a cache miss. Before the
concurrent rounds the same sentences are analysed one by one without any cache; every concurrent result must
equal its sequential one exactly (np.array_equal on every block's attention weights).

    python bench/load.py [--repeats N] [--quick] [--checkpoints DIR] [--tiny]
"""

from __future__ import annotations

import threading
import time

import common
import numpy as np

SESSIONS = (1, 10, 30)
QUICK_SESSIONS = (1, 5)
TARGET_P95_S = 2.0  # 30 sessions


def same(a: common.Analysis, b: common.Analysis) -> bool:
    if a.target_pieces != b.target_pieces or a.source_pieces != b.source_pieces or a.blocks.keys() != b.blocks.keys():
        return False
    return all(np.array_equal(a.blocks[k].weights, b.blocks[k].weights) for k in a.blocks)


def round_of(cached: common.CachedPath, path, sentences: list[str]) -> tuple[list[float], list]:
    """All sentences submitted at once, one thread each; their latencies and results (in order)."""
    k = len(sentences)
    latencies: list[float] = [0.0] * k
    results: list = [None] * k
    errors: list[BaseException] = []
    barrier = threading.Barrier(k)

    def session(i: int) -> None:
        try:
            barrier.wait()
            t0 = time.perf_counter()
            analysis = cached.run(path, sentences[i])
            common.explore_render(analysis)
            latencies[i] = time.perf_counter() - t0
            results[i] = analysis
        except BaseException as exc:  # reported after the round, never swallowed
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(i,)) for i in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return latencies, results


def run(args) -> str:
    common.setup(args)
    dirs, what = common.checkpoint_dirs(args)
    cached = common.CachedPath()
    sessions = QUICK_SESSIONS if args.quick else SESSIONS
    rounds = 1 if args.quick else max(1, args.repeats)
    table = common.Table(
        ["model", "sessions", "requests", "p50", "p95", "max", "throughput", "RSS after", "peak RSS", "= sequential"],
        [],
    )
    at30 = []
    seed = 0
    ckpts = []
    for path in dirs:
        ckpt = cached.model(path)
        ckpts.append(ckpt)
        for k in sessions:
            batches = []
            for _ in range(rounds):
                seed += 1
                batches.append(common.distinct_sentences(k, seed=seed))
            reference = {s: common.analysis_of(ckpt, s) for batch in batches for s in batch}
            cached.clear()
            latencies: list[float] = []
            equal = True
            t_start = time.perf_counter()
            for batch in batches:
                lat, results = round_of(cached, path, batch)
                latencies += lat
                equal &= all(same(r, reference[s]) for s, r in zip(batch, results))
            wall = time.perf_counter() - t_start
            p95 = common.percentile(latencies, 95)
            if k == 30:
                at30.append((ckpt.name, p95))
            table.rows.append(
                [
                    ckpt.name,
                    k,
                    len(latencies),
                    common.ms(common.percentile(latencies, 50)),
                    f"**{common.ms(p95)}**",
                    common.ms(max(latencies)),
                    f"{len(latencies) / wall:.1f}/s",
                    common.kib(common.rss_bytes()),
                    common.kib(common.peak_rss_bytes()),
                    "yes" if equal else "**NO**",
                ]
            )
    lines = [
        common.header("Concurrent sessions (bench/load.py)", what, ckpts),
        f"Cached path: {cached.kind}. {rounds} round(s) per row, every session with its own sentence of 12 words; "
        "latency = submit → both charts' JSON. Peak RSS is the process's high-water mark so far.\n",
        table.markdown(),
        "Target (not an assertion): 30 sessions p95 ≤ 2 s.",
    ]
    lines += [f"- {n}: p95 {common.ms(p)} ({common.verdict(p, TARGET_P95_S)})" for n, p in at30]
    return common.emit(lines + [""])


def main(argv=None) -> None:
    run(common.parser(__doc__.splitlines()[0]).parse_args(argv))


if __name__ == "__main__":
    main()
