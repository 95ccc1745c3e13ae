"""Fair work for the model workers (analysis/worker.py): the lanes that each worker's light and heavy threads take
their work from, and the pages the server is drawing now (`PAGES`), which heavy work leaves room for.

Each session's work waits in its own lane and the worker takes the sessions in turn, round-robin, so that one
session's many requests never hold another's page behind them. Work is light (a class's sentences, one head's
detail) or heavy (a long text, or a chunk of a job that runs many passes: patching, ranking heads, a detector over
many texts). Light work always goes first, and never waits behind a heavy chunk under way: the two kinds have a
thread each. The light thread runs only light work; the heavy thread starts a chunk only when no light work waits
or runs, and runs at a lower CPU priority (analysis.worker.HEAVY_NICE). While other sessions are drawing a page
(`PAGES`, marked by the app around each run; a session that asked for a heavy chunk in the last ACTIVE_S seconds is
not counted) the heavy sessions together get a fair share of the machine: after a chunk of t seconds the next waits
t × active / heavy sessions, so twenty students drawing pages beside one heavy tab get twenty turns to its one; with
no page drawn, it runs at full speed. A session keeps at most one heavy chunk queued (a new one replaces it), and a
chunk whose session stopped waiting for it (it left, pressed Cancel, or ran its page again) is dropped before it
runs.

The class first: a page marked as a live class's (its teacher's or a follower's, `PAGES.running(owner, first=True)`)
is not shared with at all. While one is being drawn no heavy chunk starts, and the chunk under way stops at its next
Python call (`Lanes.pause_point`, a profile hook the worker sets on the heavy thread only around the model's work,
where no lock of the worker's is held) until the page is drawn: its Python would else share the interpreter's lock
and the cores with the page's figures, and a thread at nice 19 that holds the lock when the busy cores preempt it
stalls every thread for its long turn to come back. The hold lasts CLASS_GRACE_S past a class's last page: its
followers' pages come one after another (live/push.py), and a chunk let go in the gap between two takes the lock
just as the next page needs it. Both for at most CLASS_HOLD_S at a time, so that a class's stream of follower runs
never stops the heavy work: past it one chunk goes and runs to its end, and the hold starts again.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Hashable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

ACTIVE_S = 10.0  # a session that asked for a heavy chunk this recently is a heavy one, not the class
MOST_HEAVY_WAIT_S = 30.0  # the longest a heavy chunk waits for its share while the class is busy
CLASS_HOLD_S = 2.0  # the longest heavy chunks are held back, at a time, while a live class's pages are drawn
# The hold goes on this long after a class's page was drawn: the push asks the next follower's run as one ends
# (live/push.py's RUNNING), so another comes in the time its run takes to start.
CLASS_GRACE_S = 0.25
HOLD_POLL_S = 0.01  # how often a held-back heavy chunk looks whether the class's pages are drawn (they end anywhere)
STOP = object()  # put in the lanes by `Lanes.stop`: the worker's threads end
Owner = Hashable | None  # who asked: a browser session's id (ui.cache), None for a notebook or a test


class Pages:
    """The sessions drawing a page right now, marked by the app around each run (`running`): the class whose pages
    heavy work shares the machine with. One for the whole server: a page may use any checkpoint's worker."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: Counter[Owner] = Counter()
        self._first: Counter[Owner] = Counter()  # of those, the pages of a live class (`first`)
        self._first_seen = -float("inf")  # when a live class's page was last drawn (monotonic seconds)
        self._first_ended: dict[Owner, float] = {}  # when each live class's session last ended a page (monotonic)
        self.drawing = threading.Event()  # set while a live class's page is drawn: read at each heavy pause point

    @contextmanager
    def running(self, owner: Owner, first: bool = False) -> Iterator[None]:
        """Around `owner`'s page run; `first`: the page of a live class (its teacher's or a follower's), which
        heavy chunks do not start beside (see the module's docstring)."""
        if owner is None:
            yield
            return
        with self._lock:
            self._running[owner] += 1
            if first:
                self._first[owner] += 1
                self._first_seen = time.monotonic()
                self.drawing.set()
        try:
            yield
        finally:
            with self._lock:
                self._running[owner] -= 1
                if self._running[owner] <= 0:
                    del self._running[owner]
                if first:
                    self._first[owner] -= 1
                    now = self._first_seen = time.monotonic()
                    self._first_ended[owner] = now
                    for old in [o for o, ended in self._first_ended.items() if now - ended > ACTIVE_S]:
                        del self._first_ended[old]  # one entry a session that drew a class's page lately
                    if self._first[owner] <= 0:
                        del self._first[owner]
                    if not self._first:
                        self.drawing.clear()

    def owners(self) -> set[Owner]:
        with self._lock:
            return set(self._running)

    def first(self, within: float = 0.0) -> set[Owner]:
        """The sessions drawing a live class's page now, and those whose last one ended under `within` seconds
        ago."""
        with self._lock:
            now = time.monotonic()
            return set(self._first) | {o for o, ended in self._first_ended.items() if now - ended < within}

    def held(self) -> bool:
        """Whether a live class's page is drawn now or ended under CLASS_GRACE_S ago: a heavy chunk under way looks
        closer (`Lanes.pause_point`). Read without the lock at each of the chunk's Python calls."""
        return self.drawing.is_set() or time.monotonic() - self._first_seen < CLASS_GRACE_S

    def class_live(self) -> bool:
        """Whether a live class's page is drawn now or was in the last ACTIVE_S seconds."""
        with self._lock:
            return bool(self._first) or time.monotonic() - self._first_seen <= ACTIVE_S


PAGES = Pages()


@dataclass
class Item:
    """What waits in a session's lane: an analysis request or a job (analysis.worker), its future, who asked, how
    heavy."""

    what: object
    future: Future
    owner: Owner = None
    heavy: bool = False
    # A job (not an analysis) is its session's alone: a newer heavy one replaces it, and one the session cancelled
    # is dropped. An analysis stays: other sessions may wait on the same run.
    job: bool = False


class Lanes:
    """One worker's lanes: each session's waiting work, light and heavy, taken in turn by the worker's two threads
    (see the module's docstring)."""

    def __init__(self) -> None:
        # each session's waiting work in order, the sessions in turn (the first is served next)
        self._ready = threading.Condition()
        self._light: OrderedDict[Owner, deque[Item]] = OrderedDict()
        self._heavy: OrderedDict[Owner, deque[Item]] = OrderedDict()
        self._stopping: Item | None = None
        self._heavy_seen: dict[Owner, float] = {}  # each session's last heavy chunk (monotonic seconds)
        self._heavy_after = 0.0  # no heavy chunk starts before this while others are active
        self._light_busy = False  # the light thread is running light work (no heavy chunk starts meanwhile)
        self._held_since: float | None = None  # since when heavy chunks are held back for a live class's pages
        self._hold_spent = False  # the last hold ran out: the chunk it let go is not held again (`pause_point`)
        self._pausable = False  # the heavy chunk under way may still stop for a class's page
        self._looked = -float("inf")  # when `pause_point` last asked whether the chunk is held (monotonic)

    def put(self, item: Item) -> None:
        """Queue `item` in its session's lane. A session's heavy lane holds one chunk: a newer one replaces it."""
        with self._ready:
            if item.heavy and item.owner is not None:
                self._heavy_seen[item.owner] = time.monotonic()
            lanes = self._heavy if item.heavy else self._light
            lane = lanes.setdefault(item.owner, deque())
            if item.heavy and item.owner is not None:  # nobody's (a notebook's, a test's threads): all kept
                kept = [old for old in lane if not (old.job and old.future.cancel())]
                lane.clear()
                lane.extend(kept)  # an analysis stays: other sessions may wait on the same run
            lane.append(item)
            self._ready.notify_all()  # the light and the heavy thread wait on it

    def _next(self, lanes: OrderedDict[Owner, deque[Item]]) -> Item | None:
        """The first item of the next session's lane in turn (the session then goes last); None if none waits.
        An item whose session cancelled it is dropped here. Called holding `_ready`."""
        while lanes:
            owner, lane = next(iter(lanes.items()))
            item = lane.popleft()
            if lane:
                lanes.move_to_end(owner)
            else:
                del lanes[owner]
            if item.future.set_running_or_notify_cancel() if item.job else True:
                return item
        return None

    def put_back(self, item: Item) -> None:
        """A request that did not fit the batch: first in its lane, and its session first in turn."""
        with self._ready:
            lane = self._light.setdefault(item.owner, deque())
            lane.appendleft(item)
            self._light.move_to_end(item.owner, last=False)

    def _active_others(self) -> int:
        """Sessions drawing a page now (PAGES) that asked for no heavy chunk in the last ACTIVE_S seconds: the
        class whose pages heavy work must leave room for."""
        now = time.monotonic()
        for owner in [o for o, seen in self._heavy_seen.items() if now - seen > ACTIVE_S]:
            del self._heavy_seen[owner]
        return len(PAGES.owners() - self._heavy_seen.keys())

    def _class_holds(self, now: float) -> bool:
        """Whether heavy chunks wait now for a live class's page being drawn or drawn under CLASS_GRACE_S ago (not a
        heavy session's own page), at most CLASS_HOLD_S at a time: past it one chunk goes, and the hold starts
        again. Called holding `_ready`."""
        if not PAGES.first(within=CLASS_GRACE_S) - self._heavy_seen.keys():
            self._held_since, self._hold_spent = None, False
            return False
        if self._held_since is None:
            self._held_since, self._hold_spent = now, False
        if now - self._held_since < CLASS_HOLD_S:
            return True
        self._held_since, self._hold_spent = None, True
        return False

    def take(self, timeout: float | None = None) -> Item | None:
        """The light thread's next item: a stop, else light work round-robin. Waits up to `timeout` seconds (None:
        until there is one). The light thread is busy from here until `ran_light`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._ready:
            while True:
                if self._stopping is not None:
                    return self._stopping
                item = self._next(self._light)
                if item is not None:
                    self._light_busy = True
                    return item
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    return None
                self._ready.wait(wait)

    def ran_light(self) -> None:
        """The light thread's work is done: a heavy chunk may start, if no light work waits."""
        with self._ready:
            self._light_busy = False
            self._ready.notify_all()

    def take_heavy(self) -> Item:
        """The heavy thread's next item: a stop, else a heavy chunk once no light work waits or runs, no class page
        holds it and its share allows. Waits until there is one."""
        with self._ready:
            while True:
                if self._stopping is not None:
                    return self._stopping
                wait = None
                if self._heavy and not self._light and not self._light_busy:
                    now = time.monotonic()
                    if self._class_holds(now):  # a class page's end is not signalled here: looked at again soon
                        wait = HOLD_POLL_S
                    elif now >= self._heavy_after or not self._active_others():
                        item = self._next(self._heavy)
                        if item is not None:
                            self._pausable, self._hold_spent = not self._hold_spent, False
                            return item
                        continue
                    else:
                        wait = self._heavy_after - now
                self._ready.wait(wait)

    def pause_point(self, frame: FrameType, event: str, arg: object) -> None:
        """sys.setprofile's hook on the heavy thread around the model's work: at each Python call, the chunk under
        way waits (the interpreter's lock let go) while a live class's page is drawn, as `_class_holds` says; once
        the hold runs out it goes on to its end. Looks at most every HOLD_POLL_S while a page is drawn."""
        if not (self._pausable and PAGES.held()) or time.monotonic() - self._looked < HOLD_POLL_S:
            return
        while True:
            with self._ready:
                now = self._looked = time.monotonic()
                if self._stopping is not None or not self._class_holds(now):
                    self._pausable = not self._hold_spent
                    return
            time.sleep(HOLD_POLL_S)

    def ran_heavy(self, seconds: float) -> None:
        """After a heavy chunk of `seconds`: the heavy sessions together wait their share of the active ones'."""
        with self._ready:
            others = self._active_others()
            heavy = max(1, len(self._heavy))
            self._heavy_after = time.monotonic() + min(MOST_HEAVY_WAIT_S, seconds * others / heavy)

    def sharing(self) -> bool:
        """Whether a heavy chunk starting now shares the machine with active pages (it then gets one thread)."""
        with self._ready:
            return self._active_others() > 0

    def stop(self) -> None:
        """Both threads take STOP next, once what they run is done."""
        with self._ready:
            self._stopping = Item(STOP, Future())
            self._ready.notify_all()

    def drain(self) -> list[Item]:
        """Every item still waiting, taken out of the lanes."""
        with self._ready:
            leftovers = [item for lanes in (self._light, self._heavy) for lane in lanes.values() for item in lane]
            self._light.clear()
            self._heavy.clear()
        return leftovers
