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

The class beside the heavy student (--followers F, on the same server): a teacher starts a class and F followers
open its link (bench/class_follow.py's Client, Streamlit's protocol); the teacher types a new text --changes times
a phase. In four phases — alone and beside the heavy tabs, each with the machine as it is and with every core busy
with other work (one `nice -n 0` busy loop a core, started by the bench) — it prints the teacher's page (send →
the run finished) and the followers' follow (send → the follower's page holds the text) p50 / p95, and beside /
alone at p95 for each (target: within 1.5× or 0.3 s), and each phase's teacher's page times as they came; one
untimed change goes before the first phase. --sessions 0 measures the class alone, without the Explore students:
after the beside phases it stops the heavy tabs and measures both alone phases again, and alone's p95 is then of
the pages before and after together (the machine's other load drifts during a run; so it weighs on both sides).
Each phase's row says where the cores went meanwhile: the server, the heavy student's browser, the busy loops.

The heavy student's browser runs here on the server's machine, where in a class it runs on the student's own
device: the cores column shows what it took. --browser-nice N runs it at nice N, its session's scheduling group too
where the kernel groups a session's processes (Linux's autogroup: Playwright starts chromium in a session of its
own, which the kernel then weighs as much as the server's whole process). At 19 the server's heavy work starves it
and the heavy tabs' own times mean little, so the default is 0, as any program.

    python bench/fairness.py [--sessions 20] [--sentences 3] [--model lm-english] [--lines 20] [--followers 15]
    python bench/fairness.py --sessions 0 --followers 15 --changes 5   # the class's four phases only
    python bench/fairness.py --sessions 0 --browser-nice 19              # the browser behind everything else
    python bench/fairness.py --sessions 0 --busy 18 --busy-apart         # load ≈ 20: eighteen other programs
Needs playwright (requirements-dev.txt) and /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from urllib.parse import quote, urlencode

import common
import psutil
from browser import ARGS, CHROMIUM, stop_server
from class_follow import Client
from classroom import Link, RssSampler, everyday_sentences, run_sessions, serve, uptime
from playwright.sync_api import sync_playwright

TARGET_RATIO = 2.0
CLASS_RATIO, CLASS_SLACK_S = 1.5, 0.3  # the class beside a heavy student: within 1.5× of alone, or within 0.3 s
HEAVY_TIMEOUT_MS = 900_000
IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"


class Heavy(threading.Thread):
    """One student's three heavy tabs in one browser; `running` is set once all three have started their work,
    `times` holds each tab's seconds from its start to its result (or the error it met)."""

    def __init__(self, base: str, model: str, first: str, second: str, lines: list[str], nice: int = 0) -> None:
        super().__init__(daemon=True)
        self.base, self.model, self.first, self.second, self.lines = base, model, first, second, lines
        self.nice = nice
        self.running, self.done = threading.Event(), threading.Event()
        self.stop = threading.Event()  # set: the tabs still working are left unfinished and the browser closed
        self.times: dict[str, float | str] = {}

    def run(self) -> None:
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                if self.nice:
                    renice(browser_processes(), self.nice)  # before its tabs: their processes inherit it
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                context.set_default_timeout(HEAVY_TIMEOUT_MS)  # reniced, it waits its turn behind the heavy work
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
                while checks and time.perf_counter() < deadline and not self.stop.is_set():
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
                    if self.stop.is_set():
                        self.times[name] = "still running when the class was measured (stopped)"
                        continue
                    self.times[name] = "did not finish"
                    tabs[name].screenshot(path=f"{tempfile.gettempdir()}/fairness-{name}.png", full_page=True)
                browser.close()
        except Exception as exc:  # reported in the table, the class's figures still printed
            self.times["browser"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        finally:
            self.running.set()
            self.done.set()


def browser_processes() -> list[psutil.Process]:
    """This bench's chromium processes (Playwright's driver starts them: our descendants)."""
    return [c for c in psutil.Process().children(recursive=True) if "chrom" in c.name()]


def renice(procs: list[psutil.Process], nice: int) -> None:
    """Each process at `nice`, and the scheduling group of each one's session where the kernel has one
    (/proc/PID/autogroup: its nice weighs the group against the others, whatever its processes' own)."""
    for proc in procs:
        try:
            proc.nice(nice)
        except psutil.Error:
            continue  # gone, or not ours to lower
        try:
            with open(f"/proc/{proc.pid}/autogroup", "w") as group:
                group.write(str(nice))
        except OSError:
            pass  # no autogroup here (or not permitted): the processes' own nice is what counts


class Cores:
    """The CPU seconds spent so far by the server's process tree, the heavy student's browser and the busy loops:
    two readings a phase apart, divided by the seconds between, are the cores each used meanwhile. A process that
    ended keeps its last reading (the browser closes its tabs' processes when they are done)."""

    def __init__(self, server_pid: int) -> None:
        self.server = psutil.Process(server_pid)
        self.busy: list[int] = []  # BusyCores' processes while they run
        self._seen: dict[tuple[str, int], float] = {}  # (group, pid) → its CPU seconds when last read

    def _add(self, group: str, procs: list[psutil.Process]) -> None:
        for proc in procs:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            self._seen[group, proc.pid] = times.user + times.system

    def read(self) -> tuple[float, float, float, float]:
        """(now, the server's, the browser's, the busy loops' CPU seconds)."""
        self._add("server", [self.server, *self.server.children(recursive=True)])
        self._add("browser", browser_processes())
        busy = []
        for pid in self.busy:
            try:
                busy.append(psutil.Process(pid))
            except psutil.Error:
                continue  # ended: its last reading stands
        self._add("busy", busy)
        total = dict.fromkeys(("server", "browser", "busy"), 0.0)
        for (group, _), seconds in self._seen.items():
            total[group] += seconds
        return time.perf_counter(), total["server"], total["browser"], total["busy"]

    @staticmethod
    def since(before: tuple[float, ...], after: tuple[float, ...]) -> str:
        """The cores each used between two readings: server / browser / busy loops."""
        wall = max(1e-9, after[0] - before[0])
        return " / ".join(f"{(b - a) / wall:.2f}" for a, b in zip(before[1:], after[1:]))


def phase(url: str, model: str, sessions: int, k: int, seed: int) -> list[float]:
    """N sessions open a link and type K sentences each; every page's time (first pages and typed)."""
    texts = everyday_sentences(sessions * k + 1, seed)
    link = Link(texts.pop())
    groups = [texts[i * k : (i + 1) * k] for i in range(sessions)]
    _, times, _ = asyncio.run(run_sessions(url, model, groups, link))
    return [*link.times, *times]


class BusyCores:
    """Other work: `loops` busy-loop processes (one a core by default) at the default priority (`nice -n 0`), as
    another program on the machine would be; stopped on leaving. `apart`: each in a session of its own, as separate
    programs are (Linux's autogroup weighs each session as one: beside N of them the server gets 1/(N + 1) of the
    machine, where loops of one session, the bench's, weigh together as one program). `cores`: where their CPU is
    counted."""

    def __init__(self, cores: Cores | None = None, loops: int = 0, apart: bool = False) -> None:
        self.cores, self.loops, self.apart = cores, loops or os.cpu_count() or 1, apart

    def __enter__(self) -> BusyCores:
        loop = ["nice", "-n", "0", sys.executable, "-c", "while True: pass"]
        self.procs = [subprocess.Popen(loop, start_new_session=self.apart) for _ in range(self.loops)]
        if self.cores is not None:
            self.cores.busy = [proc.pid for proc in self.procs]
        time.sleep(1)  # they are running before the phase starts
        return self

    def __exit__(self, *exc) -> None:
        if self.cores is not None:
            self.cores.busy = []  # read no more: their numbers may go to other processes
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait(10)


class LiveClass:
    """A teacher's session that started a class and F followers of it, kept open across the phases."""

    def __init__(self, url: str, model: str, followers: int) -> None:
        self.url, self.model, self.count = url, model, followers
        self.changes = 0

    async def open(self) -> None:
        self.teacher = Client(self.url, f"model={quote(self.model)}")
        await self.teacher.open()
        await self.teacher.send(("class_start", "trigger_value", True))
        await self.teacher.wait_finished()
        code = self.teacher.address["class"][0]
        self.followers = [Client(self.url, f"class={code}") for _ in range(self.count)]
        for follower in self.followers:  # one after another, as a class arrives
            await follower.open()
        self.stop = asyncio.Event()
        self.polls = [asyncio.create_task(f.poll(self.stop)) for f in self.followers]

    async def phase(self, changes: int, every: float) -> tuple[list[float], list[float], int]:
        """The teacher types `changes` new texts, one each `every` s: (the teacher's page times, the follows,
        how many follows did not arrive)."""
        pages, follows, missed = [], [], 0
        for _ in range(changes):
            self.changes += 1
            text = f"The class reads sentence number {self.changes} of the teacher's."  # new: no cache hit
            waits = [asyncio.create_task(f.text_is(text)) for f in self.followers]
            sent = time.perf_counter()
            await self.teacher.send(("text", "string_value", text))
            await self.teacher.wait_finished()
            pages.append(time.perf_counter() - sent)
            arrived = await asyncio.gather(*waits)
            follows += [t - sent for t in arrived if t is not None]
            missed += sum(t is None for t in arrived)
            await asyncio.sleep(max(0.0, every - (time.perf_counter() - sent)))
        return pages, follows, missed

    async def close(self) -> None:
        self.stop.set()
        await asyncio.gather(*self.polls)
        for client in (self.teacher, *self.followers):
            await client.close()


def within(beside: float, alone: float) -> str:
    """Beside / alone at p95, and whether it meets the class's target."""
    ok = beside <= CLASS_RATIO * alone or beside - alone <= CLASS_SLACK_S
    return f"×{beside / alone:.2f}, {beside - alone:+.2f} s ({'meets' if ok else 'MISSES'} the target)"


def class_report(rows: dict[str, tuple[list[float], list[float], int, str]], followers: int) -> list[str]:
    """The class's table: a row a phase, then beside / alone at p95 with and without the busy cores."""
    lines = [
        f"## The class beside the heavy student: a teacher and {followers} followers",
        "| phase | teacher's page p50 / p95 | follow p50 / p95 | missed | load average (uptime); heavy tabs | cores: "
        "server / browser / busy loops |",
        "|---|---|---|---|---|---|",
    ]
    p95 = {}
    for name, (pages, follows, missed, load, cores) in rows.items():
        p95[name] = common.percentile(pages, 95), common.percentile(follows, 95)
        lines.append(
            f"| {name} | {common.percentile(pages, 50):.2f} / {p95[name][0]:.2f} s | "
            f"{common.percentile(follows, 50):.2f} / {p95[name][1]:.2f} s | {missed} | {load} | {cores} |"
        )
    for cores in ("", " + busy cores"):
        if f"alone again{cores}" in rows:  # alone before and after the heavy tabs: their pages together
            before, after = rows[f"alone{cores}"], rows[f"alone again{cores}"]
            p95[f"alone{cores}"] = (
                common.percentile(before[0] + after[0], 95),
                common.percentile(before[1] + after[1], 95),
            )
        alone, beside = p95[f"alone{cores}"], p95[f"beside heavy{cores}"]
        lines.append(
            f"beside / alone{cores or ' (the machine as it is)'}: teacher's page p95 {within(beside[0], alone[0])}; "
            f"follow p95 {within(beside[1], alone[1])}"
        )
    return lines


async def measure_class(
    url: str, args: argparse.Namespace, heavy: Heavy, again: bool, cores: Cores
) -> dict[str, tuple]:
    """The class's four phases: alone, alone with busy cores, then (the heavy tabs running) beside them with busy
    cores and as the machine is; `again`: then the heavy tabs stopped and both alone phases again, so that the load
    of the machine's other work, which drifts, weighs on alone as on beside."""
    room = LiveClass(url, args.model, args.followers)
    await room.open()
    rows = {}

    async def measured(name: str) -> None:
        before = await asyncio.to_thread(cores.read)
        pages, follows, missed = await room.phase(args.changes, args.every)
        used = Cores.since(before, await asyncio.to_thread(cores.read))
        working = f"; heavy tabs working: {3 - len(heavy.times)} of 3" if heavy.is_alive() else ""
        rows[name] = pages, follows, missed, common.load_average(uptime()) + working, used
        print(
            f"class {name}: teacher p95 {common.percentile(pages, 95):.2f} s, follow p95 "
            f"{common.percentile(follows, 95):.2f} s; the teacher's pages {' '.join(f'{t:.2f}' for t in pages)}",
            flush=True,
        )

    try:
        await room.phase(1, args.every)  # untimed: the server's first page of a new text is not the class's
        await measured("alone")
        with BusyCores(cores, args.busy, args.busy_apart):
            await measured("alone + busy cores")
        heavy.start()
        await asyncio.to_thread(heavy.running.wait)
        with BusyCores(cores, args.busy, args.busy_apart):
            await measured("beside heavy + busy cores")
        await measured("beside heavy")
        if again:
            heavy.stop.set()
            await asyncio.to_thread(heavy.done.wait)
            await measured("alone again")
            with BusyCores(cores, args.busy, args.busy_apart):
                await measured("alone again + busy cores")
    finally:
        await room.close()
    names = ["alone", "beside heavy", "alone + busy cores", "beside heavy + busy cores"]
    return {name: rows[name] for name in names + (["alone again", "alone again + busy cores"] if again else [])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=20)
    p.add_argument("--sentences", type=int, default=3, help="sentences each student types")
    p.add_argument("--model", default="lm-english")
    p.add_argument("--lines", type=int, default=20, help="the detector's lines in the heavy tab's link")
    p.add_argument("--tokens", type=int, default=256, help="tokens of the heavy tabs' texts")
    p.add_argument("--followers", type=int, default=15, help="the class's followers (0: no class measured)")
    p.add_argument("--changes", type=int, default=5, help="the teacher's new texts a class phase")
    p.add_argument("--every", type=float, default=3.0, help="seconds between the teacher's new texts")
    p.add_argument("--busy", type=int, default=0, help="busy loops in the busy phases (default: one a core)")
    p.add_argument("--busy-apart", action="store_true", help="each busy loop in a session of its own")
    p.add_argument(
        "--browser-nice", type=int, default=0, help="the heavy student's browser's nice (and its session's group's)"
    )
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
            heavy = Heavy(base, args.model, first, second, lines, args.browser_nice)
            alone = phase(url, args.model, args.sessions, args.sentences, seed=1) if args.sessions else []
            if args.followers:
                rows = asyncio.run(measure_class(url, args, heavy, again=not args.sessions, cores=Cores(proc.pid)))
            else:
                heavy.start()
            heavy.running.wait()
            if not args.sessions:
                heavy.stop.set()
                heavy.done.wait()
                stop_server(proc)
                print(f"# Fairness: the class beside a heavy student, {args.model}; {common.machine_line()}")
                apart = "each in a session of its own" if args.busy_apart else "in the bench's session"
                print(
                    f"busy phases: {args.busy or os.cpu_count()} busy loops, {apart}; the heavy student's browser at"
                    f" nice {args.browser_nice}"
                )
                print(
                    f"load average before: {common.load_average(load_before)}; after: {common.load_average(uptime())}"
                )
                print("\n".join(class_report(rows, args.followers)))
                for name, value in heavy.times.items():
                    print(f"heavy tab {name}: {f'{value:.1f} s' if isinstance(value, float) else value}")
                if "browser" in heavy.times:
                    print("the heavy tabs failed: the beside phases measured no heavy work")
                    return 1
                return 0
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
    if args.followers:
        print("\n".join(class_report(rows, args.followers)))
    return 0 if b95 <= TARGET_RATIO * a95 and all(isinstance(v, float) for v in heavy.times.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
