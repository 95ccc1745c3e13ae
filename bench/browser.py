"""In a real browser: from submitting a sentence to the heatmap painted, at 32 and 256 tokens, per model.

Starts the README's `python -m atlas app --server.port 8599 --server.headless true` (killed at the end, and on a
timeout), opens it in Debian's headless chromium through Playwright, picks the model by the URL (`?model=NAME`),
types a text of exactly N tokens into the sidebar's "Text" box and presses Ctrl+Enter. Measured until:
  heatmap   the one-head chart has new data with N key columns and its heatmap image is drawn
  + grid    the all-heads grid below it is redrawn too
Each repeat types a different text (no cache hits). Also: loading the page until the first heatmap is drawn.

    python bench/browser.py [--repeats N] [--quick] [--checkpoints DIR] [--tiny] [--port 8599]
Needs: playwright (requirements-dev.txt) and /usr/bin/chromium (`apt-get install -y chromium`).
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import common

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SIZES = (32, 256)
QUICK_SIZES = (32,)
STARTUP_S = 90
STEP_TIMEOUT_MS = 120_000
LOG = Path(tempfile.gettempdir()) / "atlas-bench-streamlit.log"

# The n-th Plotly chart on the page (0: one head, 1: grid) holds new data, i.e. a calcdata object other than the
# one remembered before submitting, with `keys` columns, and its heatmap image is painted.
PAINTED = """([index, keys]) => {
  const charts = document.querySelectorAll('.stPlotlyChart .js-plotly-plot');
  const gd = charts[index];
  if (!gd || !gd.calcdata || !gd.calcdata[0] || gd.calcdata === (window.__atlasOld || [])[index]) return false;
  const cd = gd.calcdata[0][0];
  if (keys > 0 && !(cd && cd.z && cd.z[0] && cd.z[0].length === keys)) return false;
  const img = gd.querySelector('.heatmaplayer image');
  return !!(img && img.getAttribute('href'));
}"""
REMEMBER = """() => { window.__atlasOld = Array.from(document.querySelectorAll('.stPlotlyChart .js-plotly-plot'))
  .map(gd => gd.calcdata); }"""


def start_server(root: Path, port: int, checkpoints: Path, threads: int = 0) -> subprocess.Popen:
    env = {**os.environ, "ATLAS_CHECKPOINTS": str(checkpoints)}
    if threads:  # torch reads it at start-up: the server's intra-op threads, like --threads for the other benches
        env["OMP_NUM_THREADS"] = str(threads)
    cmd = [sys.executable, "-m", "atlas", "app", "--server.port", str(port), "--server.headless", "true"]  # README
    cmd += ["--browser.gatherUsageStats", "false"]
    log = open(LOG, "w")  # the server writes it until it ends
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + STARTUP_S
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}; see {LOG}")
        try:
            if urllib.request.urlopen(f"http://localhost:{port}/_stcore/health", timeout=2).read() == b"ok":
                return proc
        except OSError:
            time.sleep(0.5)
    stop_server(proc)
    raise RuntimeError(f"streamlit did not answer on port {port} within {STARTUP_S} s")


def stop_server(proc: subprocess.Popen) -> None:
    """End the server we started (its own process group), politely then firmly."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def wait_painted(page, index: int, keys: int) -> None:
    page.wait_for_function(PAINTED, arg=[index, keys], polling="raf", timeout=STEP_TIMEOUT_MS)


def keys_of(ckpt, n: int) -> int:
    """Key columns of the chart the page opens on for an n-token input: n (LM self, or cross-attention's source)."""
    return n


def measure_model(page, base: str, ckpt, sizes, repeats: int) -> list[list[str]]:
    rows = []
    t0 = time.perf_counter()
    page.goto(f"{base}/?model={ckpt.name}")
    page.evaluate("() => { window.__atlasOld = []; }")
    wait_painted(page, 0, 0)
    load = time.perf_counter() - t0
    box = page.get_by_role("textbox", name="Text", exact=True)
    for n in sizes:
        if n > ckpt.config.max_len:
            rows.append([ckpt.name, n, f"n/a (max_len {ckpt.config.max_len})", "", ""])
            continue
        heat, both = [], []
        for r in range(repeats + 1):  # r = 0 warms up
            text = common.text_of_tokens(ckpt, n, variant=2000 + 17 * r + n)
            box.fill(text)
            page.evaluate(REMEMBER)
            t0 = time.perf_counter()
            box.press("Control+Enter")
            wait_painted(page, 0, keys_of(ckpt, n))
            t1 = time.perf_counter()
            wait_painted(page, 1, 0)
            t2 = time.perf_counter()
            if r:
                heat.append(t1 - t0)
                both.append(t2 - t0)
        rows.append([ckpt.name, n, f"**{common.ms(statistics.median(heat))}**", common.ms(statistics.median(both)), ""])
    rows[0][-1] = common.ms(load)
    return rows


def run(args) -> str:
    common.setup(args)
    dirs, what = common.checkpoint_dirs(args)
    ckpts = [common.load_checkpoint(d) for d in dirs]
    roots = {d.parent for d in dirs}
    title = "In the browser (bench/browser.py)"
    if len(roots) != 1:
        return common.emit([f"### {title}", "", "skipped: the checkpoints must share one folder", ""])
    if not Path(CHROMIUM).exists():
        return common.emit([f"### {title}", "", f"skipped: {CHROMIUM} is missing (apt-get install -y chromium)", ""])
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return common.emit([f"### {title}", "", "skipped: playwright is not installed (requirements-dev.txt)", ""])
    sizes = QUICK_SIZES if args.quick else SIZES
    repeats = min(args.repeats, 2) if args.quick else args.repeats
    table = common.Table(
        ["model", "tokens", "submit → heatmap painted", "→ heatmap + grid", "page load (1st visit)"], []
    )
    proc = start_server(common.ROOT, args.port, roots.pop(), args.threads)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.set_default_timeout(STEP_TIMEOUT_MS)
                for ckpt in ckpts:
                    table.rows += measure_model(page, f"http://localhost:{args.port}", ckpt, sizes, repeats)
            finally:
                browser.close()
    finally:
        stop_server(proc)
    return common.emit(
        [
            common.header(title, what, ckpts),
            f"Headless Debian chromium ({CHROMIUM}) via Playwright, viewport 1400×1000, server and browser on this "
            f"machine; server torch threads: {args.threads or 'default'}. Median of {repeats} submissions, each a "
            "different text of exactly that many tokens. 'page load' is the model's first visit (`?model=NAME`, its "
            "default text) until its heatmap is drawn: loading the model included, and for the first model also the "
            "server's first run of the app (imports).\n",
            table.markdown(),
        ]
    )


def main(argv=None) -> None:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=8599)
    run(p.parse_args(argv))


if __name__ == "__main__":
    main()
