"""Fairness: a class on Explore beside one student running three heavy tabs, on the server the README starts.

One server (`python -m atlas app`, as README says; bench/classroom.py starts it), two phases on it:
  alone   N students (websocket sessions speaking Streamlit's protocol, as bench/classroom.py) open the teacher's
          Explore link at once, then each types K sentences, the next as soon as the page is back;
  beside  the same with other sentences (no cache hits), while one student, in three tabs of a real browser
          (Playwright, Debian's chromium), runs the heavy work of the issue: residual patching of a pair of
          256-token texts (Compare), the detector over 20 long lines from its link (Head statistics) and the
          exact "Rank every head" over a 256-token text (Head ablation). The class starts once all three run.
Printed: Explore's page times (first page and typed sentences together) p50 / p95 in each phase and their ratio
(target: beside ≤ 2 × alone at p95), each heavy tab's time from its start to its result (they must finish), the
server's peak memory and the load average.

    python bench/fairness.py [--sessions 20] [--sentences 3] [--model lm-english] [--lines 20]
Needs playwright (requirements-dev.txt) and /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import threading
import time
from urllib.parse import urlencode

import common
from browser import ARGS, CHROMIUM, stop_server
from classroom import Link, RssSampler, everyday_sentences, run_sessions, serve, uptime
from playwright.sync_api import sync_playwright

TARGET_RATIO = 2.0
HEAVY_TIMEOUT_MS = 900_000
IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"


class Heavy(threading.Thread):
    """One student's three heavy tabs in one browser; `running` is set once all three have started their work,
    `times` holds each tab's seconds from its start to its result (or the error it met)."""

    def __init__(self, base: str, model: str, first: str, second: str, lines: list[str]) -> None:
        super().__init__(daemon=True)
        self.base, self.model, self.first, self.second, self.lines = base, model, first, second, lines
        self.running, self.done = threading.Event(), threading.Event()
        self.times: dict[str, float | str] = {}

    def run(self) -> None:
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                tabs = {name: context.new_page() for name in ("patching", "detector", "ranking")}
                text = {"model": self.model, "text": self.first}
                # open the two pages whose work needs a click, and wait for their buttons
                tabs["patching"].goto(
                    f"{self.base}/compare?{urlencode({**text, 'compare': self.second, 'patch': 'residual'})}"
                )
                tabs["ranking"].goto(f"{self.base}/ablation?{urlencode({**text, 'rank': 'exact'})}")
                patch = tabs["patching"].get_by_role("button", name="Patch (")
                rank = tabs["ranking"].get_by_role("button", name="Rank every head")
                patch.wait_for(timeout=HEAVY_TIMEOUT_MS)
                rank.wait_for(timeout=HEAVY_TIMEOUT_MS)
                for tab in (tabs["patching"], tabs["ranking"]):
                    tab.wait_for_function(IDLE, timeout=HEAVY_TIMEOUT_MS)
                start = {}
                start["detector"] = time.perf_counter()
                query = {**text, "detect_texts": "\n".join(self.lines)}
                tabs["detector"].goto(f"{self.base}/heads?{urlencode(query)}", wait_until="commit")
                start["patching"] = time.perf_counter()
                patch.click()
                start["ranking"] = time.perf_counter()
                rank.click()
                time.sleep(2)  # the clicks reach the server and the work starts
                self.running.set()
                checks = {  # each tab's result drawn: polled, so that whichever finishes first is timed first
                    "patching": "!!document.querySelector('.st-key-patching .js-plotly-plot')",
                    "ranking": "!!document.querySelector('.st-key-ablate_ranking_csv')",
                    "detector": f"document.body.innerText.includes('over {len(self.lines) + 1} texts')",
                }
                deadline = time.perf_counter() + HEAVY_TIMEOUT_MS / 1000
                while checks and time.perf_counter() < deadline:
                    for name in list(checks):
                        tab = tabs[name]
                        failed = tab.locator(
                            "[data-testid='stException'], [data-testid='stAlertContentError'], "
                            "[data-testid='stAlertContentInfo']"
                        )
                        if failed.count():
                            self.times[name] = f"error: {failed.first.inner_text()[:120]}"
                        elif tab.evaluate(f"() => {checks[name]}"):
                            self.times[name] = time.perf_counter() - start[name]
                        else:
                            continue
                        del checks[name]
                    time.sleep(0.5)
                for name in checks:
                    self.times[name] = "did not finish"
                    tabs[name].screenshot(path=f"{tempfile.gettempdir()}/fairness-{name}.png", full_page=True)
                browser.close()
        except Exception as exc:  # reported in the table, the class's figures still printed
            self.times["browser"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        finally:
            self.running.set()
            self.done.set()


def phase(url: str, model: str, sessions: int, k: int, seed: int) -> list[float]:
    """N sessions open a link and type K sentences each; every page's time (first pages and typed)."""
    texts = everyday_sentences(sessions * k + 1, seed)
    link = Link(texts.pop())
    groups = [texts[i * k : (i + 1) * k] for i in range(sessions)]
    _, times, _ = asyncio.run(run_sessions(url, model, groups, link))
    return [*link.times, *times]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=20)
    p.add_argument("--sentences", type=int, default=3, help="sentences each student types")
    p.add_argument("--model", default="lm-english")
    p.add_argument("--lines", type=int, default=20, help="the detector's lines in the heavy tab's link")
    p.add_argument("--tokens", type=int, default=256, help="tokens of the heavy tabs' texts")
    args = p.parse_args(argv)
    ckpt_dir = common.DEFAULT_CHECKPOINTS / args.model
    ckpt = common.load_checkpoint(ckpt_dir)
    first, second = (common.text_of_tokens(ckpt, args.tokens, variant) for variant in (0, 7))
    lines = [common.text_of_tokens(ckpt, min(200, args.tokens), 20 + i) for i in range(args.lines)]
    load_before = uptime()
    proc, url = serve(ckpt_dir, 0)
    base = url.replace("ws://", "http://").removesuffix("/_stcore/stream")
    try:
        with RssSampler(proc.pid) as rss:
            alone = phase(url, args.model, args.sessions, args.sentences, seed=1)
            heavy = Heavy(base, args.model, first, second, lines)
            heavy.start()
            heavy.running.wait()
            beside = phase(url, args.model, args.sessions, args.sentences, seed=2)
            class_done = time.perf_counter()
            print(
                f"class done; p95 alone {common.ms(common.percentile(alone, 95))}, beside "
                f"{common.ms(common.percentile(beside, 95))}; waiting for the heavy tabs",
                flush=True,
            )
            heavy.done.wait()
            after_class = time.perf_counter() - class_done
            peak = rss.peak
    finally:
        stop_server(proc)
    load_after = uptime()
    a95, b95 = common.percentile(alone, 95), common.percentile(beside, 95)
    print(f"# Fairness: {args.sessions} students on Explore, {args.model}; {common.machine_line()}")
    print(f"load average before: {common.load_average(load_before)}; after: {common.load_average(load_after)}")
    print(f"Explore alone:  p50 {common.ms(common.percentile(alone, 50))}, p95 {common.ms(a95)} ({len(alone)} pages)")
    print(
        f"Explore beside three heavy tabs: p50 {common.ms(common.percentile(beside, 50))}, p95 {common.ms(b95)} "
        f"({len(beside)} pages)"
    )
    print(
        f"p95 ratio beside / alone: {b95 / a95:.2f} (target ≤ {TARGET_RATIO}) {common.verdict(b95 / a95, TARGET_RATIO)}"
    )
    for name, value in heavy.times.items():
        shown = f"{value:.1f} s" if isinstance(value, float) else value
        print(f"heavy tab {name}: {shown}")
    print(f"the heavy tabs finished {after_class:.1f} s after the class's last page")
    print(f"server peak RSS: {peak / 2**20:,.0f} MiB")
    return 0 if b95 <= TARGET_RATIO * a95 and all(isinstance(v, float) for v in heavy.times.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
