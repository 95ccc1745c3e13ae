"""Run every benchmark, each in its own process, and write their tables to bench/results.md.

    python bench/run_all.py [--repeats N] [--quick] [--checkpoints DIR] [--tiny] [--threads N] [--only NAME ...]

A script that fails or runs past its time limit leaves its error in results.md and the others still run.
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
# classroom, pages, class_long and clear_cache: real sessions over the websocket against the README's server;
# browser: a real browser.
SCRIPTS = (
    "trace_speed",
    "recording_cost",
    "payload_size",
    "trace_size",
    "vs_bertviz",
    "classroom",
    "pages",
    "class_long",
    "clear_cache",
    "browser",
)
LIMIT_S = 3600


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
        return out.stdout.strip() + (" + uncommitted changes" if dirty.strip() else "")
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--checkpoints", type=Path)
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--only", nargs="*", choices=SCRIPTS, help="run only these scripts")
    p.add_argument("-o", "--output", type=Path, default=BENCH / "results.md")
    args = p.parse_args(argv)
    passed = ["--repeats", str(args.repeats)] + (["--quick"] if args.quick else []) + (["--tiny"] if args.tiny else [])
    passed += ["--checkpoints", str(args.checkpoints)] if args.checkpoints else []
    passed += ["--threads", str(args.threads)] if args.threads else []
    sections = [
        "# Benchmark results",
        "",
        f"Written by `python bench/run_all.py {' '.join(passed)}` on "
        f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, commit {git_commit()}.",
        "",
    ]
    failures = 0
    for name in args.only or SCRIPTS:
        cmd = [sys.executable, str(BENCH / f"{name}.py"), *passed]
        print(f"== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=LIMIT_S)
            out, code = done.stdout, done.returncode
            err = done.stderr
        except subprocess.TimeoutExpired as exc:
            out, code, err = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else exc.stdout or "", -1, ""
            err = f"timed out after {LIMIT_S} s"
        table = out[out.find("### ") :] if "### " in out else out
        print(table, flush=True)
        sections.append(table.strip() + "\n")
        if code != 0:
            failures += 1
            tail = "\n".join(err.strip().splitlines()[-15:])
            sections.append(f"**bench/{name}.py failed (exit {code})**:\n\n```\n{tail}\n```\n")
            print(tail, file=sys.stderr)
        sections.append(f"<sub>bench/{name}.py took {time.perf_counter() - t0:.0f} s</sub>\n")
    args.output.write_text("\n".join(sections), encoding="utf-8")
    print(f"wrote {args.output}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
