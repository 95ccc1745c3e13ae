"""Who starts a class and one answer a device (live/rules.py), on an injected clock, in the server's memory, in
Redis's rules (fakeredis) and in a real redis-server: a few classes an address, the teacher password, a class freed
when its teacher left, new devices from one address at a bounded rate, a device that joins again is the same one,
and the lock."""

from __future__ import annotations

import fakeredis
import pytest
from test_class_state import redis_server  # noqa: F401  (a fixture: a redis-server of this test run)

from live import rules as classroom
from live.rules import ClassError, Classroom

NAT = "203.0.113.7"  # a school's one address
SLOTS = classroom.MAX_CLASSES_PER_ADDRESS


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=("memory", "fakeredis", "redis-server"))
def make(request):
    """Makes a Classroom on `clock` (and `password`) in the store the parameter names."""
    url = request.getfixturevalue("redis_server") if request.param == "redis-server" else None

    def made(clock: Clock, password: str | None = None) -> Classroom:
        if request.param == "memory":
            return Classroom(clock, password=password)
        if url is not None:
            import redis

            redis.Redis.from_url(url).flushdb()
            return Classroom.on_redis(url, clock=clock, password=password)
        client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
        return Classroom.on_redis("redis://fake", client, clock, password=password)

    return made


def test_one_address_starts_three_classes_and_the_fourth_is_refused(make) -> None:
    room = make(Clock())
    started = [room.start(NAT) for _ in range(SLOTS)]
    with pytest.raises(ClassError, match=f"already runs {SLOTS} classes"):
        room.start(NAT)
    room.start("198.51.100.9")  # another address has places of its own
    room.end(*started[0])
    room.start(NAT)  # the ended class freed its place


def test_a_class_whose_teacher_has_been_away_fifteen_minutes_ends_and_frees_its_place(make) -> None:
    clock = Clock()
    room = make(clock)
    kept, left, *_ = [room.start(NAT) for _ in range(SLOTS)]
    clock.now += classroom.TEACHER_AWAY_S - 1
    room.seen(*kept)  # this teacher's page is open: its heartbeat
    with pytest.raises(ClassError, match="already runs"):
        room.start(NAT)
    clock.now += 2  # the other teachers have been away 15 minutes and a second
    room.start(NAT), room.start(NAT)
    assert room.version(left[0]) is None and room.version(kept[0]) is not None
    with pytest.raises(ClassError, match="already runs"):
        room.start(NAT)


def test_with_a_teacher_password_only_who_gives_it_starts_a_class(make) -> None:
    room = make(Clock(), password="correct horse")
    assert room.needs_password
    for wrong in ("", "correct hors", "correct horse "):
        with pytest.raises(ClassError, match="not the teacher password"):
            room.start(NAT, wrong)
    assert len(room) == 0
    for _ in range(SLOTS + 1):  # a teacher who knows it is not bound to a few classes an address
        room.start(NAT, "correct horse")


def test_thirty_phones_behind_one_address_join_within_a_minute(make) -> None:
    clock = Clock()
    room = make(clock)
    code, _ = room.start(NAT)
    for phone in range(30):
        room.join(code, f"phone-{phone + 1}", NAT)
        clock.now += 2  # thirty within a minute
    assert room.devices(code) == (30, False)


def test_one_client_minting_fresh_identities_is_refused_past_the_rate(make) -> None:
    clock = Clock()
    room = make(clock)
    code, _ = room.start(NAT)
    for fresh in range(classroom.JOIN_BURST):
        room.join(code, f"fresh-{fresh}", "192.0.2.66")
    with pytest.raises(ClassError, match="too many new devices"):
        room.join(code, "one-too-many", "192.0.2.66")
    room.join(code, "a-phone-elsewhere", NAT)  # another address is not held back
    clock.now += classroom.JOIN_EVERY_S
    room.join(code, "one-too-many", "192.0.2.66")  # the bucket refills: one more
    with pytest.raises(ClassError, match="too many new devices"):
        room.join(code, "and-another", "192.0.2.66")
    assert room.devices(code)[0] == classroom.JOIN_BURST + 2


def test_a_device_joining_again_is_the_same_device_and_answers_once(make) -> None:
    room = make(Clock())
    code, key = room.start(NAT)
    number = room.ask(code, key, "head", "Which head?", ("1", "2"), 0)
    room.join(code, "cookie-1", NAT)
    room.answer(code, "cookie-1", number, 0)
    room.join(code, "cookie-1", NAT)  # a reload: the same cookie
    assert room.devices(code) == (1, False)
    with pytest.raises(ClassError, match="answered this question already"):
        room.answer(code, "cookie-1", number, 1)


def test_a_locked_class_lets_the_joined_answer_and_a_later_device_only_follow(make) -> None:
    room = make(Clock())
    code, key = room.start(NAT)
    room.join(code, "early", NAT)
    with pytest.raises(ClassError, match="only its teacher"):
        room.lock(code, "not the key")
    room.lock(code, key)
    with pytest.raises(ClassError, match="locked: this device follows"):
        room.join(code, "late", NAT)
    assert room.joined(code, "early") and not room.joined(code, "late")
    number = room.ask(code, key, "head", "Which head?", ("1", "2"), 0)
    room.answer(code, "early", number, 1)
    with pytest.raises(ClassError, match="locked"):
        room.answer(code, "late", number, 0)
    assert room.devices(code) == (1, True) and room.version(code) is not None
    room.lock(code, key, False)
    room.join(code, "late", NAT)
