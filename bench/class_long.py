"""A class on long texts: N sessions at once, each typing its own ≈500-word text, then opening Attention math and
Head ablation, all at the same moment, against a fresh server per model, started as the README starts it.

Starts the server as the README does (bench/classroom.py: headless, a free port, no file watcher; stopped at the
end), one per model: every checkpoint under checkpoints/ (or --checkpoints), and SmolLM2-135M-Instruct as the app
lists it with ATLAS_PRETRAINED=1 beside them (a row saying why when it is not installed). Each session speaks
Streamlit's websocket protocol as the browser does (bench/pages.py's PageSession keeps the widget states and reads
the pages from the app's `st.navigation` message) and takes four steps, every session starting each step together
(a barrier: everyone waits until the last session's page is back):
  1. link            connect and open the teacher's link (`?model=NAME`, the default text), timed from connecting;
  2. Explore         type its own text into the sidebar's Text box (the rerun Ctrl+Enter sends);
  3. Attention math  open the page from the navigation (its page script hash, the sidebar's widget states);
  4. Head ablation   the same (no head switched off: the page runs the intact and the ablated model once each).
Each figure is from sending that step's message to its run's `script_finished` (after every chart and table of the
page); p50 / p95 are common.percentile's nearest rank over the N sessions, max the slowest. No browser paints
(bench/browser.py measures painting), and the HTML and JavaScript a browser fetches before it connects are
static files, not timed.

Texts: distinct per session and seeded: everyday English sentences (bench/classroom.py's templates, every
sentence drawn once) joined to about --words words (default 500), or for the reversal model a string of its
max_len letters over a–p (its training alphabet). The bench sends them whole; the app cuts each to the model's
max_len itself (its warning "The input was cut from X to Y tokens" is read back, the table shows both numbers),
so a 256-token model reads a text's first ≈200 words. Distinct texts are distinct from their first sentence: no
session's analysis is a cache hit on another's.

Pages with an error: a page that ends otherwise than successfully, shows an exception or an error alert, draws no
chart and no table, or gets no answer (each listed under the table). Server RSS: the resident memory of the
server's whole process tree, sampled every 0.1 s from the moment it answers /_stcore/health to the end (start /
peak / end). Targets (printed, not asserted): every page ≤ 10 s at max, 0 pages with an error, peak RSS ≤ 1.5 GB.
The table gives the load average before and after each model: on a shared machine compare runs at similar load.

    python bench/class_long.py [--sessions 20] [--words 500] [--model NAME|all] [--checkpoints DIR] [--tiny]
                               [--seed 0] [--threads N] [--quick] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import classroom
import common
from browser import stop_server
from classroom import RssSampler, uptime
from common import Listed
from pages import Drawn, PageSession
from run_all import git_commit

TARGET_PAGE_S = 10.0
TARGET_RSS_BYTES = 1.5e9  # 1.5 GB
ALPHABET = "abcdefghijklmnop"  # the reversal task's (its card.json)
STEPS = {"link": "link", "": "Explore", "math": "Attention math", "ablation": "Head ablation"}  # url path: title
CUT = re.compile(r"cut from (\d+) to (\d+) tokens")
MB = 1024 * 1024


# ---------------------------------------------------------------------------------------------------------------
# the texts


def long_texts(model: Listed, count: int, words: int, seed: int) -> tuple[list[str], str]:
    """`count` distinct texts for this model, and what they are in a few words."""
    if model.path is not None and common.reversal_task(model.path):
        max_len = common.load_checkpoint(model.path).config.max_len
        rng, texts = random.Random(seed), []
        while len(texts) < count:
            text = "".join(rng.choice(ALPHABET) for _ in range(max_len))
            if text not in texts:
                texts.append(text)
        return texts, f"{max_len} letters a–p"
    pool = iter(classroom.everyday_sentences(count * (words // 6 + 1), seed))  # a sentence has at least 7 words
    texts = []
    for _ in range(count):
        sentences: list[str] = []
        while sum(len(s.split()) for s in sentences) < words:
            sentences.append(next(pool))
        texts.append(" ".join(sentences))
    counts = [len(t.split()) for t in texts]
    if model.path is not None and common.load_checkpoint(model.path).config.switches.sum_outputs:
        return [classroom.with_blank(t) for t in texts], f"{span(counts)} words, the middle one a blank ___"
    return texts, f"{span(counts)} words"


# ---------------------------------------------------------------------------------------------------------------
# the sessions


@dataclass
class Run:
    """What every session of one model met: per step its times, the pages with an error, the app's cut notes."""

    times: dict[str, list[float]] = field(default_factory=lambda: {step: [] for step in STEPS})
    failed: list[str] = field(default_factory=list)
    cuts: set[tuple[int, int]] = field(default_factory=set)


async def step(session: PageSession, path: str, text: str) -> Drawn:
    if path == "link":
        t0 = time.perf_counter()
        page = await session.open()
        page.seconds = time.perf_counter() - t0  # from connecting, as classroom.py times the link
        missing = [p for p in STEPS if p != "link" and session.titles.get(p) != STEPS[p]]
        if missing:
            page.errors.append(f"the app's navigation has no {[STEPS[p] for p in missing]} (it has {session.titles})")
        return page
    if path == "":
        return await session.rerun(text)
    return await session.goto(path)


async def one_session(url: str, name: str, index: int, text: str, barriers: dict, run: Run) -> None:
    """The four steps, each after every session has finished the one before; a session whose connection broke
    still waits at every barrier (so that the others go on) and counts its remaining pages as failed."""
    session, broken = PageSession(url, name), ""
    try:
        for path, title in STEPS.items():
            if path in barriers:
                await barriers[path].wait()
            if broken:
                run.failed.append(f"session {index + 1}, {title}: not run ({broken})")
                continue
            try:
                page = await step(session, path, text)
            except Exception as exc:  # any failure is a failed page, reported; the class goes on
                broken = f"{type(exc).__name__}: {exc}"[:200]
                run.failed.append(f"session {index + 1}, {title}: {broken}")
                continue
            run.times[path].append(page.seconds)
            problem = page.problem()
            if problem:
                run.failed.append(f"session {index + 1}, {title}: {problem}"[:300])
            run.cuts |= {(int(a), int(b)) for w in page.warnings for a, b in CUT.findall(w)}
    finally:
        with contextlib.suppress(Exception):
            await session.close()


async def run_class(url: str, name: str, texts: list[str]) -> Run:
    run = Run()
    barriers = {path: asyncio.Barrier(len(texts)) for path in STEPS if path != "link"}
    await asyncio.gather(*(one_session(url, name, i, t, barriers, run) for i, t in enumerate(texts)))
    return run


# ---------------------------------------------------------------------------------------------------------------
# the server


@contextlib.contextmanager
def environment(pairs: tuple[tuple[str, str], ...]) -> Iterator[None]:
    """These environment variables set while the server is spawned (it copies this process's environment)."""
    saved = {key: os.environ.get(key) for key, _ in pairs}
    os.environ.update(dict(pairs))
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def serve(model: Listed, threads: int):
    """classroom.serve for a listed model: the README's command with the model's folder as ATLAS_CHECKPOINTS
    (classroom.spawn gives the server the parent of the path it is given) and what else lists it."""
    with environment(model.env):
        return classroom.serve(model.folder / model.name, threads)


# ---------------------------------------------------------------------------------------------------------------
# the table


def span(values) -> str:
    """ "7" or "3–9": the range of some whole numbers."""
    values = sorted(values)
    return f"{values[0]}" if values[0] == values[-1] else f"{values[0]}–{values[-1]}"


def cell(values: list[float]) -> str:
    if not values:
        return "—"
    return " / ".join(f"{v:.2f}" for v in (common.percentile(values, 50), common.percentile(values, 95), max(values)))


def measure(model: Listed, args) -> tuple[list[str], int]:
    """One model on a fresh server: its table row, and how many pages had an error."""
    if model.skipped:
        return [model.name, f"skipped: {model.skipped}", *["—"] * 8], 0
    texts, what = long_texts(model, args.sessions, args.words, args.seed)
    before = uptime()
    proc, url = serve(model, args.threads)
    try:
        with RssSampler(proc.pid) as rss:
            start = rss.now()
            run = asyncio.run(run_class(url, model.name, texts))
            end = rss.now()
    finally:
        stop_server(proc)
    after = uptime()
    for line in run.failed[:10]:
        print(f"FAILED {model.name}: {line}", file=sys.stderr, flush=True)
    peak = max(rss.peak, start, end)  # a reading between two samples may be the highest
    slowest = max((max(v) for v in run.times.values() if v), default=float("inf"))
    done = sum(len(v) for v in run.times.values())
    cut = (
        f"; the app cut them: {span(a for a, _ in run.cuts)} → {span(b for _, b in run.cuts)} tokens"
        if run.cuts
        else ""
    )
    missed = [
        *(["a page > 10 s"] if slowest > TARGET_PAGE_S else []),
        *(["errors"] if run.failed else []),
        *(["RSS"] if peak > TARGET_RSS_BYTES else []),
    ]
    row = [
        model.name,
        f"{len(texts)} × {what}{cut}",
        *(cell(run.times[path]) for path in STEPS),
        f"{len(run.failed)} of {len(texts) * len(STEPS)}" + ("" if done == len(texts) * len(STEPS) else " (not run)"),
        f"{start / MB:.0f} / {peak / MB:.0f} / {end / MB:.0f} MiB",
        "yes" if not missed else f"**no** ({', '.join(missed)})",
        f"`{common.load_average(before)}` → `{common.load_average(after)}`",
    ]
    return row, len(run.failed)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=20)
    p.add_argument("--words", type=int, default=500, help="words of each English text (before the app cuts it)")
    p.add_argument("--model", default="all", help="a model's name in the app (reverse, SmolLM2-135M-Instruct…) or all")
    p.add_argument("--checkpoints", type=Path, help="a checkpoint directory or a folder of them")
    p.add_argument("--tiny", action="store_true", help="tiny untrained checkpoints from training.tiny (no SmolLM2)")
    p.add_argument("--seed", type=int, default=0, help="seed of the texts")
    p.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS for the server (app.py uses 1)")
    p.add_argument("--out", type=Path, help="also write the table to this markdown file")
    p.add_argument("--repeats", type=int, help=argparse.SUPPRESS)  # passed on by run_all.py; not used here
    p.add_argument("--quick", action="store_true", help="3 sessions: a smoke test, the texts as long")
    args = p.parse_args(argv)
    if args.quick:
        args.sessions = min(args.sessions, 3)
    models, what = common.listed_models(args)
    if not models:
        p.error(f"no model named {args.model!r} in {what}")
    rows, failed = [], 0
    for model in models:
        row, errors = measure(model, args)
        rows.append(row)
        failed += errors
    table = common.Table(
        ["model", "sessions × text", "link p50 / p95 / max (s)", "Explore, typed p50 / p95 / max (s)",
         "Attention math p50 / p95 / max (s)", "Head ablation p50 / p95 / max (s)", "pages with an error",
         "server RSS start / peak / end", "targets met?", "load average before → after"],
        rows,
    )  # fmt: skip
    text = common.emit([
        "### A class on long texts: sessions × (Explore, Attention math, Head ablation) at once",
        "",
        f"{common.machine_line()}; the server's torch uses 1 thread (app.py); commit {git_commit()}; "
        f"`{uptime()}` at the end",
        f"- models: {what}",
        common.decoding_line(m.path for m in models),
        f"- {args.sessions} sessions over Streamlit's websocket open the link (`?model=NAME`) together, then each "
        "types its own text on Explore, opens Attention math, then Head ablation; every session starts each step "
        "together. Times from sending to that run's `script_finished`, in seconds (the link's from connecting). "
        f"Texts (seed {args.seed}) are sent whole; the app cuts them to the model's max_len.",
        f"- targets: every page ≤ {TARGET_PAGE_S:.0f} s (max), 0 pages with an error, server RSS peak ≤ 1.5 GB "
        f"({TARGET_RSS_BYTES / MB:.0f} MiB; its whole process tree, sampled every 0.1 s)",
        "",
        table.markdown(),
    ])  # fmt: skip
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 1 if failed else 0  # a page with an error fails the run, as in pages.py; the targets do not


if __name__ == "__main__":
    sys.exit(main())
