"""Where a browser test's page visit spends its time, phase by phase, as tests/test_browser_axe.py and
tests/test_browser_first_figure.py visit a page: a fresh browser context at 1024×768 in projector mode, the page
opened, its title drawn (browser_support.SETTLED), the page drawing on until it holds still for QUIET_MS
(browser_support.hold_still), axe-core's one run and a screenshot.

    python bench/page_visit.py [--rounds 2] [--pages 6] [--shared-context | --from-menu]

Prints each visit's phases in seconds and their means, and the CPU seconds each visit cost the app server, chromium
and Playwright's driver, with the machine's load; starts the tests' own server
(browser_support.serve) and chromium (browser_support.launch_chromium), and visits every page once first so that the
rounds meet a warm server.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser_support import (  # noqa: E402
    AXE,
    AXE_LOADED,
    QUIET_MS,
    RUN_AXE,
    SETTLED,
    hold_still,
    launch_chromium,
    open_from_menu,
    serve,
    settle,
)

from ui.pages import PAGES  # noqa: E402

PHASES = ("open", "title drawn", "draws on + quiet", "axe", "screenshot", "close")
TICK = os.sysconf("SC_CLK_TCK")
KINDS = ("server", "chromium", "playwright")


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds (user and system, reaped children's included) of this process's live descendants, by what each
    is: chromium (its renderers that have exited count in the browser's), playwright's driver (node), the app server
    (python)."""
    stats: dict[int, tuple[int, str, float]] = {}
    for entry in Path("/proc").iterdir():
        try:
            raw = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        if raw:
            fields = raw[raw.rindex(")") + 2 :].split()
            name = raw[raw.index("(") + 1 : raw.rindex(")")]
            stats[int(entry.name)] = (int(fields[1]), name, sum(map(int, fields[11:15])) / TICK)
    out = dict.fromkeys(KINDS, 0.0)
    for parent, name, seconds in stats.values():
        while parent in stats and parent != os.getpid():
            parent = stats[parent][0]
        if parent == os.getpid():
            kind = "chromium" if "chrom" in name else "playwright" if "node" in name else "server"
            out[kind] += seconds
    return out


def visit(browser, url: str, shot: Path, context=None) -> list[float]:
    """One visit's phases (PHASES), in seconds: in a fresh browser context, or in `context` (a page of its own, its
    cookies cleared, its cache kept)."""
    shared = context is not None
    if shared:
        context.clear_cookies()
    else:
        context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    marks = [time.perf_counter()]
    page.goto(url)
    marks.append(time.perf_counter())
    page.wait_for_function(SETTLED)
    marks.append(time.perf_counter())
    hold_still(page)
    marks.append(time.perf_counter())
    page.add_script_tag(path=str(AXE))
    page.evaluate(RUN_AXE)
    marks.append(time.perf_counter())
    page.screenshot(path=str(shot))
    marks.append(time.perf_counter())
    (page if shared else context).close()
    marks.append(time.perf_counter())
    return [b - a for a, b in zip(marks, marks[1:], strict=False)]


def visit_from_menu(tab, path: str, shot: Path) -> list[float]:
    """One visit's phases (PHASES) when the page is reached from the menu of `tab`, an open page of the app: its
    link clicked (open), the page settled (title drawn and holding still: one phase, the second left 0), axe-core
    and a screenshot (close: 0)."""
    marks = [time.perf_counter()]
    open_from_menu(tab, path)
    marks += [time.perf_counter()] * 3
    if not tab.evaluate(AXE_LOADED):  # injected once a tab, as the tests' settled_violations does
        tab.add_script_tag(path=str(AXE))
    tab.evaluate(RUN_AXE)
    marks.append(time.perf_counter())
    tab.screenshot(path=str(shot))
    marks += [time.perf_counter()] * 2
    return [b - a for a, b in zip(marks, marks[1:], strict=False)]


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--rounds", type=int, default=2)
    args.add_argument("--pages", type=int, default=6, help="the first N pages of ui/pages.py")
    args.add_argument(
        "--shared-context",
        action="store_true",
        help="every visit a new page of one context (its HTTP cache kept), not a context of its own",
    )
    args.add_argument(
        "--from-menu",
        action="store_true",
        help="each page reached from the menu of one open page (one session), not opened afresh",
    )
    opts = args.parse_args()
    from playwright.sync_api import sync_playwright

    paths = [p.url_path for p in PAGES][: opts.pages]
    shot = Path(os.environ.get("TMPDIR", "/tmp")) / "page_visit.png"
    started = time.perf_counter()
    server = serve()
    url = next(server)
    print(f"server: {time.perf_counter() - started:.1f} s to answer its health check")
    rows: list[list[float]] = []
    cpus: list[list[float]] = []
    try:
        with sync_playwright() as p:
            started = time.perf_counter()
            browser = launch_chromium(p)
            print(f"chromium: {time.perf_counter() - started:.2f} s to start")
            context = browser.new_context(viewport={"width": 1024, "height": 768}) if opts.shared_context else None
            for round_ in range(opts.rounds + 1):  # round 0 warms the server
                if opts.from_menu:
                    tab = browser.new_context(viewport={"width": 1024, "height": 768}).new_page()
                    tab.set_default_timeout(90_000)
                    tab.goto(f"{url}/{paths[-1]}?model=lm-english&projector=1")
                    settle(tab)
                for path in paths:
                    before = cpu_by_kind()
                    if opts.from_menu:
                        phases = visit_from_menu(tab, path, shot)
                    else:
                        phases = visit(browser, f"{url}/{path}?model=lm-english&projector=1", shot, context)
                    after = cpu_by_kind()
                    used = [after[k] - before[k] for k in KINDS]
                    if round_:
                        rows.append(phases)
                        cpus.append(used)
                        print(
                            f"/{path:<12}",
                            "  ".join(f"{s:5.2f}" for s in phases),
                            f"= {sum(phases):.2f} s;",
                            "CPU",
                            "  ".join(f"{k} {c:.2f}" for k, c in zip(KINDS, used, strict=True)),
                        )
            browser.close()
    finally:
        server.close()
    print(f"{len(rows)} visits; the mean of each phase ({', '.join(PHASES)}; QUIET_MS {QUIET_MS}):")
    means = [statistics.mean(col) for col in zip(*rows, strict=True)]
    print("  ".join(f"{name} {m:.2f}" for name, m in zip(PHASES, means, strict=True)), f"= {sum(means):.2f} s")
    cpu_means = [statistics.mean(col) for col in zip(*cpus, strict=True)]
    print(
        "CPU seconds a visit:",
        "  ".join(f"{k} {c:.2f}" for k, c in zip(KINDS, cpu_means, strict=True)),
        f"= {sum(cpu_means):.2f} s",
    )
    print("load average:", " ".join(Path("/proc/loadavg").read_text().split()[:3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
