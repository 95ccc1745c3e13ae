"""A live class's followers, told by the server when their class moves (ui/class_session.py registers them).

One thread per server looks at the version of each class that has followers here, every TICK_S seconds (one
integer read a class, whatever the number of its followers), and asks a rerun of each follower's page whose drawn
version is behind, once per version. An idle follower costs nothing but its entry here: no timer in its browser, no
message on its websocket, no run of its page. A browser's own timer (a fragment's `run_every`) is not used for this:
Streamlit's frontend skips its ticks while a run is under way and stops them when the fragment is replaced, and a
follower whose timer stopped would never follow again.

A view's move within a page does not wait for those reruns: the teacher's page, which drew the view's figures,
publishes them once per version on the `Channel`, and every follower's page open on this server receives the same
bytes at once over its own stream (ui/class_stream.py, drawn by ui/class_pushed.py); the reruns then bring the rest
of each page (its address, pickers and tables) one after another.

Plain Python: the rerun itself is a callable the page gives (Streamlit's session, ui/streamlit_private.py), and a stream
is a callable the server's route gives, so that the rules here are tested without a server. Bounded: one entry a
browser session, dropped when the session is gone; MAX_LISTENERS_PER_CLASS and MAX_LISTENERS streams; one
message kept a class, at most MAX_MESSAGE_BYTES, for at most MAX_KEPT classes.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

TICK_S = 0.1  # a move made on another replica is seen within this (the teacher's own server is poked at once)
# Reruns under way at once. A page run is Python, one core at a time whatever the threads: 30 follower runs asked
# together interleave, cost more CPU each (47 against 37 ms a run) and all end last, and the event loop that sends
# their messages waits behind them. One at a time, the next asked as one ends, the first followers see the move
# within a tenth of a second and the last no later (bench/class_follow.py: p50 1.5 → 0.8 s).
RUNNING = 1
RUN_STALE_S = 1.0  # a rerun asked this long ago that never reported its end no longer holds its place
# While a class's teacher's page runs on this server no follower's rerun starts: the teacher's run is what every
# follower waits for (it draws the view the Channel pushes), and a follower's rerun beside it halves its share of
# the one core Python runs on. A teacher's run that never reported its end holds them back no longer than this.
LEAD_STALE_S = 10.0
# A rerun asked and not drawn this long after is asked again, of the whole page, then after twice as long, up to
# RETRY_MAX_S. Streamlit drops some rerun requests without a word (a fragment's, when a full run removed the
# fragment), and a follower whose one request was lost stayed on the old view until the next move: it must not.
# A run slower than this (a loaded server) is restarted once, then given twice the time: it ends.
RETRY_S = 3.0
RETRY_MAX_S = 30.0
MAX_FOLLOWERS = 10_000  # entries are a few hundred bytes; a server holds far fewer sessions than this
# A class's streams on one server (300 devices answer in a class, a few more may follow) and all of the server's:
# each holds a socket and at most one message waiting to be written.
MAX_LISTENERS_PER_CLASS = 400
MAX_LISTENERS = 2_000
# A message larger than this goes without its figures (the rerun draws them): what a stream may hold waiting.
MAX_MESSAGE_BYTES = 2_000_000
MAX_KEPT = 128  # classes whose latest message is kept for a stream that opens after it (two classes' worth of 64)
_LOGGER = logging.getLogger(__name__)


@dataclass
class _Follower:
    code: str
    look: str  # what of the class it watches: a name of Followers' `looks`
    drawn: Hashable  # what that was when its page was drawn (None: no such class)
    rerun: Callable[[bool], bool]  # asks its page's (or fragment's; True: the whole page's) rerun; False: gone
    asked: Hashable = None  # what a rerun was asked for, so that it is asked once (until `due`)
    due: float = 0.0  # when to ask again if the page has not drawn `asked` by then
    wait_s: float = RETRY_S  # how long the next ask waits before it is asked again


class Followers:
    """The followers of every class on this server, and the thread that reruns each when its class moves.

    `looks`: what a follower can watch of a class by name, each read by code and None when there is no such class
    (a student's page watches the class's version; the teacher's count of answers watches the answers too)."""

    def __init__(
        self,
        looks: Mapping[str, Callable[[str], Hashable]],
        tick_s: float = TICK_S,
        running: int = RUNNING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._looks = dict(looks)
        self._tick_s = tick_s
        self._most_running, self._clock = running, clock
        self._running: dict[str, float] = {}  # session → when its rerun was asked, until its run is over
        self._leading: dict[str, float] = {}  # a teacher's session → when its page's run started, until it is over
        self._lock = threading.Lock()
        self._followers: dict[str, _Follower] = {}  # session id → its entry
        self._thread: threading.Thread | None = None
        self._poked = threading.Event()

    def drawn(self, session: str, code: str, look: str, seen: Hashable, rerun: Callable[[bool], bool]) -> None:
        """Session `session` drew class `code` when its `look` was `seen`: `rerun` it when that moves (`rerun(True)`:
        the whole page, when a first ask went unanswered)."""
        if look not in self._looks:
            raise ValueError(f"a follower watches one of {', '.join(self._looks)}, not {look!r}")
        with self._lock:
            if session not in self._followers and len(self._followers) >= MAX_FOLLOWERS:
                return  # beyond the bound a page is drawn but not told; it follows on its next own run
            self._followers[session] = _Follower(code, look, seen, rerun)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="class-followers", daemon=True)
                self._thread.start()

    def left(self, session: str) -> None:
        """The session is no class's follower any more (its teacher's page, or the class ended)."""
        with self._lock:
            self._followers.pop(session, None)

    def ran(self, session: str) -> None:
        """`session`'s page run is over (app.py's last step, or a fragment's): its place goes to the next follower,
        and a teacher's run no longer holds the followers back."""
        with self._lock:
            held = self._running.pop(session, None)
            led = self._leading.pop(session, None)
        if held is not None or led is not None:
            self._poked.set()

    def leading(self, session: str) -> None:
        """A class's teacher's page run started in `session`: no follower's rerun starts until `ran(session)`."""
        with self._lock:
            self._leading[session] = self._clock()

    def poke(self) -> None:
        """A class on this server moved: look now rather than at the next tick (the teacher's page calls it after
        publishing, so that followers on its own server start their reruns at once; other replicas see the move
        at their next tick)."""
        self._poked.set()

    def __len__(self) -> int:
        with self._lock:
            return len(self._followers)

    def tick(self) -> int:
        """Look at each followed class once; ask the reruns its move calls for. Returns how many were asked."""
        with self._lock:
            by_class: dict[tuple[str, str], list[tuple[str, _Follower]]] = {}
            for session, follower in self._followers.items():
                by_class.setdefault((follower.code, follower.look), []).append((session, follower))
            now_s = self._clock()
            self._running = {s: t for s, t in self._running.items() if now_s - t < RUN_STALE_S}
            self._leading = {s: t for s, t in self._leading.items() if now_s - t < LEAD_STALE_S}
            room = 0 if self._leading else self._most_running - len(self._running)
        asked = 0
        for (code, look), group in by_class.items():
            try:
                now = self._looks[look](code)
            except Exception:  # a shared store that did not answer: looked at again next tick
                _LOGGER.warning("class %s: its %s could not be read", code, look, exc_info=True)
                continue
            for session, follower in group:
                if now == follower.drawn:
                    continue
                again = now is not None and now == follower.asked
                if again and now_s < follower.due:
                    continue  # asked; its run is under way
                with self._lock:
                    holds = session in self._running  # asked again mid-run: it restarts in the place it holds
                    if not holds and room <= 0:  # the others wait for a place: `ran` pokes the thread when one is free
                        continue
                    room -= 0 if holds else 1
                    self._running[session] = now_s
                follower.wait_s = min(2 * follower.wait_s, RETRY_MAX_S) if again else RETRY_S
                follower.asked, follower.due = now, now_s + follower.wait_s
                asked += 1
                if not follower.rerun(again) or now is None:  # gone, or told its class ended: nothing more
                    self._drop(session, follower)
                    self.ran(session)
                    room += 0 if holds else 1  # no run holds the place
        return asked

    def _drop(self, session: str, follower: _Follower) -> None:
        """Forget `follower`, unless its session drew again meanwhile (a new entry)."""
        with self._lock:
            if self._followers.get(session) is follower:
                del self._followers[session]

    def _watch(self) -> None:
        while True:
            self._poked.wait(self._tick_s)
            self._poked.clear()
            try:
                self.tick()
            except Exception:  # the thread serves every class: it logs and goes on
                _LOGGER.exception("class followers: a tick failed")


def message(version: int, page: str, text: str, figures: list[tuple[str, object]]) -> bytes:
    """The server-sent event a follower's stream writes for `version` of a class's view: the page, the text and
    the figures the teacher's page drew (key, plotly JSON), as one `data:` line (JSON escapes every newline).
    Encoded once per version, whatever the number of followers; over MAX_MESSAGE_BYTES, without its figures."""
    body = {"version": version, "page": page, "text": text, "figures": [[key, spec] for key, spec in figures]}
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(data) > MAX_MESSAGE_BYTES:
        body["figures"] = []
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return b"data: " + data + b"\n\n"


class Channel:
    """The figures of each class's view, pushed to the streams of its followers' pages on this server.

    `listen` registers a stream's `deliver(version, message)`, a callable any thread may call (the route hands
    the bytes to its own event loop); `publish` gives every stream of the class the same bytes. The latest message
    of a class is kept, so that a stream opened after a move still receives it (its page ignores a version it drew
    already)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[str, dict[int, Callable[[int, bytes], None]]] = {}  # class → token → deliver
        self._latest: OrderedDict[str, tuple[int, bytes]] = OrderedDict()
        self._tokens = itertools.count(1)

    def listen(self, code: str, deliver: Callable[[int, bytes], None]) -> int | None:
        """A stream of class `code` opened: its token, or None when this server holds as many as it may."""
        with self._lock:
            streams = self._streams.setdefault(code, {})
            if len(streams) >= MAX_LISTENERS_PER_CLASS or sum(map(len, self._streams.values())) >= MAX_LISTENERS:
                if not streams:
                    del self._streams[code]
                return None
            token = next(self._tokens)
            streams[token] = deliver
            latest = self._latest.get(code)
        if latest is not None:
            self._deliver(code, token, deliver, *latest)
        return token

    def leave(self, code: str, token: int) -> None:
        """The stream `token` of class `code` closed."""
        with self._lock:
            streams = self._streams.get(code, {})
            streams.pop(token, None)
            if not streams:
                self._streams.pop(code, None)

    def publish(self, code: str, version: int, data: bytes) -> int:
        """Class `code`'s view at `version` is `data` (a `message`): every stream of it is given the bytes, unless a
        later version was published already. Returns how many streams were given them."""
        with self._lock:
            kept = self._latest.get(code)
            if kept is not None and kept[0] > version:
                return 0
            self._latest[code] = (version, data)
            self._latest.move_to_end(code)
            while len(self._latest) > MAX_KEPT:
                self._latest.popitem(last=False)
            streams = list(self._streams.get(code, {}).items())
        for token, deliver in streams:
            self._deliver(code, token, deliver, version, data)
        return len(streams)

    def latest(self, code: str) -> tuple[int, bytes] | None:
        """Class `code`'s latest message and its version, as a stream opened now receives it first."""
        with self._lock:
            return self._latest.get(code)

    def forget(self, code: str) -> None:
        """Class `code` ended: its message is not kept (its streams end with their pages)."""
        with self._lock:
            self._latest.pop(code, None)

    def streams(self, code: str | None = None) -> int:
        """How many streams are open: of class `code`, or of every class."""
        with self._lock:
            if code is not None:
                return len(self._streams.get(code, {}))
            return sum(map(len, self._streams.values()))

    def _deliver(self, code: str, token: int, deliver: Callable[[int, bytes], None], version: int, data: bytes) -> None:
        try:
            deliver(version, data)
        except Exception:  # a stream whose loop is gone: dropped, the others are still served
            _LOGGER.warning("class %s: a stream could not be given its message", code, exc_info=True)
            self.leave(code, token)
