"""Where a typed page's time goes on the server a class uses: py-spy samples the README's server under the bench.

Starts the server as bench/classroom.py does (`python -m atlas app`, headless, a free port), warms it with one
session typing `--warm` sentences, then lets `--sessions` sessions type `--sentences` sentences each over the
websocket while `py-spy record` samples every thread of the server (`--rate` a second; `--gil`: only the thread
holding the interpreter lock, which is what one server's pages compete for). Prints the server's CPU a typed page
(CpuClock: user + system of its process tree), the load, and the functions that hold the most samples: inclusive
(the function or anything it called) and own (the function itself), as shares of the busy samples (a thread
waiting in a select or a lock is left out: WAITS).

    python bench/server_profile.py [--model lm-english] [--sessions 1] [--sentences 60] [--warm 3] [--rate 200]
                                   [--gil] [--top 30] [--raw FILE] [--checkpoints DIR]

Needs py-spy (`pip install py-spy`; on Linux it reads another process's memory, which needs ptrace rights over
it: the server is started by this script, as its child, so no root is needed where ptrace_scope is 0 or 1).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common
from browser import stop_server
from classroom import CpuClock, Link, run_sessions, sentences_for, spawn, uptime, wait_healthy

FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


# a thread whose innermost frame is one of these waits: py-spy's idle heuristic misses some of them
WAITS = frozenset(("EpollSelector.select", "Condition.wait", "Event.wait", "Thread.join", "Queue.get", "sleep"))


def frame_name(frame: str) -> tuple[str, bool]:
    """A py-spy frame `function (dir/file.py:LINE)` as `function (dir/file.py)` (lines of one function add up),
    and whether the file is this repository's."""
    match = FRAME.match(frame.strip())
    if match is None:
        return frame.strip(), False
    path = Path(match["file"])
    where = "/".join(path.parts[-2:])
    return f"{match['function']} ({where})", (common.ROOT / match["file"]).is_file()


def shares(raw: str) -> tuple[int, int, collections.Counter, collections.Counter, set[str]]:
    """py-spy's raw (collapsed) output → (busy samples, waiting samples, inclusive counts, own counts, the names
    of this repository's functions), by `frame_name`; a sample whose innermost frame waits (WAITS) is counted apart.
    """
    busy = waiting = 0
    inclusive, own, ours = collections.Counter(), collections.Counter(), set()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [frame_name(f) for f in stack.split(";")[1:] if f]  # the first is the process
        if not frames:
            continue
        if frames[-1][0].split(" (")[0] in WAITS:
            waiting += n
            continue
        busy += n
        for name, mine in set(frames):
            inclusive[name] += n
            if mine:
                ours.add(name)
        own[frames[-1][0]] += n
    return busy, waiting, inclusive, own, ours


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="lm-english", help="a checkpoint name")
    p.add_argument("--checkpoints", type=Path, help="a checkpoint directory or a folder of them")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS for the server")
    p.add_argument("--sessions", type=int, default=1, help="sessions typing while the profile is taken")
    p.add_argument("--sentences", type=int, default=60, help="sentences each session types")
    p.add_argument("--warm", type=int, default=3, help="sentences typed before the profile starts")
    p.add_argument("--rate", type=int, default=200, help="py-spy samples a second")
    p.add_argument("--gil", action="store_true", help="sample only the thread holding the interpreter lock")
    p.add_argument("--top", type=int, default=30, help="functions listed")
    p.add_argument("--raw", type=Path, help="also keep py-spy's collapsed stacks in this file")
    args = p.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("error: py-spy is not installed (pip install py-spy)", file=sys.stderr)
        return 2
    dirs, _ = common.checkpoint_dirs(args)
    ckpt_dir = next((d for d in dirs if common.model_name(d) == args.model), None)
    if ckpt_dir is None:
        print(f"error: no checkpoint {args.model!r} (have: {', '.join(common.model_name(d) for d in dirs)})")
        return 2
    texts = sentences_for(ckpt_dir, args.warm + args.sessions * args.sentences + 1, seed=7)
    link = Link(texts.pop())
    warm, typed = texts[: args.warm], texts[args.warm :]
    groups = [typed[i * args.sentences : (i + 1) * args.sentences] for i in range(args.sessions)]
    load_before = uptime()
    proc, port = spawn(ckpt_dir, args.threads)
    url = wait_healthy(proc, port)
    raw_file = args.raw or Path(tempfile.mkstemp(prefix="server-profile.", suffix=".txt")[1])
    try:
        asyncio.run(run_sessions(url, args.model, [warm], link))
        cmd = [spy, "record", "--pid", str(proc.pid), "--subprocesses", "-r", str(args.rate), "-f", "raw",
               "--nonblocking", "-o", str(raw_file)] + (["--gil"] if args.gil else [])  # fmt: skip
        recorder = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # py-spy attaches before the first page is sent
        if recorder.poll() is not None:
            print(f"error: py-spy could not sample the server: {recorder.stderr.read().strip()}", file=sys.stderr)
            return 2
        cpu = CpuClock(proc.pid)
        _, times, wall = asyncio.run(run_sessions(url, args.model, groups, Link(link.text), cpu))
        recorder.send_signal(subprocess.signal.SIGINT)  # py-spy writes its file when interrupted
        recorder.wait(timeout=60)
    finally:
        stop_server(proc)
    total, waiting, inclusive, own, ours = shares(raw_file.read_text())
    print(f"# {args.model}: where a typed page's time goes on the server (py-spy, {args.rate}/s"
          f"{', GIL holder only' if args.gil else ', every active thread'})")  # fmt: skip
    print(f"{common.machine_line()}; load before `{load_before.split('load average:')[-1].strip()}`, "
          f"after `{uptime().split('load average:')[-1].strip()}`")  # fmt: skip
    print(f"{len(times)} typed pages by {args.sessions} session(s) in {wall:.1f} s; page p50 "
          f"{common.ms(common.percentile(times, 50))}; server CPU a page {common.ms(cpu.seconds / len(times))}; "
          f"{total} busy samples ({waiting} more waiting, left out); collapsed stacks in {raw_file}")  # fmt: skip
    if not total:
        print("error: py-spy took no samples", file=sys.stderr)
        return 1
    print("\n| this repository's function | inclusive | own |\n|---|---|---|")
    for name, n in [(name, n) for name, n in inclusive.most_common() if name in ours][: args.top]:
        print(f"| `{name}` | {100 * n / total:.1f} % | {100 * own[name] / total:.1f} % |")
    print("\n| any function, by its own samples | own | inclusive |\n|---|---|---|")
    for name, n in own.most_common(args.top):
        print(f"| `{name}` | {100 * n / total:.1f} % | {100 * inclusive[name] / total:.1f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
