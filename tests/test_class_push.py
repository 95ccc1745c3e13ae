"""The server's push to a live class's followers (live/push.py): a rerun asked once per move, one read a class
whatever its followers, a session gone or a class ended dropped, a store that did not answer looked at again."""

from __future__ import annotations

import time

import pytest

from live.push import RETRY_MAX_S, RETRY_S, RUN_STALE_S, Followers


class Class:
    def __init__(self) -> None:
        self.version: int | None = 1
        self.reads = 0

    def read(self, code: str) -> int | None:
        self.reads += 1
        return self.version


def rerun_log(log: list[str], name: str, alive: bool = True):
    return lambda whole=False: log.append(name + (" whole" if whole else "")) or alive


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_follower_is_rerun_once_when_its_class_moves_and_not_while_it_stays() -> None:
    cls, log = Class(), []
    followers = Followers({"version": cls.read}, tick_s=3600)
    followers.drawn("s1", "ABCDE", "version", 1, rerun_log(log, "s1"))
    assert followers.tick() == 0 and log == []
    cls.version = 2
    assert followers.tick() == 1 and log == ["s1"]
    assert followers.tick() == 0 and log == ["s1"]  # asked once for version 2 while its run may be under way
    followers.drawn("s1", "ABCDE", "version", 2, rerun_log(log, "s1"))  # its page ran at 2
    cls.version = 3
    followers.tick()
    assert log == ["s1", "s1"]


def test_a_rerun_not_drawn_in_time_is_asked_again_of_the_whole_page_waiting_longer_each_time() -> None:
    """Streamlit drops some rerun requests without a word (a fragment's whose fragment a full run removed): a
    follower whose page has not drawn the move is asked again, of its whole page, then after twice as long."""
    cls, log, clock = Class(), [], Clock()
    followers = Followers({"version": cls.read}, tick_s=3600, clock=clock)
    followers.drawn("s1", "ABCDE", "version", 1, rerun_log(log, "s1"))
    cls.version = 2
    assert followers.tick() == 1 and log == ["s1"]
    clock.now = RETRY_S - 0.1
    assert followers.tick() == 0  # its run may still be under way
    clock.now = RETRY_S
    assert followers.tick() == 1 and log == ["s1", "s1 whole"]
    clock.now = RETRY_S + 2 * RETRY_S - 0.1
    assert followers.tick() == 0  # the second ask waits twice as long
    clock.now += 0.1
    assert followers.tick() == 1 and log[-1] == "s1 whole"
    for _ in range(10):  # never more often than every RETRY_MAX_S
        clock.now += RETRY_MAX_S
        assert followers.tick() == 1
    assert followers.tick() == 0
    followers.drawn("s1", "ABCDE", "version", 2, rerun_log(log, "s1"))  # drawn at last: nothing more asked
    clock.now += 10 * RETRY_MAX_S
    assert followers.tick() == 0
    cls.version = 3  # the next move: asked at once, and given the first wait again
    assert followers.tick() == 1 and log[-1] == "s1"
    clock.now += RETRY_S
    assert followers.tick() == 1 and log[-1] == "s1 whole"


def test_one_read_a_class_whatever_its_followers() -> None:
    cls, log = Class(), []
    followers = Followers({"version": cls.read}, tick_s=3600, running=30)
    for i in range(30):
        followers.drawn(f"s{i}", "ABCDE", "version", 1, rerun_log(log, f"s{i}"))
    cls.version = 2
    assert followers.tick() == 30 and cls.reads == 1 and len(set(log)) == 30


def test_a_session_gone_or_a_class_ended_is_dropped() -> None:
    cls, log = Class(), []
    followers = Followers({"version": cls.read}, tick_s=3600)
    followers.drawn("gone", "ABCDE", "version", 1, rerun_log(log, "gone", alive=False))
    followers.drawn("here", "ABCDE", "version", 1, rerun_log(log, "here"))
    cls.version = 2
    followers.tick()
    assert len(followers) == 1
    cls.version = None  # the class ended: its page is rerun once to say so, then nothing more
    followers.tick()
    assert log == ["gone", "here", "here"] and len(followers) == 0


def test_a_store_that_does_not_answer_is_looked_at_again_next_tick() -> None:
    log: list[str] = []
    calls = iter([RuntimeError("no answer"), 2])

    def flaky(code: str) -> int:
        got = next(calls)
        if isinstance(got, Exception):
            raise got
        return got

    followers = Followers({"version": flaky}, tick_s=3600)
    followers.drawn("s1", "ABCDE", "version", 1, rerun_log(log, "s1"))
    assert followers.tick() == 0 and followers.tick() == 1 and log == ["s1"]


def test_the_thread_asks_the_rerun_by_itself() -> None:
    cls, log = Class(), []
    followers = Followers({"version": cls.read}, tick_s=0.01)
    followers.drawn("s1", "ABCDE", "version", 1, rerun_log(log, "s1"))
    cls.version = 2
    deadline = time.monotonic() + 10
    while not log and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log == ["s1"]


def test_a_poke_looks_at_once_without_waiting_for_the_tick() -> None:
    cls, log = Class(), []
    followers = Followers({"version": cls.read}, tick_s=3600)
    followers.drawn("s1", "ABCDE", "version", 1, rerun_log(log, "s1"))  # starts the thread: it waits an hour
    cls.version = 2
    time.sleep(0.2)
    assert log == []  # nobody poked: the move waits for the tick
    followers.poke()
    deadline = time.monotonic() + 10
    while not log and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log == ["s1"]


def test_a_few_reruns_at_a_time_the_next_when_one_is_over() -> None:
    cls, log, clock = Class(), [], Clock()
    followers = Followers({"version": cls.read}, tick_s=3600, running=2, clock=clock)
    for name in ("s1", "s2", "s3", "s4"):
        followers.drawn(name, "ABCDE", "version", 1, rerun_log(log, name))
    cls.version = 2
    assert followers.tick() == 2 and log == ["s1", "s2"]  # two places
    assert followers.tick() == 0  # both still running: the others wait
    followers.ran("s1")
    assert followers.tick() == 1 and log[-1] == "s3"  # s1's place
    followers.ran("nobody")  # a session the push did not ask: frees nothing
    assert followers.tick() == 0
    clock.now += RUN_STALE_S  # s2 and s3 never said their runs were over: their places are not held for ever
    assert followers.tick() == 1 and log == ["s1", "s2", "s3", "s4"]
    assert followers.tick() == 0  # each asked once for the move
    cls.version = 3  # s4 still running: asked again in the place it holds, and s1 takes the other
    assert followers.tick() == 2 and log[-2:] == ["s1", "s4"]


def test_a_look_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="watches one of version"):
        Followers({"version": Class().read}).drawn("s1", "ABCDE", "answers", 1, lambda whole=False: True)
