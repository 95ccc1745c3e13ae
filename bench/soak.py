"""1000 distinct sentences through the app's cached path: memory and cache entries must stay bounded.

Sentence i goes to model i mod M (every shipped model takes its turn), through ui.run_model (st.cache_data,
max_entries as in ui.py) and the two Explore charts with their JSON, as one page rerun does. Every 100 sentences
it prints the resident set size and the number of entries in the trace cache. Verdict: the cache never holds more
than its max_entries, and RSS grows by less than 64 MiB between the first checkpoint row and the last.

    python bench/soak.py [--count N] [--quick] [--checkpoints DIR] [--tiny]
"""

from __future__ import annotations

import gc
import time

import common

RSS_GROWTH_LIMIT = 64 * 1024 * 1024


def run(args) -> str:
    common.setup(args)
    dirs, what = common.checkpoint_dirs(args)
    count = args.count or (200 if args.quick else 1000)
    every = max(1, count // 10)
    cached = common.CachedPath()
    ckpts = [cached.model(p) for p in dirs]
    sentences = common.distinct_sentences(count, seed=4242)
    table = common.Table(["sentences", "RSS", "cache entries", "elapsed", "mean per sentence (last block)"], [])
    table.rows.append([0, common.kib(common.rss_bytes()), cached.entries(), "0 s", ""])
    rss_rows: list[int] = []
    max_seen = 0
    t0 = last = time.perf_counter()
    for i, text in enumerate(sentences, 1):
        analysis = cached.run(dirs[i % len(dirs)], text)
        common.explore_render(analysis)
        entries = cached.entries()
        if entries is not None:
            max_seen = max(max_seen, entries)
        if i % every == 0:
            gc.collect()
            now = time.perf_counter()
            rss = common.rss_bytes()
            rss_rows.append(rss)
            table.rows.append([i, common.kib(rss), entries, f"{now - t0:.1f} s", common.ms((now - last) / every)])
            print(f"  {i} sentences: RSS {common.kib(rss)}, cache entries {entries}", flush=True)
            last = now
    limit = cached.max_entries()
    growth = rss_rows[-1] - rss_rows[0] if len(rss_rows) > 1 else 0
    cache_ok = limit is None or max_seen <= limit
    rss_ok = growth < RSS_GROWTH_LIMIT
    return common.emit(
        [
            common.header(f"Soak: {count} distinct sentences (bench/soak.py)", what, ckpts),
            f"Cached path: {cached.kind}.\n",
            table.markdown(),
            f"- cache entries: at most {max_seen} seen, limit {limit} → {'bounded' if cache_ok else '**UNBOUNDED**'}",
            f"- RSS growth from row {every} to row {count}: {common.kib(max(growth, 0))} "
            f"(limit {common.kib(RSS_GROWTH_LIMIT)}) → {'bounded' if rss_ok else '**GROWING**'}",
            "",
        ]
    )


def main(argv=None) -> None:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=0, help="sentences (default 1000, --quick 200)")
    run(p.parse_args(argv))


if __name__ == "__main__":
    main()
