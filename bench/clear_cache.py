"""A client's `clear_cache`, again and again: the server's memory and threads, and whether other sessions' pages
stay cached, against a fresh server per model, started as the README starts it.

Streamlit answers a client's `clear_cache` BackMsg (the "Clear cache" menu item, or any client on the network
sending it) by emptying `st.cache_data` and `st.cache_resource` for the whole server; the app's
ui/streamlit_private.py makes it clear only the sending session's own state (tests/test_cache_owned.py tests the
guard in-process). This bench checks it from outside, over Streamlit's websocket as the browser speaks it
(bench/pages.py's PageSession), per model (the models of bench/class_long.py: every shipped checkpoint, and SmolLM2
when installed):
  1. another session B opens the link (`?model=NAME`), types a long text (class_long's: ≈500 words, or max_len
     letters for the reversal model) — "cold", the model runs — and reruns it 3 times — "warm", the median;
  2. session A opens the default page (the link) and reruns once; the server's RSS and threads are read: "before";
  3. A sends a `clear_cache` BackMsg, then a rerun with its widget states (what the browser sends when the person
     presses R after the menu item), --clears times (default 10); RSS and threads after each;
  4. B reruns its text once more: its time beside cold and warm ("still warm": nearer warm than cold), and its page
     compared with the one before the clears (classroom.same_page: texts equal, numbers within 1e-4); then RSS and
     threads once more: "after all".
RSS: the resident memory of the server's whole process tree; threads: the entries of /proc/PID/task of every
process of the tree. Each reading waits until the thread count has held still for 0.5 s (at most 3 s), so that the
script runner threads of the run just finished have ended. The peak is sampled every 0.1 s over the whole run.
The thread ids of "before" are looked for "after all": a cleared `st.cache_resource` stops the model worker's
thread and starts another at the next page (tests/test_cache_owned.py), which a count alone would not show.
A's reruns after a clear are checked like every page of bench/pages.py (ends successfully, no error or exception
element, draws a chart or a table); one that does not fails the run (exit status 1). Targets, printed and not
asserted: RSS after all within ± 50 MB of before, the thread count flat (no reading above before, every thread
of before still running), B still warm.
Not measured: what the guard does to the sender's own page beyond that check, and a server whose first script
run has not happened yet (the guard is installed by the app's first run; before it nothing is cached).

    python bench/clear_cache.py [--clears 10] [--model NAME|all] [--checkpoints DIR] [--tiny] [--threads N]
                                [--quick] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import common
import psutil
from browser import stop_server
from class_long import long_texts, serve
from classroom import RssSampler, same_page, uptime
from common import Listed
from pages import Drawn, PageSession
from run_all import git_commit
from streamlit.proto.BackMsg_pb2 import BackMsg

TARGET_RSS_DELTA_BYTES = 50e6  # ± 50 MB
WARM_RERUNS = 3
MB = 1024 * 1024


def threads(pid: int) -> frozenset[int]:
    """The thread ids of the process `pid` and all its children: the entries of each one's /proc/PID/task."""
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    tasks = [Path(f"/proc/{p.pid}/task") for p in procs]
    return frozenset(int(t.name) for task in tasks if task.is_dir() for t in task.iterdir())


async def reading(pid: int, rss: RssSampler) -> tuple[int, frozenset[int]]:
    """(RSS bytes, thread ids) once the thread count has held still for 0.5 s, or after 3 s."""
    deadline, last, still_since = time.perf_counter() + 3, threads(pid), time.perf_counter()
    while time.perf_counter() < deadline and time.perf_counter() - still_since < 0.5:
        await asyncio.sleep(0.1)
        now = threads(pid)
        if len(now) != len(last):
            still_since = time.perf_counter()
        last = now
    return rss.now(), last


async def send_clear_cache(session: PageSession) -> None:
    """What the menu's "Clear cache" sends; the server answers nothing to it."""
    msg = BackMsg()
    msg.clear_cache = True
    await session.ws.send(msg.SerializeToString())


def checked(page: Drawn, what: str, failures: list[str]) -> Drawn:
    problem = page.problem()
    if problem:
        failures.append(f"{what}: {problem}"[:300])
        print(f"FAILED {what}: {problem}", file=sys.stderr, flush=True)
    return page


async def clears(url: str, pid: int, model: Listed, text: str, count: int, rss: RssSampler) -> dict:
    """Steps 1–4 of the docstring on one server; the figures of one row."""
    name, failures = model.name, []
    other, sender = PageSession(url, name), PageSession(url, name)
    try:
        checked(await other.open(), f"{name}: B's link", failures)
        cold = checked(await other.rerun(text), f"{name}: B types its text", failures)
        warm_pages = [checked(await other.rerun(None), f"{name}: B reruns", failures) for _ in range(WARM_RERUNS)]
        checked(await sender.open(), f"{name}: A's link", failures)
        checked(await sender.rerun(None), f"{name}: A reruns", failures)
        before = await reading(pid, rss)
        after_each, sender_times = [], []
        for i in range(count):
            await send_clear_cache(sender)
            page = checked(await sender.rerun(None), f"{name}: A's rerun after clear {i + 1}", failures)
            sender_times.append(page.seconds)
            after_each.append(await reading(pid, rss))
        again = checked(await other.rerun(None), f"{name}: B's rerun after the clears", failures)
        after_all = await reading(pid, rss)
    finally:
        for session in (other, sender):
            await session.close()
    return {
        "before": before,
        "after_each": after_each,
        "after_all": after_all,
        "sender": sender_times,
        "cold": cold.seconds,
        "warm": statistics.median(p.seconds for p in warm_pages),
        "again": again.seconds,
        "same_page": same_page(warm_pages[-1].fingerprint(), again.fingerprint()),
        "failures": failures,
    }


def measure(model: Listed, args) -> tuple[list[str], int]:
    """One model on a fresh server: its table row, and how many pages failed."""
    if model.skipped:
        return [model.name, f"skipped: {model.skipped}", *["—"] * 8], 0
    (text,), what = long_texts(model, 1, args.words, seed=1000)
    load_before = uptime()
    proc, url = serve(model, args.threads)
    try:
        with RssSampler(proc.pid) as rss:
            got = asyncio.run(clears(url, proc.pid, model, text, args.clears, rss))
    finally:
        stop_server(proc)
    load_after = uptime()
    (rss0, threads0), (rss1, threads1) = got["before"], got["after_all"]
    each_rss, each_threads = [r for r, _ in got["after_each"]], [len(t) for _, t in got["after_each"]]
    kept = len(threads0 & threads1)  # a cleared cache_resource would stop the model worker's thread, start another
    peak = max(rss.peak, rss0, rss1, *each_rss)
    delta = rss1 - rss0
    flat = max(each_threads + [len(threads1)]) <= len(threads0)
    warm = got["again"] < (got["warm"] + got["cold"]) / 2
    missed = [
        *([] if abs(delta) <= TARGET_RSS_DELTA_BYTES else ["RSS"]),
        *([] if flat and kept == len(threads0) else ["threads"]),
        *([] if warm else ["B cold again"]),
        *([] if got["same_page"] else ["B's page changed"]),
    ]
    row = [
        model.name,
        f"{len(got['after_each'])} (B: {what})",
        f"{rss0 / MB:.0f} / {min(each_rss) / MB:.0f}–{max(each_rss) / MB:.0f} / {rss1 / MB:.0f} / {peak / MB:.0f} MiB",
        f"{delta / MB:+.1f} MiB",
        f"{len(threads0)} / {min(each_threads)}–{max(each_threads)} / {len(threads1)} ({kept} of before's running)",
        f"{common.ms(statistics.median(got['sender']))} / {common.ms(max(got['sender']))}",
        f"{common.ms(got['cold'])} / {common.ms(got['warm'])} / **{common.ms(got['again'])}**",
        ("yes" if warm else "**no**") + (", same page" if got["same_page"] else ", **page differs**"),
        "yes"
        if not missed and not got["failures"]
        else f"**no** ({', '.join(missed + ['errors'] * bool(got['failures']))})",
        f"`{common.load_average(load_before)}` → `{common.load_average(load_after)}`",
    ]
    return row, len(got["failures"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clears", type=int, default=10, help="clear_cache messages, each followed by a rerun")
    p.add_argument("--words", type=int, default=500, help="words of B's English text (before the app cuts it)")
    p.add_argument("--model", default="all", help="a model's name in the app (reverse, SmolLM2-135M-Instruct…) or all")
    p.add_argument("--checkpoints", type=Path, help="a checkpoint directory or a folder of them")
    p.add_argument("--tiny", action="store_true", help="tiny untrained checkpoints from training.tiny (no SmolLM2)")
    p.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS for the server (app.py uses 1)")
    p.add_argument("--out", type=Path, help="also write the table to this markdown file")
    p.add_argument("--repeats", type=int, help=argparse.SUPPRESS)  # passed on by run_all.py; not used here
    p.add_argument("--quick", action="store_true", help="3 clears: a smoke test")
    args = p.parse_args(argv)
    if args.quick:
        args.clears = min(args.clears, 3)
    models, what = common.listed_models(args)
    if not models:
        p.error(f"no model named {args.model!r} in {what}")
    rows, failed = [], 0
    for model in models:
        row, failures = measure(model, args)
        rows.append(row)
        failed += failures
    table = common.Table(
        ["model", "clears", "server RSS before / after each clear / after all / peak", "after all − before",
         "threads before / after each clear / after all", "A's rerun after a clear: median / max",
         "B's rerun: cold / warm / after the clears", "B still warm?", "targets met?", "load average before → after"],
        rows,
    )  # fmt: skip
    text = common.emit([
        "### A client's clear_cache: the server's memory, threads and other sessions' caches",
        "",
        f"{common.machine_line()}; the server's torch uses 1 thread (app.py); commit {git_commit()}; "
        f"`{uptime()}` at the end",
        f"- models: {what}",
        f"- session A sends {args.clears} `clear_cache` BackMsgs, each followed by a rerun; session B, which typed a "
        "long text before, reruns it after them. RSS of the server's process tree, threads of /proc/PID/task "
        "over the tree, each read once the thread count has held still 0.5 s; peak sampled every 0.1 s. B still "
        "warm: its rerun after the clears nearer its warm time than its cold one, and the same page.",
        f"- targets: RSS after all − before within ± {TARGET_RSS_DELTA_BYTES / 1e6:.0f} MB "
        f"({TARGET_RSS_DELTA_BYTES / MB:.0f} MiB), threads flat (none above before, before's threads all still "
        "running), B still warm",
        "",
        table.markdown(),
    ])  # fmt: skip
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 1 if failed else 0  # a page that failed fails the run; the targets do not


if __name__ == "__main__":
    sys.exit(main())
