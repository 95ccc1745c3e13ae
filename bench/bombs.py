"""`python bench/bombs.py`: hostile and heavy trace files uploaded through the app's own upload box, at once.

A server started as the README starts it (bench/classroom.serve, lm-english), and one headless chromium (Playwright,
Debian's /usr/bin/chromium) with one browser context per file: each opens "Open a trace file" and gives its file to
the page's upload box at the same moment, as students would. Each page is read until it shows the file (its
summary table) or an error; the server's resident memory (its process tree, every 0.1 s) before, at its peak and
after. Two rounds, each on a fresh server:

  bombs   two .npz traces whose attention is 48 heads × 4,096 tokens of uint8 one-hot rows (about 1.2 MB each,
          3.2 GB as float32) and one whose meta.json is 16 MB and a byte of spaces (about 16 KB compressed)
  heavy   ten JSON traces of lm-english, each a real export of a text of `--tokens` tokens (76 MB at 256)

What it leaves out: raw requests to the upload endpoint that no widget claims (bench/uploads.py), and what the
browser spends.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import classroom  # the bench's own server helpers
import common
from browser import stop_server

from analysis.analyze import analyze
from analysis.export import to_json, to_npz_bytes
from analysis.imported import MAX_META_BYTES
from inference.checkpoint import load_checkpoint

MB = 2**20
CHECKPOINT = common.ROOT / "checkpoints" / "lm-english"
PAGE_TIMEOUT_S = 300


def long_text(ckpt, tokens: int) -> str:
    """Everyday sentences until the text is `tokens` tokens long in the checkpoint's tokenizer (cut there)."""
    words: list[str] = []
    for sentence in classroom.everyday_sentences(400, seed=0):
        words += sentence.split()
        if len(ckpt.tokenizer.encode(" ".join(words))) >= tokens:
            break
    while len(ckpt.tokenizer.encode(" ".join(words))) > tokens - 2:  # room for <s> and the model's own cut
        words.pop()
    return " ".join(words)


def npz_replacing(base: bytes, replace: dict[str, np.ndarray]) -> bytes:
    """`base` (an exported .npz trace) with some members replaced, compressed as the export compresses."""
    with np.load(io.BytesIO(base)) as archive:
        arrays = {k: archive[k] for k in archive.files}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **{**arrays, **replace})
    return buffer.getvalue()


def bomb_files(folder: Path) -> list[Path]:
    ckpt = load_checkpoint(CHECKPOINT)
    base = to_npz_bytes(analyze(ckpt, "The cat sat on the mat."))
    with zipfile.ZipFile(io.BytesIO(base)) as archive:
        weights = next(n[:-4] for n in archive.namelist() if n.endswith(".weights.npy"))
    heads, n = 48, 4096
    one_hot = np.zeros((heads, n, n), np.uint8)
    one_hot[:, np.arange(n), np.arange(n)] = 1
    files = []
    for i in (1, 2):
        path = folder / f"uint8-bomb-{i}.npz"
        path.write_bytes(npz_replacing(base, {weights: one_hot}))
        files.append(path)
    del one_hot
    path = folder / "meta-json-bomb.npz"
    path.write_bytes(npz_replacing(base, {"meta.json": np.full(MAX_META_BYTES + 1, ord(" "), np.uint8)}))
    return [*files, path]


def heavy_files(folder: Path, count: int, tokens: int) -> list[Path]:
    ckpt = load_checkpoint(CHECKPOINT)
    data = to_json(analyze(ckpt, long_text(ckpt, tokens))).encode("utf-8")
    files = []
    for i in range(count):
        path = folder / f"trace-{i + 1}.json"
        path.write_bytes(data)
        files.append(path)
    return files


def upload_at_once(url: str, files: list[Path]) -> list[tuple[str, float]]:
    """Each file to its own browser context's upload box at the same moment: (what its page showed, seconds)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        pages = []
        for _ in files:
            page = browser.new_context(viewport={"width": 1024, "height": 768}).new_page()
            page.goto(f"{url}/trace?model={CHECKPOINT.name}")
            page.get_by_text("No trace opened yet").wait_for(timeout=PAGE_TIMEOUT_S * 1000)
            pages.append(page)
        start = time.perf_counter()
        for page, path in zip(pages, files):
            page.locator('input[type="file"]').first.set_input_files(str(path))
        shown = []
        for page, path in zip(pages, files):  # the trace's summary names the file in a cell; an error says why not
            done = page.locator(f'[data-testid="stAlertContentError"], td:text-is("{path.name}")').first
            try:
                done.wait_for(timeout=PAGE_TIMEOUT_S * 1000)
                errors = page.locator('[data-testid="stAlertContentError"]')
                text = errors.first.inner_text() if errors.count() else "opened: its summary and views drawn"
            except Exception as exc:  # the row says what went wrong instead
                text = f"no answer ({type(exc).__name__})"
            shown.append((" ".join(text.split()), time.perf_counter() - start))
        browser.close()
    return shown


def measure(files: list[Path]) -> dict:
    proc, ws_url = classroom.serve(CHECKPOINT, threads=1)
    url = ws_url.replace("ws://", "http://").split("/_stcore")[0]
    try:
        with classroom.RssSampler(proc.pid) as rss:
            before = rss.now()
            shown = upload_at_once(url, files)
            time.sleep(1)
            after = rss.now()
        return {"shown": shown, "before": before, "peak": max(rss.peak, before, after), "after": after}
    finally:
        stop_server(proc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/bombs.py", description=__doc__.split("\n")[0])
    parser.add_argument("--heavy", type=int, default=10, help="JSON traces uploaded at once in the second round")
    parser.add_argument("--tokens", type=int, default=256, help="tokens of each JSON trace's text")
    args = parser.parse_args(argv)
    print(f"load before: {classroom.uptime()}")
    with tempfile.TemporaryDirectory() as tmp:
        rounds = {
            "bombs": bomb_files(Path(tmp)),
            "heavy": heavy_files(Path(tmp), args.heavy, args.tokens),
        }
        for name, files in rounds.items():
            sizes = ", ".join(sorted({f"{f.stat().st_size / MB:.1f} MB" for f in files}))
            print(f"\n{name}: {len(files)} files at once ({sizes}), lm-english")
            result = measure(files)
            for path, (text, seconds) in zip(files, result["shown"]):
                print(f"  {path.name}: {seconds:.1f} s: {text[:160]}")
            print(
                f"  server RSS: {result['before'] / MB:,.0f} MiB before, {result['peak'] / MB:,.0f} MiB at its peak, "
                f"{result['after'] / MB:,.0f} MiB after"
            )
    print(f"\nload after: {classroom.uptime()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
