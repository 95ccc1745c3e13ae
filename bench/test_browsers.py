"""The browser tests' cost per page visit: Debian's full chromium against chromium-headless-shell, the one the tests
drive (tests/browser_support.py). Each round opens every page of the app on both shipped models in a fresh browser
context, as tests/test_browser_axe.py does, waits until it has settled and holds still, and runs axe-core on it;
the two browsers take turns, round by round, so that a change in the machine's load falls on both.

    python bench/test_browsers.py [--rounds 2] [--pages 8] [--port 8599]

Prints each round's wall time and the machine's busy CPU seconds (from /proc/stat: the server, the browser and its
renderers, Playwright's driver: everything a visit costs) per visit. Starts the README's server on the shipped
checkpoints (bench/browser.py's start_server) and visits every page once before the rounds, so that both browsers
meet a warm server. Needs playwright, /usr/bin/chromium and /usr/bin/chromium-headless-shell.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

from browser import start_server, stop_server

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser_support import ARGS, AXE, RUN_AXE, settle  # noqa: E402

from ui.pages import PAGES  # noqa: E402

BROWSERS = {"chromium": "/usr/bin/chromium", "headless shell": "/usr/bin/chromium-headless-shell"}
MODELS = ("lm-english", "translate-en-de")


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (user, nice, system, irq, softirq) since it started."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / 100


def visit_all(playwright, executable: str, base: str, paths: list[str]) -> int:
    """Every path on both models, each in a fresh context: opened, settled, axe-core run. The visits made."""
    browser = playwright.chromium.launch(executable_path=executable, args=ARGS)
    try:
        for path in paths:
            for model in MODELS:
                context = browser.new_context(viewport={"width": 1024, "height": 768})
                page = context.new_page()
                page.set_default_timeout(90_000)
                page.goto(f"{base}/{path}?{urlencode({'model': model})}")
                settle(page)
                page.add_script_tag(path=str(AXE))
                page.evaluate(RUN_AXE)
                context.close()
    finally:
        browser.close()
    return len(paths) * len(MODELS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pages", type=int, default=8, help="the first N pages of the menu")
    parser.add_argument("--port", type=int, default=8599)
    args = parser.parse_args()
    missing = [exe for exe in BROWSERS.values() if not Path(exe).exists()]
    if missing:
        sys.exit(f"missing: {', '.join(missing)} (apt-get install chromium chromium-headless-shell)")
    from playwright.sync_api import sync_playwright

    paths = [p.url_path for p in PAGES[: args.pages]]
    proc = start_server(ROOT, args.port, ROOT / "checkpoints")
    base = f"http://localhost:{args.port}"
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in BROWSERS}
    try:
        with sync_playwright() as playwright:
            visit_all(playwright, BROWSERS["chromium"], base, paths)  # the server's caches warm for both
            for _ in range(args.rounds):
                for name, executable in BROWSERS.items():
                    cpu, wall = busy_seconds(), time.perf_counter()
                    visits = visit_all(playwright, executable, base, paths)
                    results[name].append(((time.perf_counter() - wall) / visits, (busy_seconds() - cpu) / visits))
    finally:
        stop_server(proc)
    print(f"{len(paths)} pages × {len(MODELS)} models a round, {args.rounds} rounds, per visit (median of rounds):")
    for name, rows in results.items():
        wall = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        print(
            f"  {name:15s} wall {wall:5.2f} s   machine CPU {cpu:5.2f} s   rounds: "
            + ", ".join(f"{w:.2f}/{c:.2f}" for w, c in rows)
        )
    full, shell = (statistics.median(r[1] for r in results[n]) for n in BROWSERS)
    print(f"headless shell / chromium, machine CPU per visit: {shell / full:.2f}")


if __name__ == "__main__":
    main()
