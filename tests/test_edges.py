"""Bounds and sharing rules at their edges, each on an injected clock or a fake: the Redis expiry renewed on each
write (live/store.py), a class whose teacher is away freeing its starter's place (live/rules.py), a position one
past the text's end (analysis/agreement.py), the worker's heavy wait divided among the heavy sessions and none when
no page is drawn (analysis/worker.py), and a tensor's views counted once (inference/memory.py)."""

from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import ExitStack
from pathlib import Path

import fakeredis
import pytest
import torch

import analysis.lanes as lanes_module
import analysis.worker as worker_module
import atlas
from analysis.agreement import check_position
from analysis.analyze import analyze
from analysis.worker import ModelWorker
from inference.checkpoint import load_checkpoint
from inference.memory import measured_bytes
from live import rules as classroom
from live import store as class_store
from live.rules import ClassError, Classroom, View

NAT = "203.0.113.7"
MB = 1 << 20


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


# --- the Redis store: each write renews the class's idle hour -----------------------------------------------------


def test_each_write_to_a_class_in_redis_renews_its_expiry() -> None:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    room = Classroom.on_redis("redis://fake", client)
    code, key = room.start(NAT)
    full = client.ttl(class_store.PREFIX + code)
    assert full >= classroom.IDLE_S
    client.expire(class_store.PREFIX + code, 5)  # as if the class had idled all but five seconds
    room.show(code, key, View.of("", {"layer": 1}))
    assert client.ttl(class_store.PREFIX + code) >= full - 1
    client.expire(class_store.PREFIX + code, 5)
    room.seen(code, key)  # a teacher's heartbeat is a write too
    assert client.ttl(class_store.PREFIX + code) >= full - 1


# --- the operator's number of classes an address starts ------------------------------------------------------------


@pytest.mark.parametrize("store", ["memory", "fakeredis"])
def test_an_operators_number_of_classes_an_address_starts_is_kept_to_the_edge(store: str, monkeypatch) -> None:
    """$ATLAS_CLASSES_PER_ADDRESS=5: the fifth class from one address starts, the sixth is refused naming 5; another
    address starts its own."""
    monkeypatch.setenv(classroom.PER_ADDRESS_ENV, "5")
    if store == "memory":
        monkeypatch.delenv(class_store.ENV, raising=False)
        room = Classroom.from_environment()
    else:
        per_address, problem = classroom.classes_per_address()
        assert problem is None
        room = Classroom.on_redis(
            "redis://fake", fakeredis.FakeRedis(server=fakeredis.FakeServer()), per_address=per_address
        )
    for _ in range(5):
        room.start(NAT)
    with pytest.raises(ClassError, match="already runs 5 classes"):
        room.start(NAT)
    room.start("198.51.100.1")


@pytest.mark.parametrize(
    ("value", "number", "refused"),
    [("", 3, False), (" 7 ", 7, False), ("1", 1, False), ("64", 64, False), ("0", 3, True), ("65", 3, True),
     ("-2", 3, True), ("2.5", 3, True), ("٣", 3, True), ("many" * 20, 3, True)],
)  # fmt: skip
def test_the_number_of_classes_an_address_starts_is_a_whole_number_from_1_to_max_classes(value, number, refused):
    got, problem = classroom.classes_per_address({classroom.PER_ADDRESS_ENV: value})
    assert got == number and (problem is not None) == refused
    if refused:
        assert classroom.PER_ADDRESS_ENV in problem and "\n" not in problem and len(problem) < 160


def test_atlas_app_refuses_a_number_of_classes_that_is_not_one_in_one_line(monkeypatch, capsys) -> None:
    from ui import serve

    monkeypatch.setenv(classroom.PER_ADDRESS_ENV, "lots")
    assert serve.main([]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("atlas app: ") and classroom.PER_ADDRESS_ENV in err and "\n" not in err


# --- a class whose teacher is away frees its starter's place ------------------------------------------------------


@pytest.mark.parametrize("store", ["memory", "fakeredis"])
def test_a_class_frees_its_place_one_moment_past_teacher_away_s_not_at_it(store: str) -> None:
    clock = Clock()
    if store == "memory":
        room = Classroom(clock)
    else:
        room = Classroom.on_redis("redis://fake", fakeredis.FakeRedis(server=fakeredis.FakeServer()), clock)
    started = [room.start(NAT) for _ in range(classroom.MAX_CLASSES_PER_ADDRESS)]
    with pytest.raises(ClassError, match=f"already runs {classroom.MAX_CLASSES_PER_ADDRESS} classes"):
        room.start(NAT)  # one past the bound
    for kept in started[1:]:
        clock.now += 0.25
        room.seen(*kept)
    clock.now = started_at = 1_000_000.0 + classroom.TEACHER_AWAY_S  # the first class's teacher: away exactly that
    with pytest.raises(ClassError, match="already runs"):
        room.start(NAT)
    assert room.version(started[0][0]) is not None
    clock.now = started_at + 0.125
    room.start(NAT)  # the first class ended and freed its place; the others keep theirs
    assert room.version(started[0][0]) is None and all(room.version(code) is not None for code, _ in started[1:])
    with pytest.raises(ClassError, match="already runs"):
        room.start(NAT)


# --- agreement: a position one past the text's end -----------------------------------------------------------------


def test_a_position_one_past_the_end_is_one_line_not_an_index_error(tiny_checkpoints: dict[str, Path]) -> None:
    lm = load_checkpoint(tiny_checkpoints["decoder-only"])
    text = "the cat sat on the mat"
    count = len(analyze(lm, text).target_ids)
    check_position(count - 1, count)  # the last token is one
    with pytest.raises(ValueError, match=rf"^position {count + 1} is outside the text's tokens: choose one of 1\.\."):
        check_position(count, count)
    with pytest.raises(ValueError, match=rf"^position {count + 1} is outside the text's tokens: choose one of 1\.\."):
        atlas.agreement(lm, text, position=count + 1)  # counted from 1: one past the last
    assert len(atlas.agreement(lm, text, position=count)) > 0


# --- the worker: heavy sessions share the wait, and none when no page is drawn -------------------------------------


@pytest.fixture(scope="module")
def worker(tiny_checkpoints: dict[str, Path]):
    session = threading.local()
    worker = ModelWorker(load_checkpoint(tiny_checkpoints["decoder-only"]), owner=lambda: getattr(session, "id", None))
    worker.session = session
    yield worker
    worker.stop()


def test_the_heavy_wait_is_divided_among_the_heavy_sessions(worker, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(worker_module.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(lanes_module, "PAGES", lanes_module.Pages())  # this test's pages only
    with ExitStack() as pages:
        for student in ("a", "b", "c", "d"):
            pages.enter_context(lanes_module.PAGES.running(student))
        with worker.lanes._ready:
            for researcher in ("r1", "r2"):
                worker.lanes._heavy_seen[researcher] = now[0]
                worker.lanes._heavy[researcher] = deque()
        worker.lanes.ran_heavy(0.5)  # four pages drawn, two heavy sessions: half a second × 4 / 2
        assert worker.lanes._heavy_after == pytest.approx(1000.0 + 0.5 * 4 / 2)
    with worker.lanes._ready:
        worker.lanes._heavy.clear()
        worker.lanes._heavy_seen.clear()


def test_a_heavy_chunk_waits_for_nothing_when_no_page_is_drawn(worker, monkeypatch: pytest.MonkeyPatch) -> None:
    """A share owed from when pages were drawn (`_heavy_after` far ahead) is not waited out once none is."""
    monkeypatch.setattr(lanes_module, "PAGES", lanes_module.Pages())  # no page drawn, whatever other tests left
    with worker.lanes._ready:
        worker.lanes._heavy_after = time.monotonic() + 3600
    ran = threading.Event()

    def ask() -> None:
        worker.session.id = "researcher"
        worker.call(lambda ckpt: ran.set(), heavy=True)

    threading.Thread(target=ask, daemon=True).start()
    assert ran.wait(30), "the heavy chunk waited for a share nobody drawing a page asked"


# --- the byte budget: a tensor's buffer counted once, whatever its views -------------------------------------------


def test_a_tensors_views_count_its_buffer_once_and_two_tensors_twice() -> None:
    t = torch.zeros(MB, dtype=torch.uint8)
    views = [t, t, t[10:], t.view(1024, 1024), t.view(1024, 1024).T, t[::2]]
    assert MB <= measured_bytes(views) < MB + 4096
    assert 2 * MB <= measured_bytes([t, torch.zeros(MB, dtype=torch.uint8)]) < 2 * MB + 4096
    assert MB <= measured_bytes({"weights": t, "same": t[:-1]}) < MB + 4096
