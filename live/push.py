"""A live class's followers, told by the server when their class moves (ui/class_live.py registers them).

One thread per server looks at the version of each class that has followers here, every TICK_S seconds (one
integer read a class, whatever the number of its followers), and asks a rerun of each follower's page whose drawn
version is behind, once per version. An idle follower costs nothing but its entry here: no timer in its browser, no
message on its websocket, no run of its page. A browser's own timer (a fragment's `run_every`) is not used for this:
Streamlit's frontend skips its ticks while a run is under way and stops them when the fragment is replaced, and a
follower whose timer stopped would never follow again.

Plain Python: the rerun itself is a callable the page gives (Streamlit's session, ui/class_rerun.py), so that the
rules here are tested without a server. Bounded: one entry a browser session, dropped when the session is gone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

TICK_S = 0.1  # a move made on another replica is seen within this (the teacher's own server is poked at once)
# Reruns under way at once. A page run is Python, one core at a time whatever the threads: 30 follower runs asked
# together interleave, cost more CPU each (47 against 37 ms a run) and all end last, and the event loop that sends
# their messages waits behind them. One at a time, the next asked as one ends, the first followers see the move
# within a tenth of a second and the last no later (bench/class_follow.py: p50 1.5 → 0.8 s).
RUNNING = 1
RUN_STALE_S = 1.0  # a rerun asked this long ago that never reported its end no longer holds its place
# A rerun asked and not drawn this long after is asked again, of the whole page, then after twice as long, up to
# RETRY_MAX_S. Streamlit drops some rerun requests without a word (a fragment's, when a full run removed the
# fragment), and a follower whose one request was lost stayed on the old view until the next move: it must not.
# A run slower than this (a loaded server) is restarted once, then given twice the time: it ends.
RETRY_S = 3.0
RETRY_MAX_S = 30.0
MAX_FOLLOWERS = 10_000  # entries are a few hundred bytes; a server holds far fewer sessions than this
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
        """`session`'s page run is over (app.py's last step, or a fragment's): its place goes to the next follower."""
        with self._lock:
            held = self._running.pop(session, None)
        if held is not None:
            self._poked.set()

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
            room = self._most_running - len(self._running)
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
