"""Every page of the server the README starts (`python -m atlas app`), timed over Streamlit's websocket: cold start,
head switches at 128 tokens, each page at 512 tokens, and a soak of 20 long texts with the server's memory.

Starts the server itself (bench/classroom.py: headless, a free port, no file watcher; stopped at the end) and talks
to it the way the browser does (`streamlit.proto` BackMsg / ForwardMsg), per model:
  1. cold start   from spawning `python -m atlas app` until /_stcore/health answers, and until the first page
                  (opened over the websocket as soon as health answers) finishes with its one-head heatmap;
  2. head switch  Explore with a text of about 128 tokens; the "Head" selectbox set to each head in turn (and
                  "average"). Each switch is what the browser sends for a widget inside `st.fragment`: a
                  `rerun_script` carrying every current widget state (the new head among them) and the fragment's
                  id (`Delta.fragment_id` of the head selectbox), timed until that fragment run's `script_finished`;
                  switches are --think seconds apart (default 0.3, a person's quickest clicks; 0 = back to back);
  3. every page   a text of about 512 tokens (at most the model's max_len) typed on Explore, then each page of
                  app.py opened the way the sidebar's navigation does (`rerun_script.page_script_hash` of the page,
                  from the `navigation` message; only the sidebar's widget states, as the browser keeps them), then
                  every page a second time. A page that draws no chart or table, shows an error, or ends otherwise
                  than successfully fails the run (exit status 1);
  4. soak         on a fresh server one session types 20 distinct ~512-token texts on Explore, and for each opens
                  Attention math and Masks and goes back; the server's RSS (its whole process tree) sampled every
                  0.1 s.
Token counts are the length of the input's main axis (bos/eos included: what the page's heatmap has as key
columns, and the page's heatmap is checked to have exactly that many).

    python bench/pages.py [--model reverse|translate-en-de|lm-english|all] [--checkpoints DIR] [--tiny]
                          [--switches 20] [--think 0.3] [--soak 20] [--quick] [--threads N] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import classroom
import common
import websockets
from browser import stop_server
from classroom import Page, RssSampler, Session, collect, sentences_for, uptime
from common import Checkpoint, load_checkpoint
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

TARGET_COLD_S = 5.0
TARGET_SWITCH_S = 0.050
TARGET_PAGE_S = 1.5
TARGET_RSS_BYTES = 1.5e9  # 1.5 GB
SWITCH_TOKENS, PAGE_TOKENS = 128, 512
STEP_TIMEOUT_S = 300  # one rerun; a 512-token encoder-decoder page on a busy machine takes seconds, not minutes
FRAGMENT_TIMEOUT_S = 30  # a fragment rerun the server ignores (fragment gone) never finishes: fall back after this
MB = 1024 * 1024

FINISHED = ForwardMsg.ScriptFinishedStatus
STATUS = {
    FINISHED.FINISHED_SUCCESSFULLY: "finished",
    FINISHED.FINISHED_WITH_COMPILE_ERROR: "compile error",
    FINISHED.FINISHED_EARLY_FOR_RERUN: "stopped early for another rerun",
    FINISHED.FINISHED_FRAGMENT_RUN_SUCCESSFULLY: "fragment finished",
}
MAIN, SIDEBAR = 0, 1  # the first index of a delta path: the root container


class BenchError(RuntimeError):
    """A page did not draw what it should: the run fails."""


# ---------------------------------------------------------------------------------------------------------------
# a session that keeps the widget states as the browser does


# The pages that may rightly draw nothing, each saying why: Training steps on a checkpoint shipped without
# snapshots; a Lesson step on a model of another kind (SmolLM2 on the 2017 embeddings step), which offers a switch.
NOTHING_TO_DRAW = {
    "has no training snapshots": "no snapshots",
    "This step needs": "the step needs another model",
    "No model of the table is in": "no 5-gram models in the folder",
    "No trace opened yet": "no trace file chosen",
    "is an encoder: it reads the whole text at once": "an encoder writes nothing to generate",
    "Logit attribution reads a decoder's stream": "an encoder has no decoder's stream",
}


@dataclass
class Drawn(Page):
    """One script run as received: classroom.Page plus how it ended, warnings and the one-head heatmap's shape."""

    status: int = -1
    warnings: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)
    fragment_ids: set[str] = field(default_factory=set)
    seconds: float = 0.0

    def heatmap(self) -> tuple[str, tuple[int, int] | None]:
        """(title, (query rows, key columns)) of the first chart: on Explore the one-head heatmap."""
        if not self.charts:
            return "", None
        spec = json.loads(self.charts[0])
        title = spec.get("layout", {}).get("title", {})
        title = title.get("text", "") if isinstance(title, dict) else str(title)
        return title, heatmap_shape(spec)

    def nothing_to_draw(self) -> str | None:
        """Why this page rightly drew nothing (NOTHING_TO_DRAW), or None."""
        if self.charts or self.tables:
            return None
        return next((why for phrase, why in NOTHING_TO_DRAW.items() if any(phrase in i for i in self.infos)), None)

    def drew(self) -> str:
        why = self.nothing_to_draw()
        return f"nothing to draw ({why})" if why else f"{len(self.charts)} / {len(self.tables)}"

    def problem(self, fragment: bool = False) -> str:
        """Why this run does not count as a drawn page ("" when it does)."""
        want = FINISHED.FINISHED_FRAGMENT_RUN_SUCCESSFULLY if fragment else FINISHED.FINISHED_SUCCESSFULLY
        if self.status != want:
            return f"ended with {STATUS.get(self.status, self.status)!r}, not {STATUS[want]!r}"
        if self.errors:
            return f"errors on the page: {self.errors}"
        if not self.charts and not self.tables and not self.nothing_to_draw():
            return "no chart and no table"
        return ""


def heatmap_shape(spec: dict) -> tuple[int, int] | None:
    """(rows, columns) of the first trace's z: a list of rows, or Plotly's typed array {"dtype", "bdata", "shape"}."""
    data = spec.get("data") or [{}]
    z = data[0].get("z")
    if isinstance(z, dict) and "shape" in z:
        shape = [int(n) for n in str(z["shape"]).split(",")]
        return (shape[0], shape[-1]) if len(shape) == 2 else None
    if isinstance(z, list) and z and isinstance(z[0], list):
        return len(z), len(z[0])
    return None


class PageSession(Session):
    """classroom.Session that keeps every widget's current state the way the browser's WidgetStateManager does
    (a widget's state is set from its element when the server sets its value, else kept; widgets not drawn by a
    full run are dropped), knows the pages of the app's `st.navigation` and which fragment holds each widget."""

    def __init__(self, url: str, model: str) -> None:
        super().__init__(url, model)
        self.timeout = STEP_TIMEOUT_S
        self.states: dict[str, WidgetState] = {}
        self.options: dict[str, list[str]] = {}
        self.fragment_of: dict[str, str] = {}
        self.sidebar: set[str] = set()
        self.pages: dict[str, str] = {}  # url path ("" for the default page) -> page script hash
        self.titles: dict[str, str] = {}  # url path -> page title

    async def open(self) -> Drawn:
        self.ws = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=None, ping_interval=None)
        return await self.send([])  # the browser's first rerun: no widget states, no page hash

    async def rerun(self, text: str | None) -> Drawn:
        """Ctrl+Enter in the sidebar's Text box: every widget state, the Text one with its new value."""
        if text is None:
            return await self.send(list(self.states.values()))
        if not self.text_id:
            raise BenchError("the page has no Text widget (text_area with key 'text')")
        self.states[self.text_id] = WidgetState(id=self.text_id, string_value=text)
        return await self.send(list(self.states.values()))

    def widget(self, key: str) -> str:
        found = [wid for wid in self.states if wid.endswith(f"-{key}")]
        if not found:
            raise BenchError(f"no widget with key {key!r} on the page (widgets: {sorted(self.states)})")
        return found[0]

    async def choose(self, key: str, index: int, fragment: bool = True) -> Drawn:
        """Pick option `index` of the selectbox/radio with this key, as the browser sends it: every widget state
        (this one's new value is the option's label: Streamlit 1.67's selectbox value is a `string_value`) and,
        for a widget inside a fragment, that fragment's id."""
        wid = self.widget(key)
        self.states[wid] = WidgetState(id=wid, string_value=self.options[wid][index])
        frag = self.fragment_of.get(wid, "") if fragment else ""
        return await self.send(list(self.states.values()), fragment_id=frag)

    async def goto(self, path: str) -> Drawn:
        """Open the page at url path `path` ("" = the default page) the way the sidebar navigation does: that
        page's script hash and the states of the widgets that stay (the sidebar's)."""
        if path not in self.pages:
            raise BenchError(f"no page {path!r} in the app's navigation (pages: {sorted(self.pages)})")
        kept = [s for wid, s in self.states.items() if wid in self.sidebar]
        return await self.send(kept, page_hash=self.pages[path])

    async def send(self, widgets: list[WidgetState], page_hash: str = "", fragment_id: str = "") -> Drawn:
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query
        state.page_script_hash = page_hash or self.page_hash
        state.widget_states.widgets.extend(widgets)
        if fragment_id:
            state.fragment_id = fragment_id
        state.context_info.timezone, state.context_info.locale = "UTC", "en-US"
        t0 = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        page = await self.read_until_finished(FRAGMENT_TIMEOUT_S if fragment_id else self.timeout)
        page.seconds = time.perf_counter() - t0
        self.text_id = page.text_id or self.text_id
        self.page_hash = page.page_hash or self.page_hash
        self.query = page.query or self.query
        return page

    async def read_until_finished(self, timeout: float = STEP_TIMEOUT_S) -> Drawn:
        page, drawn = Drawn(), set()
        while True:
            fwd = ForwardMsg()
            fwd.ParseFromString(await asyncio.wait_for(self.ws.recv(), timeout))
            kind = fwd.WhichOneof("type")
            if kind == "script_finished":
                page.status = fwd.script_finished
                break
            if kind == "new_session":
                page.page_hash = fwd.new_session.page_script_hash or page.page_hash
            elif kind == "navigation":
                nav = fwd.navigation
                self.pages = {p.url_pathname: p.page_script_hash for p in nav.app_pages}
                self.titles = {p.url_pathname: p.page_name for p in nav.app_pages}
                page.page_hash = nav.page_script_hash or page.page_hash
            elif kind == "page_info_changed":
                page.query = fwd.page_info_changed.query_string
            elif kind == "session_event" and fwd.session_event.WhichOneof("type") == "script_compilation_exception":
                page.errors.append(str(fwd.session_event))
            elif kind == "delta":
                if fwd.delta.fragment_id:
                    page.fragment_ids.add(fwd.delta.fragment_id)
                if fwd.delta.WhichOneof("type") == "new_element":
                    el = fwd.delta.new_element
                    collect(page, el)
                    if el.WhichOneof("type") == "alert" and el.alert.format == 2:  # WARNING
                        page.warnings.append(el.alert.body)
                    if el.WhichOneof("type") == "alert" and el.alert.format == 3:  # INFO
                        page.infos.append(el.alert.body)
                    wid = self.track(el, fwd.delta.fragment_id, list(fwd.metadata.delta_path))
                    if wid:
                        drawn.add(wid)
        if page.status == FINISHED.FINISHED_SUCCESSFULLY:  # the browser drops the widgets a full run did not draw
            self.states = {wid: s for wid, s in self.states.items() if wid in drawn}
        return page

    def track(self, el, fragment_id: str, path: list[int]) -> str:
        """Remember a widget's state as the browser holds it; its id, or "" for an element that is no widget
        with a value the browser sends (buttons, chart and table selections are left out)."""
        what = el.WhichOneof("type")
        if what not in ("selectbox", "radio", "text_area", "text_input", "slider", "multiselect"):
            return ""
        w = getattr(el, what)
        wid, state = w.id, None
        if what in ("selectbox", "radio"):
            self.options[wid] = list(w.options)
            if w.set_value:
                state = WidgetState(id=wid, string_value=w.raw_value)
            elif wid not in self.states and w.HasField("default") and w.options:
                state = WidgetState(id=wid, string_value=w.options[w.default])
        elif what in ("text_area", "text_input"):
            if w.set_value:
                state = WidgetState(id=wid, string_value=w.value)
            elif wid not in self.states and w.HasField("default"):
                state = WidgetState(id=wid, string_value=w.default)
        elif what == "slider":
            values = list(w.value) if w.set_value else (list(w.default) if wid not in self.states else None)
            if values is not None:
                state = WidgetState(id=wid)
                state.double_array_value.data.extend(values)
        elif what == "multiselect":
            values = list(w.raw_values) if w.set_value else None
            if values is None and wid not in self.states:
                values = [w.options[i] for i in w.default]
            if values is not None:
                state = WidgetState(id=wid)
                state.string_array_value.data.extend(values)
        if state is not None:
            self.states[wid] = state
        if fragment_id:
            self.fragment_of[wid] = fragment_id
        if path and path[0] == SIDEBAR:
            self.sidebar.add(wid)
        return wid


# ---------------------------------------------------------------------------------------------------------------
# inputs


def keys_read(ckpt: Checkpoint, tokens: int) -> int:
    """How many keys Explore's heatmap has for a text of `tokens`: all of them, but a centre-word model's window of
    max_len words around the blank."""
    return ckpt.config.max_len if ckpt.config.switches.sum_outputs else tokens


def text_of_about(ckpt: Checkpoint, ckpt_dir: Path, tokens: int, seed: int) -> tuple[str, int]:
    """A text whose input is `tokens` long or a little shorter, never more than the model's max_len: classroom's
    sentences (a–p strings for the reversal model) joined, the last one cut. A centre-word model reads the words
    around one blank whatever the length asked: one of its sentences, each with its blank (classroom.sentences_for).
    (text, its tokens)."""
    want = min(tokens, ckpt.config.max_len)
    pool = sentences_for(ckpt_dir, 64, seed)
    if ckpt.config.switches.sum_outputs:
        return pool[0], common.sequence_length(ckpt, pool[0])
    letters = all(set(s) <= set("abcdefghijklmnop") for s in pool)
    sep = "" if letters else " "
    text, i = "", 0
    while True:  # whole sentences while they fit
        candidate = f"{text}{sep}{pool[i % len(pool)]}" if text else pool[i % len(pool)]
        if common.sequence_length(ckpt, candidate) > want:
            break
        text, i = candidate, i + 1
    nxt, base = pool[i % len(pool)], f"{text}{sep}" if text else ""
    for k in range(1, len(nxt)):  # then as much of the next one as fits (a cut word costs a piece or two)
        candidate = base + nxt[:k].rstrip()
        if common.sequence_length(ckpt, candidate) <= want:
            text = candidate
    return text, common.sequence_length(ckpt, text)


# ---------------------------------------------------------------------------------------------------------------
# the measurements


@dataclass
class Result:
    rows: dict[str, list[list[str]]] = field(
        default_factory=lambda: {"cold": [], "switch": [], "pages": [], "soak": []}
    )
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def rank(n: int, q: float) -> str:
    """Which of n sorted values common.percentile(values, q) picks, in words ("20th", "the slowest")."""
    k = common.percentile(list(range(1, n + 1)), q) if n else 0
    return "slowest" if k == n else f"{k}th fastest"


def met(value: float, target: float) -> str:
    return "yes" if value <= target else "**no**"


def check(page: Drawn, what: str, result: Result, fragment: bool = False) -> bool:
    problem = page.problem(fragment)
    if problem:
        result.failures.append(f"{what}: {problem}")
        print(f"FAILED {what}: {problem}", file=sys.stderr, flush=True)
    for warning in page.warnings:
        note = f"{what}: warning on the page: {warning}"
        if note not in result.notes:
            result.notes.append(note)
    return not problem


async def cold_start_and_switches(ckpt: Checkpoint, ckpt_dir: Path, args, result: Result) -> None:
    name = common.model_name(ckpt_dir)
    t0 = time.perf_counter()
    proc, port = classroom.spawn(ckpt_dir, args.threads)
    try:
        url = classroom.wait_healthy(proc, port, poll_s=0.02)
        health = time.perf_counter() - t0
        session = PageSession(url, name)
        first = await session.open()
        ready = time.perf_counter() - t0
        ok = check(first, f"{name}: cold start, first page", result) and bool(first.charts)
        result.rows["cold"].append(
            [name, common.ms(health), common.ms(ready) + ("" if ok else " (no heatmap)"), f"≤ {TARGET_COLD_S:.0f} s",
             met(ready, TARGET_COLD_S) if ok else "**no** (page failed)"]
        )  # fmt: skip

        text, tokens = text_of_about(ckpt, ckpt_dir, SWITCH_TOKENS, seed=1)
        typed = await session.rerun(text)
        check(typed, f"{name}: Explore with the {tokens}-token text", result)
        _, shape = typed.heatmap()
        if not shape or shape[1] != keys_read(ckpt, tokens):
            result.failures.append(f"{name}: the heatmap is {shape} (queries, keys), the text {tokens} tokens")
        head_id = session.widget("head")
        options = session.options[head_id]
        current = options.index(session.states[head_id].string_value)
        order = [(current + 1 + i) % len(options) for i in range(args.switches)]
        fragment, times, wrong = bool(session.fragment_of.get(head_id)), [], 0
        if not fragment:
            result.notes.append(f"{name}: the head selectbox is in no fragment: head switches are full reruns")
        for index in order:
            await asyncio.sleep(args.think)  # a person's clicks are this far apart at the quickest
            try:
                page = await session.choose("head", index, fragment=fragment)
            except TimeoutError:
                result.notes.append(
                    f"{name}: a fragment rerun got no answer within {FRAGMENT_TIMEOUT_S} s; full reruns used instead"
                )
                fragment = False
                await session.close()  # late messages of the lost run must not be read as the next one's
                session = PageSession(url, name)
                await session.open()
                await session.rerun(text)
                page = await session.choose("head", index, fragment=False)
            check(page, f"{name}: head switch to {options[index]!r}", result, fragment=fragment)
            title, _ = page.heatmap()
            # "head 3" / "average" (of heads); a grouped-query option adds " · key/value head 1", a title wraps (<br>)
            if options[index].split(" · ")[0] not in title.replace("<br>", " "):
                wrong += 1
                result.failures.append(f"{name}: switched to {options[index]!r}, the heatmap says {title!r}")
            times.append(page.seconds)
        await session.close()
        kind = "fragment rerun" if fragment else "full rerun (no fragment)"
        p95 = common.percentile(times, 95)
        result.rows["switch"].append(
            [name, str(tokens), f"{len(times)} ({len(options)} options)", kind,
             common.ms(common.percentile(times, 50)), common.ms(p95), common.ms(max(times)),
             f"{len(times) - wrong}/{len(times)}", f"≤ {TARGET_SWITCH_S * 1000:.0f} ms", met(p95, TARGET_SWITCH_S)]
        )  # fmt: skip

        await every_page(ckpt, ckpt_dir, url, result, args.page_tokens)
    finally:
        stop_server(proc)


async def every_page(
    ckpt: Checkpoint, ckpt_dir: Path, url: str, result: Result, page_tokens: int = PAGE_TOKENS
) -> None:
    name = common.model_name(ckpt_dir)
    session = PageSession(url, name)
    try:
        await session.open()
        text, tokens = text_of_about(ckpt, ckpt_dir, page_tokens, seed=2)
        note = "" if tokens >= page_tokens else f" (max_len {ckpt.config.max_len})"
        paths = list(session.pages)
        default = next((p for p in paths if session.pages[p] == session.page_hash), paths[0])
        visits: dict[str, list[Drawn]] = {p: [] for p in paths}
        page = await session.rerun(text)  # typed on the default page: its first visit with this text
        visits[default].append(page)
        title, shape = page.heatmap()
        if not shape or shape[1] != keys_read(ckpt, tokens):
            result.failures.append(
                f"{name}: at {page_tokens}, the heatmap is {shape} (queries, keys), the text {tokens} tokens"
            )
        else:
            result.notes.append(f"{name}: Explore's heatmap at {tokens} tokens: {shape[0]} × {shape[1]} ({title})")
        for round_ in (1, 2):
            for path in paths:
                if round_ == 1 and path == default:
                    continue
                visits[path].append(await session.goto(path))
        for path in paths:
            title = session.titles.get(path, path)
            for i, page in enumerate(visits[path]):
                check(
                    page, f"{name}: page {title!r} ({'first' if i == 0 else 'second'} visit, {tokens} tokens)", result
                )
            first, second = visits[path][0], visits[path][-1]
            ok = not first.problem() and not second.problem()
            worst = max(first.seconds, second.seconds)
            result.rows["pages"].append(
                [name, f"{title} (`/{path}`)", f"{tokens}{note}", common.ms(first.seconds), common.ms(second.seconds),
                 f"{first.drew()} · {second.drew()}", f"≤ {TARGET_PAGE_S} s",
                 met(worst, TARGET_PAGE_S) if ok else "**no** (page failed)"]
            )  # fmt: skip
    finally:
        await session.close()


async def soak(ckpt: Checkpoint, ckpt_dir: Path, args, result: Result) -> None:
    name = common.model_name(ckpt_dir)
    texts = [text_of_about(ckpt, ckpt_dir, PAGE_TOKENS, seed=100 + i) for i in range(args.soak)]
    if len({t for t, _ in texts}) != len(texts):
        raise BenchError(f"{name}: the soak texts are not distinct")
    proc, url = classroom.serve(ckpt_dir, args.threads)
    try:
        session = PageSession(url, name)
        with RssSampler(proc.pid) as rss:
            await session.open()
            start = rss.now()
            paths = list(session.pages)
            default = next((p for p in paths if session.pages[p] == session.page_hash), paths[0])
            visit = [p for p in ("math", "masks") if p in session.pages]
            times: dict[str, list[float]] = {"type": [], **{p: [] for p in visit}}
            for i, (text, tokens) in enumerate(texts):
                page = await session.rerun(text)
                check(page, f"{name}: soak text {i + 1} ({tokens} tokens) on Explore", result)
                times["type"].append(page.seconds)
                for path in visit:
                    page = await session.goto(path)
                    check(page, f"{name}: soak text {i + 1}, page /{path}", result)
                    times[path].append(page.seconds)
                page = await session.goto(default)
                check(page, f"{name}: soak text {i + 1}, back to the default page", result)
            end = rss.now()
        await session.close()
    finally:
        stop_server(proc)
    peak = max(rss.peak, start, end)  # a reading between two samples may be the highest
    span = f"{min(t for _, t in texts)}–{max(t for _, t in texts)}"
    cells = [f"{common.ms(common.percentile(v, 50))} / {common.ms(max(v))}" for v in times.values()]
    result.rows["soak"].append(
        [name, f"{len(texts)} × (Explore + {' + '.join(visit)})", span, *cells,
         f"{start / MB:.0f} / {peak / MB:.0f} / {end / MB:.0f} MiB", "peak ≤ 1.5 GB",
         met(peak, TARGET_RSS_BYTES)]
    )  # fmt: skip


def measure(ckpt_dir: Path, args, result: Result) -> str:
    """One model: the cold start, switches and pages on one server, the soak on a fresh one. The load averages."""
    ckpt = load_checkpoint(ckpt_dir)  # for counting tokens only: the server loads its own
    before = uptime()
    asyncio.run(cold_start_and_switches(ckpt, ckpt_dir, args, result))
    if args.soak:  # --soak 0: no soak
        asyncio.run(soak(ckpt, ckpt_dir, args, result))
    after = uptime()
    load = lambda line: line.split("load average:")[-1].strip()
    return f"{common.model_name(ckpt_dir)} `{load(before)}` → `{load(after)}`"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="all", help="a checkpoint name (reverse, translate-en-de, lm-english) or all")
    p.add_argument("--checkpoints", type=Path, help="a checkpoint directory or a folder of them")
    p.add_argument("--tiny", action="store_true", help="tiny untrained checkpoints from training.tiny")
    p.add_argument("--switches", type=int, default=20, help="head switches at 128 tokens")
    p.add_argument(
        "--think",
        type=float,
        default=0.3,
        help="seconds between head switches (0: back to back, see docs/benchmarks.md)",
    )
    p.add_argument("--soak", type=int, default=20, help="distinct ~512-token texts the soak types")
    p.add_argument(
        "--page-tokens", type=int, default=PAGE_TOKENS, help="the text's length for every page (e.g. 30: a sentence)"
    )
    p.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS for the server (app.py uses 1)")
    p.add_argument("--out", type=Path, help="also write the tables to this markdown file")
    p.add_argument("--repeats", type=int, help=argparse.SUPPRESS)  # passed on by run_all.py; not used here
    p.add_argument("--quick", action="store_true", help="a smoke test: 5 head switches, 2 soak texts")
    args = p.parse_args(argv)
    if args.quick:
        args.switches, args.soak = min(args.switches, 5), min(args.soak, 2)
    dirs, what = common.checkpoint_dirs(args)
    if args.model != "all":
        dirs = [d for d in dirs if common.model_name(d) == args.model]
        if not dirs:
            p.error(f"no checkpoint named {args.model!r} in {what}")
    result = Result()
    loads = []
    for d in dirs:
        try:
            loads.append(measure(d, args, result))
        except (BenchError, TimeoutError, OSError, RuntimeError) as exc:
            result.failures.append(f"{d.name}: {type(exc).__name__}: {exc}")
            print(f"FAILED {d.name}: {exc!r}", file=sys.stderr, flush=True)
    machine = common.header("", what).splitlines()[2].replace(f"torch {common.torch.__version__} with ", "")
    tables = {
        "cold": ["model", "spawn → health", "spawn → first heatmap", "target", "met?"],
        "switch": ["model", "tokens", "switches", "sent as", "median", "p95", "max", "heatmap shows the head",
                   "target (p95)", "met?"],
        "pages": ["model", "page", "tokens", "first visit", "second visit", "charts / tables (1st · 2nd)", "target",
                  "met?"],
        "soak": ["model", "texts × pages", "tokens", "type on Explore (median / max)", "Attention math (median / max)",
                 "Masks (median / max)", "server RSS start / peak / end", "target", "met?"],
    }  # fmt: skip
    parts = [
        "### Every page of `python -m atlas app`, over Streamlit's websocket",
        "",
        machine.split(" intra-op")[0].rsplit(",", 1)[0] + "; the server's torch uses 1 thread (app.py)",
        f"- models: {what}",
        "- load average before → after (1, 5, 15 min): " + "; ".join(loads),
        "",
        "#### 1. Cold start",
        "",
        "From spawning `python -m atlas app` (it runs the first page once before it listens) to /_stcore/health "
        "answering, and to the end of the first page's run (a websocket session opened at once, `?model=NAME`, "
        "the default text) with its one-head heatmap.",
        "",
        common.Table(tables["cold"], result.rows["cold"]).markdown(),
        "#### 2. Head switch",
        "",
        f"Explore with a text of about {SWITCH_TOKENS} tokens; the Head selectbox set to each option in turn "
        f"({args.switches} switches, {args.think:g} s apart: a person's quickest clicks), sent as the browser does for "
        "a widget in `st.fragment` (every widget state, the fragment's id); time from sending to that run's "
        "`script_finished`. p95 is common.percentile's nearest "
        f"rank: with {args.switches} switches it is the {rank(args.switches, 95)} of them.",
        "",
        common.Table(tables["switch"], result.rows["switch"]).markdown(),
        "#### 3. Every page",
        "",
        f"A text of about {args.page_tokens} tokens (at most max_len) typed on Explore (its first visit: the model "
        "runs), "
        "then each page opened from the navigation (first visit: the analysis is cached, the page's own work is "
        "not), then every page again (second visit); time from sending to `script_finished`.",
        "",
        common.Table(tables["pages"], result.rows["pages"]).markdown(),
        "#### 4. Soak",
        "",
    ]
    if args.soak:
        parts += [
            f"A fresh server; one session types {args.soak} distinct texts of about {PAGE_TOKENS} tokens on Explore, "
            "opening Attention math and Masks after each and going back; RSS of the server's process tree (start: "
            "after the first page), sampled every 0.1 s.",
            "",
            common.Table(tables["soak"], result.rows["soak"]).markdown(),
        ]
    else:
        parts += ["Not run (`--soak 0`).", ""]
    if result.notes:
        parts += ["Notes:", "", *[f"- {n}" for n in result.notes], ""]
    parts += [f"**FAILED** ({len(result.failures)}):" if result.failures else "Every page drew (no failure)."]
    parts += [f"- {f}" for f in result.failures[:20]]
    text = common.emit(parts)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
