"""A classroom at once: N real sessions against the server the README starts, each typing K sentences.

Starts the server itself (headless, on a free port; stopped at the end) and talks to it the way the browser does:
a websocket to `/_stcore/stream` speaking Streamlit's own protocol (`streamlit.proto` BackMsg / ForwardMsg).
Each session
  1. opens the teacher's link: connects and sends the browser's first `rerun_script` with the link's query string
     (`model=NAME&text=…`, no widget states), then reads the page until `script_finished`; the `text_area`
     element of that page gives the Text widget's id. All N open it at the same moment, and the time from the
     connection to `script_finished` is the first page's time (the HTML and JavaScript a browser fetches before
     it connects are static files, not timed here);
  2. for each of its K sentences sends a `rerun_script` with the Text widget's new value (what Ctrl+Enter in the
     sidebar sends) and times it until that rerun's `script_finished`, which comes after the deltas carrying
     both Plotly charts (the one-head heatmap and the all-heads grid) and the predictions.
All N sessions start together and submit their next sentence as soon as the page is back (no think time): the
worst moment of a class, everyone pressing Ctrl+Enter at once.

Equality check: the same sentences are then typed one after another by one session against a *fresh* server (so
neither run reads the other's cache), and for every sentence what the page received must be equal: the model
output (`st.code`), the tables' Arrow bytes, and a hash of both charts' `data` (the heatmaps' z values).

    python bench/classroom.py [--sessions 30] [--sentences 5] [--model reverse|translate-en-de|lm-english|all]
                              [--checkpoints DIR] [--tiny] [--threads N] [--out FILE.md] [--cold] [--replicas N]

`--replicas N`: the class goes to the deployment deploy/README.md gives a class (deploy/run-replicas.sh N: N
`atlas app` replicas behind haproxy, a redis-server holding the classes, all under supervisord, the replicas not
niced here so that they compete with the sessions as one server does), each session through the proxy; the one at
a time run is still one `atlas app`. One Streamlit server runs its pages under one interpreter lock, so one server
uses about one core whatever the machine has; the replicas are how a class uses the others.
Sentences differ between sessions: everyday English sentences drawn seeded from templates, and for a model of
the reversal task lower-case strings over a–p (its training alphabet, see its card.json).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import common
import numpy as np
import pyarrow as pa
import websockets
from browser import LOG, STARTUP_S, stop_server
from common import same_text, same_texts
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

STEP_TIMEOUT_S = 600
TARGET_P95_S = 2.0

SUBJECTS = (
    "The cat",
    "My sister",
    "The teacher",
    "Our neighbour",
    "A small dog",
    "The old man",
    "My friend",
    "The children",
    "Her brother",
    "The doctor",
    "We",
    "They",
    "I",
    "You",
    "The farmer",
    "My mother",
)
VERBS = (
    "reads a book",
    "drinks a cup of coffee",
    "walks to the station",
    "cooks dinner",
    "plays with a red ball",
    "writes a letter",
    "waits for the bus",
    "opens the window",
    "buys fresh bread",
    "looks at the birds",
    "sings a song",
    "cleans the kitchen",
    "visits the museum",
    "eats an apple",
    "sleeps on the sofa",
)
WHERE = (
    "in the garden",
    "at home",
    "in the park",
    "near the river",
    "in the city",
    "at school",
    "by the sea",
    "in the kitchen",
    "on the train",
    "at the market",
)
WHEN = (
    "every evening",
    "in the morning",
    "on Sunday",
    "after work",
    "before dinner",
    "today",
    "tomorrow",
    "in the summer",
    "at night",
    "every day",
)
PLURAL = {"We", "They", "I", "You", "The children"}


def everyday_sentences(count: int, seed: int) -> list[str]:
    """`count` distinct everyday English sentences, drawn seeded from the templates above."""
    rng, out = random.Random(seed), []
    while len(out) < count:
        subject, verb = rng.choice(SUBJECTS), rng.choice(VERBS)
        if subject in PLURAL:  # "reads" -> "read", "watches" -> "watch"
            head, _, rest = verb.partition(" ")
            verb = (head[:-2] if head.endswith("es") and head[-3] in "hs" else head[:-1]) + " " + rest
        s = f"{subject} {verb} {rng.choice(WHERE)} {rng.choice(WHEN)}."
        if s not in out:
            out.append(s)
    return out


def letter_strings(count: int, seed: int) -> list[str]:
    """`count` distinct strings over a–p, 4 to 20 letters: what the reversal model was trained on."""
    rng, out = random.Random(seed), []
    while len(out) < count:
        s = "".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(4, 20)))
        if s not in out:
            out.append(s)
    return out


def sentences_for(ckpt_dir: Path, count: int, seed: int = 0) -> list[str]:
    card = json.loads((ckpt_dir / "card.json").read_text()) if (ckpt_dir / "card.json").exists() else {}
    data = card.get("data") if isinstance(card, dict) else None
    is_reverse = ckpt_dir.name == "reverse" or (isinstance(data, dict) and data.get("task") == "reverse")
    if is_reverse:
        return letter_strings(count, seed)
    sentences = everyday_sentences(count, seed)
    if common.load_checkpoint(ckpt_dir).config.switches.sum_outputs:
        return [with_blank(s) for s in sentences]
    return sentences


def with_blank(text: str) -> str:
    """`text` with its middle word a blank `___`: what a centre-word model guesses, from the words around it."""
    words = text.split()
    words[len(words) // 2] = "___"
    return " ".join(words)


# ---------------------------------------------------------------------------------------------------------------
# one session over Streamlit's websocket protocol


@dataclass
class Page:
    """What one script run sent: the Text widget's id, and the parts a reader compares (see `fingerprint`)."""

    text_id: str = ""
    page_hash: str = ""
    query: str = ""
    output: list[str] = field(default_factory=list)
    tables: list[bytes] = field(default_factory=list)
    charts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    spinners: list[str] = field(default_factory=list)  # what the page said it was waiting for ("Loading the model…")

    def fingerprint(self) -> tuple:
        """(texts, numbers): every string the page shows (model output, table cells, chart labels) and every
        number of its tables and charts, in order. `same_page` compares the texts exactly and the numbers
        within NUMBER_TOLERANCE: a batch of padded inputs gives the same tokens and labels as one input alone
        but may differ in the last float bits of weights and probabilities."""
        texts: list[str] = list(self.output)
        numbers: list[float] = []
        steps: list[float] = []  # uint8-quantised chart data (the all-heads grid): compared to one step
        for table in self.tables:
            frame = pa.ipc.open_stream(table).read_all().to_pandas() if table else None
            if frame is None:
                continue
            for column in frame.columns:
                values = frame[column].tolist()
                if frame[column].dtype.kind in "fiub":
                    numbers += [float(v) for v in values]
                else:
                    texts += [str(column), *map(str, values)]
        for chart in self.charts:
            flatten(json.loads(chart).get("data"), texts, numbers, steps)
        return tuple(texts), np.asarray(numbers, dtype=np.float64), np.asarray(steps, dtype=np.float64)


NUMBER_TOLERANCE = 1e-4


def describe(a: tuple | None, b: tuple | None) -> str:
    """Where two fingerprints differ, in a few words."""
    if a is None or b is None:
        return "one run has no page"
    if not same_texts(a[0], b[0]):
        diff = [(x, y) for x, y in zip(a[0], b[0]) if not same_text(x, y)][:2]
        return f"texts differ ({len(a[0])} vs {len(b[0])}): {diff}"
    for part, name in ((1, "numbers"), (2, "uint8 steps")):
        if a[part].shape != b[part].shape:
            return f"{name}: {a[part].shape} vs {b[part].shape}"
        if a[part].size and np.abs(a[part] - b[part]).max() > (NUMBER_TOLERANCE if part == 1 else 1):
            return f"{name}: max difference {np.abs(a[part] - b[part]).max():.3g}"
    return "equal"


def flatten(value, texts: list[str], numbers: list[float], steps: list[float]) -> None:
    """Strings and numbers of a figure's JSON in order; Plotly typed arrays {"dtype", "bdata"} decoded."""
    if isinstance(value, dict) and "bdata" in value and "dtype" in value:
        raw = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        (steps if raw.dtype == np.uint8 else numbers).extend(raw.astype(float).tolist())
    elif isinstance(value, dict):
        for key in sorted(value):
            flatten(value[key], texts, numbers, steps)
    elif isinstance(value, list):
        for item in value:
            flatten(item, texts, numbers, steps)
    elif isinstance(value, bool) or value is None:
        texts.append(str(value))
    elif isinstance(value, int | float):
        numbers.append(float(value))
    else:
        texts.append(str(value))


def same_page(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None:
        return False
    if not same_texts(a[0], b[0]) or a[1].shape != b[1].shape or a[2].shape != b[2].shape:
        return False
    return bool(np.allclose(a[1], b[1], atol=NUMBER_TOLERANCE, rtol=0) and np.all(np.abs(a[2] - b[2]) <= 1))


class Session:
    def __init__(self, url: str, model: str, link_text: str | None = None) -> None:
        self.url, self.model = url, model
        self.ws = None
        self.text_id = self.page_hash = ""
        self.query = f"model={quote(model)}" + (f"&text={quote(link_text)}" if link_text else "")

    async def open(self) -> Page:
        self.ws = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=None, ping_interval=None)
        return await self.rerun(None)

    async def rerun(self, text: str | None) -> Page:
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query
        if self.page_hash:
            state.page_script_hash = self.page_hash
        if text is not None:
            widget = state.widget_states.widgets.add()
            widget.id, widget.string_value = self.text_id, text
        state.context_info.timezone, state.context_info.locale = "UTC", "en-US"
        await self.ws.send(msg.SerializeToString())
        page = await self.read_until_finished()
        self.text_id = page.text_id or self.text_id
        self.page_hash = page.page_hash or self.page_hash
        self.query = page.query or self.query
        return page

    async def read_until_finished(self) -> Page:
        page = Page()
        while True:
            fwd = ForwardMsg()
            fwd.ParseFromString(await asyncio.wait_for(self.ws.recv(), STEP_TIMEOUT_S))
            kind = fwd.WhichOneof("type")
            if kind == "script_finished":
                return page
            if kind == "new_session":
                page.page_hash = fwd.new_session.page_script_hash
            elif kind == "page_info_changed":
                page.query = fwd.page_info_changed.query_string
            elif kind == "session_event" and fwd.session_event.WhichOneof("type") == "script_compilation_exception":
                page.errors.append(str(fwd.session_event))
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                collect(page, fwd.delta.new_element)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


def collect(page: Page, el) -> None:
    what = el.WhichOneof("type")
    if what == "text_area" and el.text_area.id.endswith("-text"):
        page.text_id = el.text_area.id
    elif what == "code":
        page.output.append(el.code.code_text)
    elif what in ("dataframe", "arrow_data_frame") and getattr(el, what).id.split("-")[-1] != "card_metrics":
        data = getattr(el, what).arrow_data  # the Arrow table's bytes (a message holding them in newer protos)
        page.tables.append(data if isinstance(data, bytes) else data.data)
    elif what == "plotly_chart":
        page.charts.append(el.plotly_chart.spec)
    elif what == "spinner":
        page.spinners.append(el.spinner.text)
    elif what == "exception":
        page.errors.append(f"{el.exception.type}: {el.exception.message}")
    elif what == "alert" and el.alert.format == 1:  # ERROR
        page.errors.append(el.alert.body)


async def one_session(
    url: str, model: str, texts: list[str], results: dict, times: list, ready: asyncio.Barrier, link: Link
):
    session = Session(url, model, link.text)
    try:
        t0 = time.perf_counter()
        first = await session.open()
        link.times.append(time.perf_counter() - t0)
        if not session.text_id:
            raise RuntimeError("the page has no Text widget (text_area with key 'text')")
        if first.errors or len(first.charts) < 2:
            raise RuntimeError(f"the link's page: {len(first.charts)} charts, errors {first.errors}")
        await ready.wait()  # every page is open: the class starts typing together
        for text in texts:
            t0 = time.perf_counter()
            page = await session.rerun(text)
            times.append(time.perf_counter() - t0)
            if page.errors or len(page.charts) < 2:
                raise RuntimeError(f"{text!r}: {len(page.charts)} charts, errors {page.errors}")
            results[text] = page  # fingerprinted after the run: the client's parsing must not delay other sessions
    finally:
        await session.close()


@dataclass
class Link:
    """The teacher's link every session opens first (its text in the query string), and each first page's time."""

    text: str | None = None
    times: list[float] = field(default_factory=list)


async def run_sessions(
    url: str, model: str, groups: list[list[str]], link: Link | None = None, cpu: CpuClock | None = None
) -> tuple[dict, list[float], float]:
    """Every group of sentences in its own session, all opening `link` at once, then typing; the typed
    sentences' times and the wall time from the first typed sentence to the last (`cpu`, when given, is started
    and stopped with that wall time)."""
    results, times = {}, []
    link = link or Link()
    ready = asyncio.Barrier(len(groups) + 1)
    tasks = [asyncio.create_task(one_session(url, model, g, results, times, ready, link)) for g in groups]
    await asyncio.wait_for(ready.wait(), STEP_TIMEOUT_S)
    t0 = time.perf_counter()
    if cpu is not None:
        cpu.start()
    await asyncio.gather(*tasks)
    if cpu is not None:
        cpu.stop()
    return results, times, time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------------------------
# the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CpuClock:
    """The CPU seconds (user + system) a server's process tree spends between `start` and `stop`: what a page
    costs the machine, which the machine's other load changes far less than the wall time."""

    def __init__(self, pid: int) -> None:
        self.pid, self.seconds = pid, 0.0

    def now(self) -> float:
        import psutil

        total = 0.0
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0.0
        for proc in procs:
            try:
                t = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += t.user + t.system
        return total

    def start(self) -> None:
        self._t0, self._own0 = self.now(), time.process_time()

    def stop(self) -> None:
        self.seconds = self.now() - self._t0
        self.own_seconds = time.process_time() - self._own0  # this script's: the sessions' side (phones, in a class)


class RssSampler:
    """The server's resident memory (its whole process group: streamlit runs as one process), every 0.1 s."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.proc, self.peak, self.stop = psutil.Process(pid), 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def now(self) -> int:
        """The tree's RSS now; a process that ended while it was read counts nothing (the server stopping)."""
        import psutil

        total = 0
        try:
            procs = [self.proc, *self.proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0
        for proc in procs:
            try:
                total += proc.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return total

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            self.peak = max(self.peak, self.now())

    def __enter__(self) -> RssSampler:
        self.peak = self.now()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def serve(ckpt_dir: Path, threads: int, cold: bool = False) -> tuple[subprocess.Popen, str]:
    """The server as the README starts it (`python -m atlas app`: the first page run once before it answers) on a
    free port; the repository's .streamlit/config.toml makes it headless and turns the file watcher off. `cold`:
    plain `streamlit run app.py`, nothing run before the first session."""
    proc, port = spawn(ckpt_dir, threads, cold)
    return proc, wait_healthy(proc, port)


def command(port: int, cold: bool = False) -> list[str]:
    """The README's command on `port` (run in the repository's folder), or with `cold` the bare one."""
    start = ["streamlit", "run", "app.py"] if cold else ["atlas", "app"]
    return [sys.executable, "-m", *start, "--server.port", str(port)]


def spawn(
    ckpt_dir: Path, threads: int, cold: bool = False, prefix: tuple[str, ...] = ()
) -> tuple[subprocess.Popen, int]:
    """Start the server `serve` starts and return at once: (the process, its port). `prefix`: a command it runs
    under (strace)."""
    port = free_port()
    env = {**os.environ, "ATLAS_CHECKPOINTS": str(ckpt_dir.parent)}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    cmd = [*prefix, *command(port, cold)]
    log = open(LOG, "w")  # the server writes it until it ends
    proc = subprocess.Popen(cmd, cwd=common.ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, port


def serve_replicas(ckpt_dir: Path, replicas: int, threads: int) -> tuple[subprocess.Popen, str]:
    """deploy/run-replicas.sh with `replicas` replicas on free ports, its logs in a temporary folder; returns once
    every replica and the proxy answer: (supervisord's process, the proxy's websocket URL)."""
    proxy, stats, base = free_port(), free_port(), _free_run(replicas)
    logdir = Path(tempfile.mkdtemp(prefix="classroom-replicas."))
    env = {**os.environ, "ATLAS_CHECKPOINTS": str(ckpt_dir.parent), "PROXY_PORT": str(proxy),
           "BASE_PORT": str(base), "STATS_PORT": str(stats), "LOGDIR": str(logdir), "NICE": "0",
           "PYTHON": sys.executable}  # fmt: skip
    env.pop("ATLAS_CLASS_STORE", None)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    log = open(LOG, "w")
    proc = subprocess.Popen(["bash", "deploy/run-replicas.sh", str(replicas)], cwd=common.ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    for port in [base + i for i in range(replicas)]:
        wait_healthy(proc, port, stop=stop_replicas)
    return proc, wait_healthy(proc, proxy, stop=stop_replicas)


def _free_run(n: int) -> int:
    """The first of `n` free ports in a row (run-replicas.sh numbers its replicas from BASE_PORT)."""
    for _ in range(100):
        base = free_port()
        if base + n < 65536 and all(_free(base + i) for i in range(n)):
            return base
    raise RuntimeError(f"no {n} free ports in a row")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def stop_replicas(proc: subprocess.Popen) -> None:
    """Stop supervisord (it stops every program, each in its own process group, then exits)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def wait_healthy(proc: subprocess.Popen, port: int, poll_s: float = 0.5, stop=stop_server) -> str:
    """Wait until the spawned server's /_stcore/health answers "ok"; its websocket URL. Stops it on a timeout."""
    deadline = time.time() + STARTUP_S
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}; see {LOG}")
        try:
            if urllib.request.urlopen(f"http://localhost:{port}/_stcore/health", timeout=2).read() == b"ok":
                return f"ws://localhost:{port}/_stcore/stream"
        except OSError:
            time.sleep(poll_s)
    stop(proc)
    raise RuntimeError(f"streamlit did not answer on port {port} within {STARTUP_S} s")


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def measure(ckpt_dir: Path, sessions: int, k: int, threads: int, cold: bool = False, replicas: int = 0) -> list[str]:
    """One model: the class at once on a fresh server (`replicas`: on deploy/run-replicas.sh with that many), then
    the same sentences one by one on another (`cold`: servers started without the warm start)."""
    texts = sentences_for(ckpt_dir, sessions * k + 1, seed=0)
    link = Link(texts.pop())  # the sentence of the teacher's link, typed by nobody
    groups = [texts[i * k : (i + 1) * k] for i in range(sessions)]
    load_before = uptime()
    proc, url = serve_replicas(ckpt_dir, replicas, threads) if replicas else serve(ckpt_dir, threads, cold)
    try:
        cpu = CpuClock(proc.pid)
        with RssSampler(proc.pid) as rss:
            start_rss = rss.now()
            run = run_sessions(url, common.model_name(ckpt_dir), groups, link, cpu)
            concurrent, times, wall = asyncio.run(run)
            end_rss = rss.now()
    finally:
        (stop_replicas if replicas else stop_server)(proc)
    load_after = uptime()
    proc, url = serve(ckpt_dir, threads, cold)
    try:
        sequential, seq_times, _ = asyncio.run(run_sessions(url, common.model_name(ckpt_dir), [texts]))
    finally:
        stop_server(proc)
    concurrent = {t: page.fingerprint() for t, page in concurrent.items()}
    sequential = {t: page.fingerprint() for t, page in sequential.items()}
    differing = [t for t in texts if not same_page(concurrent.get(t), sequential.get(t))]
    for t in differing[:3]:
        print(f"mismatch: {t!r}: {describe(concurrent.get(t), sequential.get(t))}", file=sys.stderr)
    mismatches = len(differing)
    mb = 1024 * 1024
    return [
        common.model_name(ckpt_dir) + (f", {replicas} replicas" if replicas else ""),
        f"{sessions} × {k}",
        common.ms(common.percentile(link.times, 50)),
        common.ms(common.percentile(link.times, 95)),
        common.ms(common.percentile(times, 50)),
        common.ms(common.percentile(times, 95)),
        common.ms(max(times)),
        f"{len(times) / wall:.2f}/s",
        common.ms(cpu.seconds / len(times)),
        common.ms(cpu.own_seconds / len(times)),
        common.ms(statistics.median(seq_times)),
        f"{start_rss / mb:.0f} / {max(rss.peak, start_rss, end_rss) / mb:.0f} / {end_rss / mb:.0f} MiB",
        f"{mismatches}/{len(texts)}",
        f"`{load_before.split('load average:')[-1].strip()}` → `{load_after.split('load average:')[-1].strip()}`",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=30)
    p.add_argument("--sentences", type=int, default=5, help="sentences each session types")
    p.add_argument("--model", default="all", help="a checkpoint name (reverse, translate-en-de, lm-english) or all")
    p.add_argument("--checkpoints", type=Path, help="a checkpoint directory or a folder of them")
    p.add_argument("--tiny", action="store_true", help="tiny untrained checkpoints from training.tiny")
    p.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS for the server (app.py uses 1)")
    p.add_argument("--out", type=Path, help="also write the table to this markdown file")
    p.add_argument("--repeats", type=int, help=argparse.SUPPRESS)  # passed on by run_all.py; not used here
    p.add_argument("--quick", action="store_true", help="2 sessions × 1 sentence: a smoke test")
    p.add_argument("--cold", action="store_true", help="plain `streamlit run app.py`, no warm start: to compare")
    p.add_argument("--replicas", type=int, default=0, help="the class on deploy/run-replicas.sh N (0: one server)")
    args = p.parse_args(argv)
    if args.replicas and args.cold:
        p.error("--replicas starts the deployment's `atlas app` replicas: it has no --cold")
    if args.quick:
        args.sessions, args.sentences = 2, 1
    dirs, what = common.checkpoint_dirs(args)
    if args.model != "all":
        dirs = [d for d in dirs if common.model_name(d) == args.model]
        if not dirs:
            p.error(f"no checkpoint named {args.model!r} in {what}")
    rows = [measure(d, args.sessions, args.sentences, args.threads, args.cold, args.replicas) for d in dirs]
    table = common.Table(
        ["model", "sessions × sentences", "first page p50", "first page p95", "typed p50", "typed p95", "max",
         "throughput", "server CPU a typed page", "the sessions' CPU a typed page", "one at a time (median)",
         "server RSS start / peak / end", "mismatches", "load average before → after"],
        rows,
    )  # fmt: skip
    machine = common.header("", what).splitlines()[2].replace(f"torch {common.torch.__version__} with ", "")
    text = common.emit([
        "### A classroom at once: real sessions against "
        + ("`streamlit run app.py` (no warm start)" if args.cold else
           f"`deploy/run-replicas.sh {args.replicas}` (deploy/README.md's class server)" if args.replicas else
           "`python -m atlas app` (the README's command)"),
        "",
        machine.split(" intra-op")[0].rsplit(",", 1)[0] + "; the server's torch uses 1 thread (app.py)",
        f"- models: {what}",
        common.decoding_line(dirs),
        f"- {args.sessions} sessions over Streamlit's websocket protocol open the teacher's link (model and text in "
        "the query string) at the same moment: first page = from connecting to that page's `script_finished` "
        "(the browser's fetch of the static HTML and JavaScript before it connects is not timed). Then each types "
        f"{args.sentences} distinct sentences back to back, all starting together: typed = from sending the new "
        "Text value to that rerun's `script_finished` (after both charts' deltas); max and throughput are of the "
        f"typed ones. Target: p95 ≤ {TARGET_P95_S:.0f} s for both.",
        "- server CPU a typed page: the CPU seconds (user + system) of the server's process tree from the first "
        "typed sentence to the last, over the typed pages: the page's cost to the machine, which other load on the "
        "machine sways far less than the times; the sessions' CPU: this script's own (the phones' work in a real "
        "class), which shares the machine with the server here.",
        "- mismatches: sentences whose page differs from the same sentence typed alone: any text (model output, "
        "table cells, chart labels) not equal (but for a rounded figure, a percentage or a decimal, one unit "
        "of its last digit apart, as 1e-7 in a batch can turn 11 % into 12 %), or any number of the tables and "
        "charts more than 1e-4 apart "
        "(uint8 thumbnails: more than one step of 255), "
        "the single run on a fresh server; RSS: the server process"
        + (" tree (the replicas, redis-server, haproxy, supervisord)." if args.replicas else "."),
        "",
        table.markdown(),
    ])  # fmt: skip
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped (a timeout, a kill): its servers stop too
    sys.exit(main())
