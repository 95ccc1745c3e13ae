"""The Redis store's transactions (live/store.py): one replica's threads take turns on a class, so each change is
computed once; another replica's write in between computes it again after a random, growing, capped wait; a key
that never settles gives up in one line; and two replicas' students lose no answer."""

from __future__ import annotations

import threading

import fakeredis
import pytest

from live import rules, store
from live.rules import ClassError, Classroom, View
from live.store import StoreError


@pytest.fixture
def server() -> fakeredis.FakeServer:
    return fakeredis.FakeServer()


def _replica(server: fakeredis.FakeServer) -> Classroom:
    return Classroom.on_redis("redis://fake", fakeredis.FakeRedis(server=server))


def _waits(room: Classroom) -> list[float]:
    """The back-off waits `room`'s store takes, recorded instead of slept."""
    waits: list[float] = []
    room._store._sleep = waits.append
    return waits


def test_one_replicas_threads_take_turns_so_each_change_is_computed_once(server) -> None:
    room = _replica(server)
    code, _ = room.start()
    calls = []

    def change(found) -> None:
        calls.append(1)
        found.touched += 1e-6  # a write, as every answer makes

    def student() -> None:
        for _ in range(10):
            room._store.update(code, change)

    threads = [threading.Thread(target=student) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 20 * 10


def test_a_retry_waits_a_random_part_of_a_doubling_while_up_to_the_cap(server) -> None:
    redis_store = _replica(server)._store
    redis_store._jitter.random = lambda: 0.5
    assert [redis_store.backoff(n) for n in range(3)] == [0.5 * store.RETRY_BASE_S * 2**n for n in range(3)]
    assert redis_store.backoff(store.RETRIES) == redis_store.backoff(10_000) == 0.5 * store.RETRY_CAP_S
    other = _replica(server)._store  # another replica draws other waits: they fall out of step
    assert [other.backoff(9) for _ in range(5)] != [_replica(server)._store.backoff(9) for _ in range(5)]


def test_another_replicas_write_in_between_computes_the_change_again_after_a_wait(server) -> None:
    room = _replica(server)
    code, _ = room.start()
    waits, other = _waits(room), fakeredis.FakeRedis(server=server)
    calls = []

    def change(found) -> str:
        calls.append(1)
        if len(calls) <= 3:
            other.hset(store.PREFIX + code, "other", len(calls))  # another replica writes the class meanwhile
        found.touched += 1.0
        return "done"

    assert room._store.update(code, change) == "done"
    assert len(calls) == 4 and len(waits) == 3
    assert all(0 <= wait <= store.RETRY_BASE_S * 2**n for n, wait in enumerate(waits))


def test_a_class_another_replica_writes_every_time_gives_up_in_one_line_after_the_retries(server) -> None:
    room = _replica(server)
    code, _ = room.start()
    waits, other = _waits(room), fakeredis.FakeRedis(server=server)

    def change(found) -> None:
        other.hincrby(store.PREFIX + code, "other", 1)
        found.touched += 1.0

    with pytest.raises(StoreError, match=r"^the class store is too busy: try again$"):
        room._store.update(code, change)
    assert len(waits) == store.RETRIES and sum(waits) <= store.RETRIES * store.RETRY_CAP_S


def test_two_replicas_students_at_once_lose_no_answer(server) -> None:
    first, second = _replica(server), _replica(server)
    code, key = first.start()
    number = first.ask(code, key, "attend", "Where?", tuple("abcd"), 0)

    def student(i: int) -> None:
        (first, second)[i % 2].answer(code, f"s{i}", number, i % 4)

    def teacher() -> None:
        for i in range(100):
            first.show(code, key, View.of("", {"layer": i}))

    threads = [threading.Thread(target=student, args=(i,)) for i in range(40)] + [threading.Thread(target=teacher)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert second.counts(code, number) == [10, 10, 10, 10]
    assert second.view(code)[1] == View.of("", {"layer": 99})


class Trips(fakeredis.FakeRedis):
    """A fakeredis client that counts its round trips: each command sent alone, each pipeline sent."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trips = 0

    def execute_command(self, *args, **kwargs):
        self.trips += 1
        return super().execute_command(*args, **kwargs)

    def pipeline(self, transaction: bool = True, shard_hint=None):
        pipe = super().pipeline(transaction, shard_hint)
        sent = pipe.execute

        def counted(*args, **kwargs):
            self.trips += 1
            return sent(*args, **kwargs)

        pipe.execute = counted
        return pipe


def test_an_address_counts_its_classes_in_one_round_trip_at_its_edge(server) -> None:
    client = Trips(server=server)
    room = Classroom.on_redis("redis://fake", client)
    nat, slots = "203.0.113.7", rules.MAX_CLASSES_PER_ADDRESS
    started = [room.start(nat) for _ in range(slots - 1)]
    for other in range(rules.MAX_CLASSES - slots):
        room.start(f"198.51.100.{other}")  # other addresses' classes: counted for them, not read for this one
    client.trips = 0
    assert room._store.started(nat, room._alive()) == slots - 1 and client.trips == 1
    started.append(room.start(nat))  # the last place
    with pytest.raises(ClassError, match=f"already runs {slots} classes"):
        room.start(nat)
    room.end(*started[1])
    assert room._store.started(nat, room._alive()) == slots - 1
    room.start(nat)  # the ended class freed its place
