"""A live class: N followers over the websocket while the teacher changes the view, and what idle followers cost.

Starts the server as the README does (bench/classroom.py's `serve`) and talks Streamlit's protocol as a browser
does (BackMsg / ForwardMsg over `/_stcore/stream`):
  1. the teacher opens the app and presses "Start a class" (a trigger on the button's widget id); the class code
     comes back in the address (`page_info_changed`);
  2. N followers open `?class=CODE`; the server reruns each when the class moves (live/push.py). Were a page to
     declare a timer (an `auto_rerun` message), a follower would ask that fragment's rerun every interval, as a
     browser does (`rerun_script` with `fragment_id`);
  3. idle: for --idle seconds nobody changes anything, and the server processes' CPU time is read from /proc
     before and after: what N idle followers cost (and the same window with no follower, for the baseline);
  4. the teacher types a new text (the sidebar's text area, what Ctrl+Enter sends) every --every seconds,
     --changes times. Each follower also holds its page's class stream open, as its component does
     (`/_atlas/class-stream?class=CODE`, server-sent events over HTTP/1.1, ui/class_stream.py): a follower has
     followed when the pushed message holding the new text and the teacher's drawn figures arrives there
     (what the student sees first), and its page's rerun is over when its address holds the new text (the rest
     of the page). Follow latency: from the teacher's send to that moment, p50 / p95 / max over all followers
     and changes, for each.

    python bench/class_follow.py [--followers 30] [--changes 5] [--every 3] [--idle 10] [--model lm-english]
    python bench/class_follow.py --replicas 2   # two servers sharing a redis-server (ATLAS_CLASS_STORE): the teacher
                                               # on the first, the followers alternating between them
                                               # (the view is pushed by the teacher's server: a follower on
                                               # the other follows by its page's rerun, and that is its follow)
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

import websockets
from browser import stop_server
from classroom import serve
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

ROOT = Path(__file__).resolve().parents[1]
TARGET_P95_S = 1.5
TIMEOUT_S = 120
FOLLOW_TIMEOUT_S = 30  # a follow slower than this is counted as missed


class Stream:
    """A follower page's class stream, read as its browser does: HTTP/1.1, chunked, one `data:` line an event."""

    def __init__(self, follower: Client, code: str) -> None:
        self.follower = follower
        where = urlparse(follower.url)
        self.host, self.port, self.code = where.hostname, where.port, code
        self.raw, self.arrived = b"", 0.0  # the latest event's data and when its last byte was read
        self.sizes: list[int] = []
        self.changed = asyncio.Condition()

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.write(
            f"GET /_atlas/class-stream?class={self.code} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        status = await self.reader.readline()
        if b" 200 " not in status:
            raise SystemExit(f"the class stream answered {status.decode().strip()}")
        while (await self.reader.readline()) not in (b"\r\n", b""):  # the headers
            pass
        self.task = asyncio.create_task(self.read())

    async def read(self) -> None:
        buffer = b""
        while True:
            size = await self.reader.readline()
            if not size:
                return
            chunk = await self.reader.readexactly(int(size.strip(), 16) + 2)
            buffer += chunk[:-2]
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                if event.startswith(b"data: "):  # stamped as it arrives, parsed when looked at
                    self.raw, self.arrived = event[len(b"data: ") :], time.perf_counter()
                    self.sizes.append(len(event))
                    async with self.changed:
                        self.changed.notify_all()

    @property
    def message(self) -> dict:
        return json.loads(self.raw) if self.raw else {}

    async def text_is(self, text: str) -> float | None:
        """When a message holding `text` and figures arrived; None when none did within FOLLOW_TIMEOUT_S."""

        def holds() -> bool:
            message = self.message
            return message.get("text") == text and bool(message["figures"])

        try:
            async with self.changed:
                await asyncio.wait_for(self.changed.wait_for(holds), FOLLOW_TIMEOUT_S)
        except TimeoutError:
            return None
        return self.arrived

    async def close(self) -> None:
        self.writer.close()
        self.task.cancel()


class Client:
    """One browser session: its websocket, the page it is on, the widget ids it learned, its address."""

    def __init__(self, url: str, query: str) -> None:
        self.url, self.query = url, query
        self.page_hash = ""
        self.ids: dict[str, str] = {}  # widget key → id
        self.fragment = ""  # the auto-rerun fragment's id
        self.interval = 1.0
        self.address: dict[str, list[str]] = {}
        self.finished = asyncio.Event()
        self.changed = asyncio.Condition()

    async def open(self) -> None:
        self.ws = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=None, ping_interval=None)
        self.reader = asyncio.create_task(self.read())
        await self.send()
        await self.wait_finished()

    async def send(self, widget: tuple[str, str, object] | None = None, fragment: bool = False) -> None:
        msg = BackMsg()
        rerun = msg.rerun_script
        rerun.query_string = self.query
        if self.page_hash:
            rerun.page_script_hash = self.page_hash
        if widget is not None:
            key, kind, value = widget
            state = rerun.widget_states.widgets.add()
            state.id = self.ids[key]
            setattr(state, kind, value)
        if fragment:
            rerun.fragment_id, rerun.is_auto_rerun = self.fragment, True
        rerun.context_info.timezone, rerun.context_info.locale = "UTC", "en-US"
        self.finished.clear()
        await self.ws.send(msg.SerializeToString())

    async def wait_finished(self) -> None:
        await asyncio.wait_for(self.finished.wait(), TIMEOUT_S)

    async def read(self) -> None:
        while True:
            fwd = ForwardMsg()
            try:
                fwd.ParseFromString(await self.ws.recv())
            except websockets.ConnectionClosed:
                return
            kind = fwd.WhichOneof("type")
            if kind == "script_finished":
                self.finished.set()
            elif kind == "new_session":
                self.page_hash = fwd.new_session.page_script_hash
            elif kind == "page_info_changed":
                self.query = fwd.page_info_changed.query_string
                self.address = parse_qs(self.query)
                async with self.changed:
                    self.changed.notify_all()
            elif kind == "auto_rerun":
                self.fragment, self.interval = fwd.auto_rerun.fragment_id, fwd.auto_rerun.interval
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                element = fwd.delta.new_element
                what = element.WhichOneof("type")
                if what in ("button", "text_area"):
                    found = getattr(element, what)
                    self.ids[found.id.rsplit("-", 1)[-1]] = found.id

    async def poll(self, stop: asyncio.Event) -> None:
        """The browser's timer: the fragment's rerun every interval."""
        while not stop.is_set():
            if self.fragment:
                await self.send(fragment=True)
            await asyncio.sleep(self.interval)

    async def text_is(self, text: str) -> float | None:
        """When this page's address came to hold `text`; None when it did not within FOLLOW_TIMEOUT_S."""
        try:
            async with self.changed:
                await asyncio.wait_for(
                    self.changed.wait_for(lambda: self.address.get("text") == [text]), FOLLOW_TIMEOUT_S
                )
        except TimeoutError:
            return None
        return time.perf_counter()

    async def close(self) -> None:
        await self.ws.close()
        self.reader.cancel()


def _labels(message: dict) -> str:
    """The pieces labelling a pushed message's heatmaps' keys (`12:▁cat`: viz.labels.token_labels), joined."""
    pieces = []
    for _, spec in message.get("figures") or ():
        for trace in spec.get("data", ()):
            if trace.get("type") == "heatmap" and isinstance(trace.get("x"), list):
                pieces.append(html.unescape("".join(str(label).split(":", 1)[-1] for label in trace["x"])))
    return " ".join(pieces)


def _alnum(text: str) -> str:
    return "".join(c for c in text if c.isalnum())


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` and its threads, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle_cpu(pids: list[int], seconds: float) -> float:
    """The servers' CPU over `seconds`, as a share of one core."""
    before, start = sum(map(cpu_seconds, pids)), time.perf_counter()
    await asyncio.sleep(seconds)
    return (sum(map(cpu_seconds, pids)) - before) / (time.perf_counter() - start)


def start_redis(folder: Path) -> tuple[subprocess.Popen, str]:
    """A redis-server on a Unix socket in `folder`, as deploy/run-replicas.sh starts one: its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("--replicas needs redis-server (apt-get install redis-server)")
    socket = folder / "redis.sock"
    proc = subprocess.Popen(
        [binary, "--port", "0", "--unixsocket", str(socket), "--save", "", "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while not socket.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("redis-server did not start")
        time.sleep(0.05)
    return proc, f"unix://{socket}"


async def run(urls: list[str], pids: list[int], args: argparse.Namespace) -> dict:
    baseline = await idle_cpu(pids, args.idle)
    teacher = Client(urls[0], f"model={quote(args.model)}")
    await teacher.open()
    await teacher.send(("class_start", "trigger_value", True))
    await teacher.wait_finished()
    code = teacher.address["class"][0]
    followers = [Client(urls[i % len(urls)], f"class={code}") for i in range(args.followers)]
    # The teacher's server pushes the view (its Channel is in its process); a follower on another replica follows by
    # its page's rerun alone, and that is its follow.
    streams = [Stream(follower, code) for follower in followers if follower.url == urls[0]]
    opened = time.perf_counter()
    for follower in followers:  # one after another, as a class arrives
        await follower.open()
        for stream in streams:
            if stream.follower is follower:
                await stream.open()
    opened = time.perf_counter() - opened
    stop = asyncio.Event()
    polls = [asyncio.create_task(f.poll(stop)) for f in followers]
    await asyncio.sleep(2)  # every timer started
    idle = await idle_cpu(pids, args.idle)
    latencies: list[float] = []  # the pushed view
    reruns: list[float] = []  # the page's rerun
    missed = rerun_missed = 0
    figures_hold_text = True
    teacher_runs: list[float] = []  # the teacher's own run: the new text analysed, drawn and published
    for change in range(args.changes):
        text = f"The class reads sentence number {change + 1} of the teacher's."
        pushed = [asyncio.create_task(s.text_is(text)) for s in streams]
        waits = [asyncio.create_task(f.text_is(text)) for f in followers]
        sent = time.perf_counter()
        await teacher.send(("text", "string_value", text))
        await teacher.wait_finished()
        teacher_runs.append(time.perf_counter() - sent)
        arrived = await asyncio.gather(*pushed)
        latencies += [t - sent for t in arrived if t is not None]
        missed += sum(t is None for t in arrived)
        # The figures are the new text's: its pieces are the head chart's axis labels (not only the message's text)
        figures_hold_text &= all(
            _alnum(text) in _alnum(_labels(s.message)) for s in streams if s.message["text"] == text
        )
        ran = await asyncio.gather(*waits)
        reruns += [t - sent for t in ran if t is not None]
        rerun_missed += sum(t is None for t in ran)
        pushed_to = {id(stream.follower) for stream in streams}
        elsewhere = [t for f, t in zip(followers, ran, strict=True) if id(f) not in pushed_to]
        latencies += [t - sent for t in elsewhere if t is not None]
        missed += sum(t is None for t in elsewhere)
        await asyncio.sleep(max(0.0, args.every - (time.perf_counter() - sent)))
    stop.set()
    await asyncio.gather(*polls)
    for client in (teacher, *followers, *streams):
        await client.close()
    return {
        "baseline": baseline,
        "idle": idle,
        "latencies": latencies,
        "reruns": reruns,
        "rerun_missed": rerun_missed,
        "figures_hold_text": figures_hold_text,
        "sizes": [size for stream in streams for size in stream.sizes],
        "teacher": teacher_runs,
        "missed": missed,
        "opened": opened,
        "code": code,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--followers", type=int, default=30)
    parser.add_argument("--changes", type=int, default=5)
    parser.add_argument("--every", type=float, default=3.0, help="seconds between the teacher's changes")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of the idle window")
    parser.add_argument("--model", default="lm-english")
    parser.add_argument("--checkpoints", type=Path, default=ROOT / "checkpoints")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--replicas", type=int, default=1, help="servers sharing one redis-server (1: no Redis)")
    args = parser.parse_args(argv)
    servers, redis = [], None
    with tempfile.TemporaryDirectory() as folder:
        try:
            if args.replicas > 1:
                redis, os.environ["ATLAS_CLASS_STORE"] = start_redis(Path(folder))
            for _ in range(args.replicas):
                servers.append(serve(args.checkpoints / args.model, args.threads))
            found = asyncio.run(run([url for _, url in servers], [proc.pid for proc, _ in servers], args))
        finally:
            for proc, _ in servers:
                stop_server(proc)
            if redis is not None:
                redis.terminate()
                redis.wait(10)
    latencies, reruns = sorted(found["latencies"]), sorted(found["reruns"])
    p95 = percentile(latencies, 0.95)
    where = f", {args.replicas} replicas sharing a redis-server" if args.replicas > 1 else ""
    print(f"class {found['code']}: {args.followers} followers, {args.changes} changes every {args.every:g} s{where}")
    if found["missed"] or found["rerun_missed"]:
        print(
            f"  MISSED: {found['missed']} pushed views and {found['rerun_missed']} page reruns did not arrive within "
            f"{FOLLOW_TIMEOUT_S} s"
        )
    if not found["figures_hold_text"]:
        print("  WRONG: a pushed message's figures did not hold the new text")
    print(f"  followers' first pages and streams, one after another: {found['opened']:.1f} s")
    if found["sizes"]:
        print(f"  a pushed message: {statistics.median(found['sizes']) / 1000:.0f} kB (median)")
    print(
        f"  follow latency (teacher's send → the pushed view with the new text's figures at the follower), "
        f"{len(latencies)} of {args.followers * args.changes}: {spread(latencies)} "
        f"(target p95 ≤ {TARGET_P95_S} s: {'met' if latencies and p95 <= TARGET_P95_S else 'NOT met'})"
    )
    print(
        f"  page rerun latency (teacher's send → the follower's page run over, its address holding the text), "
        f"{len(reruns)} of {args.followers * args.changes}: {spread(reruns)}"
    )
    print(
        f"  the teacher's own run (the new text analysed, drawn, published): p50"
        f" {statistics.median(found['teacher']):.2f} s"
    )
    print(
        f"  server CPU, idle: {found['baseline']:.1%} of a core with no session, {found['idle']:.1%} with "
        f"{args.followers} idle followers ({found['idle'] / max(args.followers, 1):.2%} each)"
    )
    print(f"  cores: {os.cpu_count()}, load average now: {os.getloadavg()[0]:.1f}")


def percentile(values: list[float], share: float) -> float:
    return values[min(len(values) - 1, int(share * len(values)))] if values else float("nan")


def spread(values: list[float]) -> str:
    """p50 / p95 / max of sorted `values`."""
    if not values:
        return "none"
    return f"p50 {statistics.median(values):.2f} s, p95 {percentile(values, 0.95):.2f} s, max {values[-1]:.2f} s"


if __name__ == "__main__":
    main()
