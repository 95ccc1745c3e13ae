"""Fair work: the model's worker serves sessions in turn, light work before heavy chunks, and drops a chunk whose
session stopped waiting for it (analysis.worker)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import CancelledError
from contextlib import ExitStack

import pytest

import analysis.lanes as lanes_module
import analysis.worker as worker_module
from analysis.worker import ModelWorker
from inference.checkpoint import load_checkpoint
from training.tiny import make_tiny_checkpoint

WHO = threading.local()  # the session a test thread acts for, as ui.cache.session_id names a browser session's


def _owner() -> str | None:
    return getattr(WHO, "session", None)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return load_checkpoint(make_tiny_checkpoint(tmp_path_factory.mktemp("fair") / "lm", "decoder-only", seed=3))


@pytest.fixture(autouse=True)
def pages(monkeypatch) -> lanes_module.Pages:
    """The pages drawn now, this test's own: what another test drew (on the real clock) holds nothing here."""
    pages = lanes_module.Pages()
    monkeypatch.setattr(lanes_module, "PAGES", pages)
    return pages


@pytest.fixture
def worker(ckpt):
    worker = ModelWorker(ckpt, owner=_owner)
    yield worker
    worker.stop()


def _hold(worker: ModelWorker) -> threading.Event:
    """Keep the worker busy until the returned event is set, so that what tests queue meanwhile waits."""
    release, started = threading.Event(), threading.Event()

    def busy(ckpt) -> None:
        started.set()
        release.wait(10)

    threading.Thread(target=worker.call, args=(busy,), daemon=True).start()
    assert started.wait(10)
    return release


def _ask(worker: ModelWorker, session: str, name: str, ran: list[str], heavy: bool = False, **kw) -> threading.Thread:
    """A thread acting for `session` that asks the worker to run a job recording `name`, and waits."""

    def ask() -> None:
        WHO.session = session
        try:
            worker.call(lambda ckpt: ran.append(name), heavy=heavy, **kw)
        except BaseException as exc:  # recorded for the test to read
            ran.append(f"{name}: {type(exc).__name__}")

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    return thread


def _queued(worker: ModelWorker, count: int) -> None:
    """Wait until `count` items wait in the worker's lanes."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with worker.lanes._ready:
            waiting = sum(len(lane) for lanes in (worker.lanes._light, worker.lanes._heavy) for lane in lanes.values())
        if waiting >= count:
            return
        time.sleep(0.005)
    raise AssertionError(f"fewer than {count} items queued")


def _join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()


def test_a_session_asking_much_does_not_hold_another_sessions_request_behind_it(worker) -> None:
    release, ran = _hold(worker), []
    threads = []
    for i in range(5):  # one session queues five requests (five tabs' worth), then another session one
        threads.append(_ask(worker, "greedy", f"greedy {i + 1}", ran))
        _queued(worker, i + 1)
    threads.append(_ask(worker, "student", "student", ran))
    _queued(worker, 6)
    release.set()
    _join(threads)
    assert ran.index("student") == 1, ran  # its turn comes after the greedy session's first, not its fifth


def test_light_work_goes_before_a_heavy_chunk_queued_earlier(worker) -> None:
    release, ran = _hold(worker), []
    threads = [_ask(worker, "researcher", "patching chunk", ran, heavy=True)]
    _queued(worker, 1)
    threads.append(_ask(worker, "student", "page", ran))
    _queued(worker, 2)
    release.set()
    _join(threads)
    assert ran == ["page", "patching chunk"]


def test_a_chunk_whose_session_stopped_waiting_is_dropped_unrun(worker) -> None:
    class Stopped(BaseException):  # what Streamlit raises in a page whose session left or reran
        pass

    def waiting() -> None:
        raise Stopped

    release, ran = _hold(worker), []
    thread = _ask(worker, "leaver", "chunk", ran, heavy=True, waiting=waiting)
    thread.join(10)  # it stops waiting at its first tick, the worker still busy
    assert ran == ["chunk: Stopped"]
    after = _ask(worker, "student", "page", ran)
    release.set()
    _join([after])
    assert ran == ["chunk: Stopped", "page"]  # the dropped chunk never ran


def test_a_sessions_newer_heavy_chunk_replaces_the_one_still_queued(worker) -> None:
    release, ran = _hold(worker), []
    first = _ask(worker, "researcher", "old chunk", ran, heavy=True)
    _queued(worker, 1)
    second = _ask(worker, "researcher", "new chunk", ran, heavy=True)
    _queued(worker, 1)
    first.join(10)
    assert ran == [f"old chunk: {CancelledError.__name__}"]
    release.set()
    _join([second])
    assert ran[-1] == "new chunk"


def test_heavy_chunks_share_the_worker_with_the_sessions_drawing_pages(worker, monkeypatch) -> None:
    """After a heavy chunk of t seconds, the heavy sessions together wait t × sessions drawing a page / heavy
    sessions; a heavy session's own page does not count, and with no page drawn it runs at full speed."""
    now = [1000.0]
    monkeypatch.setattr(worker_module.time, "monotonic", lambda: now[0])
    with ExitStack() as pages:
        for student in ("a", "b", "c", "d", "researcher"):  # five pages running, one of them the heavy session's
            pages.enter_context(lanes_module.PAGES.running(student))
        with worker.lanes._ready:
            worker.lanes._heavy_seen["researcher"] = now[0]
            worker.lanes._heavy["researcher"] = deque()
        worker.lanes.ran_heavy(0.5)
        assert worker.lanes._heavy_after == pytest.approx(1000.0 + 0.5 * 4)
    now[0] += 1  # the class's pages are drawn: nothing to leave room for
    worker.lanes.ran_heavy(0.5)
    assert worker.lanes._heavy_after == pytest.approx(now[0])
    with worker.lanes._ready:
        worker.lanes._heavy.clear()


def test_a_long_text_is_heavy_and_a_class_sentence_light(worker) -> None:
    release, ran = _hold(worker), []
    long_text = "The cat sat on the mat and looked at the birds. " * 30

    def long_request() -> None:
        WHO.session = "paster"
        worker.analyze(long_text, max_tokens=8)
        ran.append("long")

    threads = [threading.Thread(target=long_request, daemon=True)]
    threads[0].start()
    _queued(worker, 1)
    with worker.lanes._ready:
        assert "paster" in worker.lanes._heavy and not worker.lanes._light
    threads.append(_ask(worker, "student", "page", ran))
    _queued(worker, 2)
    release.set()
    _join(threads)
    assert ran == ["page", "long"]


def test_a_session_stopped_while_computing_a_shared_value_does_not_stop_the_one_waiting_for_it() -> None:
    """Two sessions ask a kept value at once (inference.memory.ByteCache.get_or_compute); the one computing it is
    stopped (it left): the other computes it itself instead of receiving the first one's stop."""
    from inference.memory import ByteCache

    class Stopped(BaseException):
        pass

    store, computing, answers = ByteCache(2**20), threading.Event(), []
    go_on = threading.Event()

    def leaver() -> None:
        def compute() -> int:
            computing.set()
            go_on.wait(10)
            raise Stopped

        try:
            store.get_or_compute("key", compute)
        except Stopped:
            answers.append("leaver stopped")

    def stayer() -> None:
        answers.append(store.get_or_compute("key", lambda: 42))

    first = threading.Thread(target=leaver, daemon=True)
    first.start()
    assert computing.wait(10)
    second = threading.Thread(target=stayer, daemon=True)
    second.start()
    running = store._running["key"]
    deadline = time.monotonic() + 10
    while not running._condition._waiters and time.monotonic() < deadline:  # the stayer waits on the leaver's run
        time.sleep(0.001)
    go_on.set()
    _join([first, second])
    assert sorted(map(str, answers)) == ["42", "leaver stopped"]


def test_one_sessions_work_holds_at_most_its_share_of_the_budget_and_evicts_its_own() -> None:
    """A student filling the caches (twenty long texts, a dozen rankings) pushes out its own oldest entries once
    its work holds a quarter of the budget, not the entries the rest of the class reads."""
    from inference.memory import Budget, ByteCache

    budget = Budget(4000, session_share=0.25)
    pages, rankings = ByteCache(4000, budget, size=len), ByteCache(4000, budget, size=len)
    pages.put("class sentence", "c" * 900, owner="student")
    pages.put("another sentence", "c" * 900, owner=None)  # a notebook's: nobody's share
    for i in range(8):
        (pages if i % 2 else rankings).put(f"greedy {i}", "g" * 300, owner="greedy")
    assert budget.by_owner["greedy"] <= 1000 and budget.by_owner["student"] == 900
    assert pages.get("class sentence") and pages.get("another sentence")
    assert [k for k in ("greedy 5", "greedy 6", "greedy 7") if (pages if k[-1] in "57" else rankings).get(k)] == [
        "greedy 5",
        "greedy 6",
        "greedy 7",
    ]  # its newest three kept
    assert rankings.get("greedy 0") is None  # its oldest went
    pages.put("too big for one session", "x" * 1200, owner="greedy")
    assert pages.get("too big for one session") is None and budget.by_owner["greedy"] <= 1000
    pages.clear()
    rankings.clear()
    assert budget.by_owner == {}


def test_heavy_chunks_of_nobodys_threads_are_all_kept(worker) -> None:
    """A notebook's or a test's threads name no session: their heavy chunks share a lane but never replace one
    another."""
    release, ran = _hold(worker), []
    threads = [_ask(worker, None, "first", ran, heavy=True)]
    _queued(worker, 1)
    threads.append(_ask(worker, None, "second", ran, heavy=True))
    _queued(worker, 2)
    release.set()
    _join(threads)
    assert ran == ["first", "second"]


def _ran(ran: list[str], name: str) -> None:
    """Wait until `name` is among what ran."""
    deadline = time.monotonic() + 10
    while name not in ran and time.monotonic() < deadline:
        time.sleep(0.005)
    assert name in ran, ran


def test_a_class_page_drawn_beside_a_heavy_job_goes_before_its_next_chunk(worker) -> None:
    """A chunk under way cannot be stopped; the next one does not start while a live class's page is drawn, so
    the page's request, asked after the chunk was queued and after the worker freed, runs first."""
    release, ran = _hold(worker), []  # the heavy job's chunk under way
    chunk = _ask(worker, "researcher", "next chunk", ran, heavy=True)
    _queued(worker, 1)
    with lanes_module.PAGES.running("teacher", first=True):
        release.set()  # the chunk under way ends while the teacher's page is being drawn
        page = _ask(worker, "teacher", "teacher's page", ran)
        _join([page])
        assert ran == ["teacher's page"]
    _join([chunk])
    assert ran == ["teacher's page", "next chunk"]


def test_a_heavy_job_is_not_held_when_no_class_page_is_drawn(worker) -> None:
    """An ordinary student's page shares the machine as before (t × pages / heavy sessions), it does not hold the
    chunks back; with no page at all the chunks run one after another at full speed."""
    ran = []
    with lanes_module.PAGES.running("student"):
        with worker.lanes._ready:
            assert not worker.lanes._class_holds(time.monotonic())
    for i in range(3):
        _join([_ask(worker, "researcher", f"chunk {i + 1}", ran, heavy=True)])
    assert ran == ["chunk 1", "chunk 2", "chunk 3"]


def test_a_heavy_sessions_own_page_in_a_class_does_not_hold_its_chunks(worker) -> None:
    """A follower who ranks every head draws its page while its chunks wait: its own page holds nothing back."""
    release, ran = _hold(worker), []
    chunk = _ask(worker, "researcher", "chunk", ran, heavy=True)
    _queued(worker, 1)
    with lanes_module.PAGES.running("researcher", first=True):
        with worker.lanes._ready:
            assert not worker.lanes._class_holds(time.monotonic())
        release.set()
        _join([chunk])
    assert ran == ["chunk"]


def _until(condition) -> None:
    """Wait until `condition()` holds, counting tries rather than reading the clock (a test may fake it)."""
    for _ in range(2000):
        if condition():
            return
        time.sleep(0.005)
    raise AssertionError("the state waited for never came")


def test_heavy_chunks_are_held_for_a_class_at_most_class_hold_s_at_a_time(worker, monkeypatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(worker_module.time, "monotonic", lambda: now[0])
    ran = []
    with lanes_module.PAGES.running("follower", first=True):  # a class's pages drawn without end
        chunk = _ask(worker, "researcher", "chunk", ran, heavy=True)
        _until(lambda: worker.lanes._held_since is not None)  # the worker found the chunk and holds it back
        now[0] += worker_module.CLASS_HOLD_S - 0.01  # one hundredth short: still held
        time.sleep(5 * worker_module.HOLD_POLL_S)  # the worker looks again meanwhile (nothing may happen)
        assert ran == []
        now[0] += 0.01  # the hold's end: the chunk goes
        _join([chunk])
        assert ran == ["chunk"]


def test_heavy_chunks_are_cut_smaller_while_a_class_is_live(monkeypatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(worker_module.time, "monotonic", lambda: now[0])
    pages = lanes_module.Pages()
    monkeypatch.setattr(lanes_module, "PAGES", pages)
    tokens = 16
    assert ModelWorker.chunk_rows(tokens) == worker_module.CHUNK_TOKENS // tokens  # no class
    with pages.running("student"):  # an ordinary page: no class
        assert ModelWorker.chunk_rows(tokens) == worker_module.CHUNK_TOKENS // tokens
    with pages.running("teacher", first=True):
        assert ModelWorker.chunk_rows(tokens) == worker_module.CLASS_CHUNK_TOKENS // tokens
    now[0] += worker_module.ACTIVE_S  # the class's last page ACTIVE_S ago: still live
    assert ModelWorker.chunk_rows(tokens) == worker_module.CLASS_CHUNK_TOKENS // tokens
    now[0] += 0.01  # one past: the class has gone quiet
    assert ModelWorker.chunk_rows(tokens) == worker_module.CHUNK_TOKENS // tokens


def _heavy_running(worker: ModelWorker, session: str, ran: list[str]) -> tuple[threading.Thread, threading.Event]:
    """A heavy chunk of `session`'s under way until the returned event is set."""
    release, started = threading.Event(), threading.Event()

    def chunk(ckpt) -> None:
        started.set()
        release.wait(10)
        ran.append("chunk")

    def ask() -> None:
        WHO.session = session
        worker.call(chunk, heavy=True)

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    assert started.wait(10)
    return thread, release


def test_a_light_request_asked_while_a_heavy_chunk_runs_finishes_before_that_chunk(worker) -> None:
    """A chunk under way cannot be stopped, and on a loaded machine it takes seconds: the class's page does not wait
    for it, the light work has a thread of its own."""
    ran = []
    chunk, release = _heavy_running(worker, "researcher", ran)
    page = _ask(worker, "teacher", "teacher's page", ran)
    _join([page])  # while the chunk still runs
    assert ran == ["teacher's page"]
    release.set()
    _join([chunk])
    assert ran == ["teacher's page", "chunk"]


def test_no_heavy_chunk_starts_while_light_work_runs(worker) -> None:
    """Light work goes first on the machine too: the heavy thread waits for the light one's work to end."""
    release, ran = _hold(worker), []  # light work under way
    chunk = _ask(worker, "researcher", "chunk", ran, heavy=True)
    _queued(worker, 1)

    def heavy_thread_waits() -> bool:  # it looked, found the light thread busy, and waits to be told
        with worker.lanes._ready:
            return bool(worker.lanes._ready._waiters) and bool(worker.lanes._heavy)

    _until(heavy_thread_waits)
    assert ran == []
    release.set()
    _join([chunk])
    assert ran == ["chunk"]


@pytest.mark.skipif(sys.platform != "linux", reason="nice is per thread on Linux only")
def test_heavy_chunks_run_at_a_lower_cpu_priority_than_light_work(worker) -> None:
    def nice(ckpt) -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    light, heavy = worker.call(nice), worker.call(nice, heavy=True)
    assert heavy == min(19, light + worker_module.HEAVY_NICE) and heavy > light


def _stepping_chunk(worker: ModelWorker, steps: list[int], done: threading.Event) -> threading.Thread:
    """A heavy chunk under way that steps (a Python call each) until `done` is set."""

    def chunk(ckpt) -> None:
        while not done.is_set():
            steps.append(len(steps))

    def ask() -> None:
        WHO.session = "researcher"
        worker.call(chunk, heavy=True)

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    _until(lambda: len(steps) > 0)
    return thread


def test_a_chunk_under_way_stops_while_a_class_page_is_drawn_and_goes_on_after(worker, monkeypatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(worker_module.time, "monotonic", lambda: now[0])
    steps, done = [], threading.Event()
    chunk = _stepping_chunk(worker, steps, done)
    with lanes_module.PAGES.running("teacher", first=True):
        _until(lambda: worker.lanes._held_since is not None)  # the chunk reached a pause point and waits
        stopped_at = len(steps)
        time.sleep(5 * worker_module.HOLD_POLL_S)  # it looks again meanwhile (it may not step)
        assert len(steps) == stopped_at
    now[0] += worker_module.CLASS_GRACE_S - 0.01  # the page is drawn, the next follower's may still come: held
    time.sleep(5 * worker_module.HOLD_POLL_S)
    assert len(steps) == stopped_at
    now[0] += 0.01  # CLASS_GRACE_S after the page: the chunk goes on
    _until(lambda: len(steps) > stopped_at)
    done.set()
    _join([chunk])


def test_a_chunk_under_way_stops_in_the_gap_between_two_followers_pages(worker, monkeypatch) -> None:
    """A class's page drawn and over between two of the chunk's steps: the chunk stops at its next step all the
    same (the next follower's page comes), until CLASS_GRACE_S after it."""
    now = [1000.0]
    monkeypatch.setattr(worker_module.time, "monotonic", lambda: now[0])
    steps, done = [], threading.Event()
    chunk = _stepping_chunk(worker, steps, done)
    with lanes_module.PAGES.running("follower", first=True):
        pass  # over before the chunk looked
    _until(lambda: worker.lanes._held_since is not None)
    stopped_at = len(steps)
    time.sleep(5 * worker_module.HOLD_POLL_S)
    assert len(steps) == stopped_at
    now[0] += worker_module.CLASS_GRACE_S
    _until(lambda: len(steps) > stopped_at)
    done.set()
    _join([chunk])


def test_a_queued_chunk_waits_class_grace_s_after_a_class_page_and_no_longer(worker, monkeypatch) -> None:
    """Between two followers' pages (the push asks the next as one ends) no heavy chunk starts: a chunk queued
    just after a class's page waits CLASS_GRACE_S, then runs."""
    now = [1000.0]
    monkeypatch.setattr(worker_module.time, "monotonic", lambda: now[0])
    with lanes_module.PAGES.running("follower", first=True):
        pass  # one follower's page drawn; the next one's not begun
    ran = []
    chunk = _ask(worker, "researcher", "chunk", ran, heavy=True)
    _until(lambda: worker.lanes._held_since is not None)
    now[0] += worker_module.CLASS_GRACE_S - 0.01
    time.sleep(5 * worker_module.HOLD_POLL_S)  # the worker looks again meanwhile (nothing may happen)
    assert ran == []
    now[0] += 0.01
    _join([chunk])
    assert ran == ["chunk"]


def test_the_pages_remember_a_class_sessions_last_page_for_active_s_only(pages, monkeypatch) -> None:
    """One entry a session that drew a class's page in the last ACTIVE_S seconds: 300 followers leave 300 at most,
    a session gone long since none."""
    now = [1000.0]
    monkeypatch.setattr(lanes_module.time, "monotonic", lambda: now[0])
    with pages.running("old follower", first=True):
        pass
    now[0] += lanes_module.ACTIVE_S
    with pages.running("follower", first=True):
        pass
    assert set(pages._first_ended) == {"old follower", "follower"}  # ACTIVE_S ago: kept still
    now[0] += 0.01
    with pages.running("follower", first=True):
        pass
    assert set(pages._first_ended) == {"follower"}
    assert pages.first(within=lanes_module.CLASS_GRACE_S) == {"follower"}
    now[0] += lanes_module.CLASS_GRACE_S
    assert pages.first(within=lanes_module.CLASS_GRACE_S) == set() and not pages.held()


def test_a_chunk_stopped_for_class_hold_s_runs_to_its_end_though_the_class_goes_on(worker, monkeypatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(worker_module.time, "monotonic", lambda: now[0])
    steps, done = [], threading.Event()
    chunk = _stepping_chunk(worker, steps, done)
    with lanes_module.PAGES.running("follower", first=True):  # a class's pages drawn without end
        _until(lambda: worker.lanes._held_since is not None)
        stopped_at = len(steps)
        now[0] += worker_module.CLASS_HOLD_S  # the hold's end: the chunk goes on
        _until(lambda: len(steps) > stopped_at + 1000)
        now[0] += 2 * worker_module.HOLD_POLL_S  # past when it would look again: it is not held a second time
        going = len(steps)
        _until(lambda: len(steps) > going + 1000)
        done.set()
        _join([chunk])


def test_a_chunk_started_once_the_class_went_quiet_stops_for_its_next_page(worker, monkeypatch) -> None:
    """A spent hold lets one chunk run to its end, not the ones that start after the class's page was drawn."""
    now = [1000.0]
    monkeypatch.setattr(worker_module.time, "monotonic", lambda: now[0])
    steps, done = [], threading.Event()
    first = _stepping_chunk(worker, steps, done)
    with lanes_module.PAGES.running("teacher", first=True):
        _until(lambda: worker.lanes._held_since is not None)
        now[0] += worker_module.CLASS_HOLD_S  # spent: the first chunk runs to its end
        done.set()
        _join([first])
    steps, done = [], threading.Event()
    now[0] += worker_module.CLASS_GRACE_S  # the class quiet: no page drawn, none just drawn
    second = _stepping_chunk(worker, steps, done)
    now[0] += 2 * worker_module.HOLD_POLL_S
    with lanes_module.PAGES.running("teacher", first=True):
        _until(lambda: worker.lanes._held_since is not None)  # the next page holds it
    now[0] += worker_module.CLASS_GRACE_S  # and CLASS_GRACE_S after it, no longer
    done.set()
    _join([second])
