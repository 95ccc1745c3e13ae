"""The server's push to a live class's followers (live/push.py): a rerun asked once per move, one read a class
whatever its followers, a session gone or a class ended dropped, a store that did not answer looked at again, none
started while the teacher's page runs; the Channel gives every stream of a class the same message, bounded."""

from __future__ import annotations

import json
import time

import pytest

from live import push
from live.push import LEAD_STALE_S, RETRY_MAX_S, RETRY_S, RUN_STALE_S, Channel, Followers, message


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


def test_no_followers_rerun_starts_while_the_teachers_page_runs() -> None:
    """The teacher's run draws the view every follower waits for: a follower's rerun beside it would halve its share
    of the core. One that never says it is over holds them back for LEAD_STALE_S at most."""
    cls, log, clock = Class(), [], Clock()
    followers = Followers({"version": cls.read}, tick_s=3600, running=2, clock=clock)
    for name in ("s1", "s2"):
        followers.drawn(name, "ABCDE", "version", 1, rerun_log(log, name))
    followers.leading("teacher")
    cls.version = 2
    assert followers.tick() == 0 and log == []
    followers.ran("teacher")
    assert followers.tick() == 2 and log == ["s1", "s2"]
    followers.leading("teacher")
    cls.version = 3
    clock.now += LEAD_STALE_S - 0.1
    assert followers.tick() == 0
    clock.now += 0.1
    assert followers.tick() == 2


def test_the_channel_gives_every_stream_of_the_class_the_same_bytes_and_no_other_class() -> None:
    channel, got = Channel(), []
    for name in ("a", "b"):
        channel.listen("ABCDE", lambda version, data, name=name: got.append((name, version, data)))
    channel.listen("OTHER", lambda version, data: got.append(("other", version, data)))
    data = message(2, "lesson", "The cat sat.", [("head_chart", {"data": []})])
    assert channel.publish("ABCDE", 2, data) == 2
    assert got == [("a", 2, data), ("b", 2, data)] and got[0][2] is got[1][2]  # encoded once
    assert channel.publish("ABCDE", 1, message(1, "", "older", [])) == 0  # a later version was published
    late = []
    channel.listen("ABCDE", lambda version, data: late.append(version))  # opened after the move: given it
    assert late == [2] and channel.latest("ABCDE") == (2, data)
    channel.forget("ABCDE")
    assert channel.latest("ABCDE") is None


def test_a_stream_that_left_or_failed_is_given_nothing_more() -> None:
    channel, got = Channel(), []
    token = channel.listen("ABCDE", lambda version, data: got.append(version))

    def broken(version: int, data: bytes) -> None:
        raise RuntimeError("its loop is closed")

    channel.listen("ABCDE", broken)
    assert channel.streams("ABCDE") == 2
    channel.publish("ABCDE", 1, b"data: {}\n\n")
    assert channel.streams("ABCDE") == 1 and got == [1]  # the broken one dropped, the other served
    channel.leave("ABCDE", token)
    channel.publish("ABCDE", 2, b"data: {}\n\n")
    assert got == [1] and channel.streams() == 0


def test_the_channel_holds_at_most_so_many_streams_and_kept_messages(monkeypatch) -> None:
    monkeypatch.setattr(push, "MAX_LISTENERS_PER_CLASS", 2)
    monkeypatch.setattr(push, "MAX_LISTENERS", 3)
    monkeypatch.setattr(push, "MAX_KEPT", 2)
    channel = Channel()
    tokens = [channel.listen("AAAAA", lambda v, d: None) for _ in range(3)]
    assert tokens[2] is None and channel.streams("AAAAA") == 2  # a class's bound
    assert channel.listen("BBBBB", lambda v, d: None) is not None
    assert channel.listen("CCCCC", lambda v, d: None) is None and channel.streams() == 3  # the server's bound
    for i, code in enumerate(("AAAAA", "BBBBB", "CCCCC")):
        channel.publish(code, 1, b"data: %d\n\n" % i)
    assert channel.latest("AAAAA") is None and channel.latest("CCCCC") is not None  # the oldest kept goes first


def test_a_message_is_one_data_line_and_a_too_large_one_goes_without_its_figures(monkeypatch) -> None:
    data = message(3, "", "Two\nlines “quoted” <b>", [("c", {"data": [{"z": [[1]]}]})])
    assert data.startswith(b"data: ") and data.endswith(b"\n\n") and data.count(b"\n") == 2
    assert json.loads(data[6:]) == {
        "version": 3,
        "page": "",
        "text": "Two\nlines “quoted” <b>",
        "figures": [["c", {"data": [{"z": [[1]]}]}]],
    }
    monkeypatch.setattr(push, "MAX_MESSAGE_BYTES", 100)
    big = json.loads(message(3, "", "t", [("c", {"data": [{"z": [[0.5] * 100]}]})])[6:])
    assert big["figures"] == [] and big["text"] == "t"
