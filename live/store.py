"""Where a live class's state lives (live/rules.py holds what it is and the rules): in this server's memory, or in
a Redis server that every replica behind the proxy shares (deploy/run-replicas.sh starts one), so that a teacher on
one replica and students on another are in the same class.

Both stores hand a class's record to a function and keep what the function made of it, atomically: the memory
store under one lock, Redis by optimistic transaction (WATCH the class's key, read, compute, write in MULTI/EXEC;
computed again when another replica wrote in between). The function is Python, so it cannot run inside Redis:
instead, one replica's threads take turns on a key (a lock of the process), so only another replica's write can
make a transaction compute again, and a retry waits a random, growing while first, so that replicas that keep
meeting on one key fall out of step instead of starving each other. A follower's poll reads only the version
number. Redis holds each class in one hash (`atlas:class:CODE`: the record as JSON, its version and when it was
last touched) that expires an idle hour after its last touch, and a sorted set of the classes by that time, which
bounds their number; a sorted set a client address of the classes it started, by the same time, counts its places
in one round trip.

`ATLAS_CLASS_STORE=redis://HOST:PORT/DB` picks Redis (the `redis` package, requirements.txt); unset, the memory.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

R = TypeVar("R")
ENV = "ATLAS_CLASS_STORE"
PREFIX = "atlas:class:"
INDEX = "atlas:classes"  # sorted set: code → when the class was last touched
STARTED = "atlas:started:"  # sorted set a client address: code of a class it started → when last touched
ENDED = "atlas:ended:"  # a class its teacher ended: a short-lived mark, so that pages say "ended", not "paused"
ENDED_S = 3600.0  # how long the mark says so (a student's page that saw the class is told within this)
TIMEOUT_S = 2.0  # a Redis call that takes longer fails in one line instead of holding a page
# After a store did not answer (no connection, or TIMEOUT_S passed), each call of this process fails at once for
# this long: a page makes several calls, and a hung store would else cost each of them the whole timeout.
PAUSE_S = 1.0
# A record longer than this is refused before it is parsed. The class's own bounds (live/rules.py) give at most
# about 1.2 MB: a view of 50,000 characters JSON-escaped at ≤ 12 bytes each (a character outside the BMP) is 600 kB,
# 50 questions × 300 answers of ~22 bytes 330 kB, 50 questions of 64 choices with a prompt ~250 kB, 300 student
# ids 6 kB (tests/test_class_faults.py builds that largest class, 1.18 MB, and checks that it fits).
MAX_RECORD_BYTES = 2_000_000
# A transaction that met another replica's write waits up to RETRY_BASE_S · 2^n (n: the retries so far, the wait at
# most RETRY_CAP_S), a uniform random part of it, before it computes again; after RETRIES retries it gives up.
RETRY_BASE_S = 0.001
RETRY_CAP_S = 0.05
RETRIES = 60
LOCKS = 64  # one replica's transactions take turns per key, on one of these locks (the key's hash picks it)
PAUSED = "the class is paused: its store does not answer (pages work without it; the class resumes when it answers)"
_LOGGER = logging.getLogger(__name__)


class Record(Protocol):
    """What a store reads of a class's record: its code, version and last touch (live/rules.py's _Class)."""

    code: str
    version: int
    touched: float
    starter: str  # the client address that started it ("" when none was known)


C = TypeVar("C", bound=Record)


class ClassError(ValueError):
    """A one-line refusal a page shows as it is: no such class, a wrong key, a bound reached, the store unreachable."""


class StoreError(ClassError):
    """The shared store cannot be reached or is misnamed: the class is paused, not ended. `detail`: what the
    operator reads (the store's address and what it said), never a page."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail or message


class RecordError(StoreError):
    """A class's record in the store is not one `dumps` wrote (too long, not JSON, wrong keys or types): refused,
    named, and written again by its teacher's page (Classroom.restore)."""

    def __init__(self, code: str) -> None:
        super().__init__(f"class {code}'s record is damaged: the class is paused until its teacher's page mends it")


class MemoryStore(Generic[C]):
    """Every class of this server, in a dictionary under one lock (each call holds it for a few operations)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, C] = {}
        self._ended: dict[str, float] = {}  # code → until when it reads as ended (time.monotonic)

    def read(self, code: str, use: Callable[[C | None], R]) -> R:
        with self._lock:
            return use(self._records.get(code))

    def update(self, code: str, change: Callable[[C | None], R]) -> R:
        """`change` edits the record in place (or raises, having changed nothing)."""
        with self._lock:
            return change(self._records.get(code))

    def stamp(self, code: str) -> tuple[int, float] | None:
        """The class's version and when it was last touched; None when there is none."""
        with self._lock:
            found = self._records.get(code)
            return None if found is None else (found.version, found.touched)

    def add(self, make: Callable[[set[str]], C], limit: int, alive_since: float) -> C | None:
        """A new record made from the codes taken, unless `limit` classes touched since `alive_since` exist."""
        with self._lock:
            self._drop_before(alive_since)
            if len(self._records) >= limit:
                return None
            record = make(set(self._records))
            self._records[record.code] = record
            return record

    def alive(self, alive_since: float) -> list[C]:
        """Every record touched since `alive_since`, to read (a shallow copy of each: changes go through `update`)."""
        with self._lock:
            self._drop_before(alive_since)
            return [copy.copy(record) for record in self._records.values()]

    def remove(self, code: str) -> None:
        with self._lock:
            self._records.pop(code, None)

    def restore(self, record: C, limit: int, alive_since: float) -> bool:
        """Put `record` back under its code when the store holds none there (and fewer than `limit` classes):
        whether it did. A class whose code is marked ended stays ended."""
        with self._lock:
            self._drop_before(alive_since)
            if record.code in self._records or len(self._records) >= limit or self._was_ended(record.code):
                return False
            self._records[record.code] = record
            return True

    def mark_ended(self, code: str) -> None:
        with self._lock:
            now = time.monotonic()
            self._ended = {c: t for c, t in self._ended.items() if t > now}  # bounded: expired go
            self._ended[code] = now + ENDED_S

    def ended(self, code: str) -> bool:
        with self._lock:
            return self._was_ended(code)

    def _was_ended(self, code: str) -> bool:
        return self._ended.get(code, 0.0) > time.monotonic()

    def count(self, alive_since: float) -> int:
        with self._lock:
            self._drop_before(alive_since)
            return len(self._records)

    def started(self, address: str, alive_since: float) -> int:
        """How many classes touched since `alive_since` client `address` started."""
        with self._lock:
            self._drop_before(alive_since)
            return sum(1 for record in self._records.values() if record.starter == address)

    def _drop_before(self, alive_since: float) -> None:
        for code in [c for c, r in self._records.items() if r.touched < alive_since]:
            del self._records[code]


class RedisStore(Generic[C]):
    """Every class of every replica, in a Redis server; records go in and out as JSON (`dumps`, `loads`)."""

    def __init__(
        self, url: str, dumps: Callable[[C], str], loads: Callable[[str], C], ttl_s: float, client: Any = None
    ) -> None:
        """`client`: a redis.Redis-like client to use instead of connecting to `url` (a test's fakeredis)."""
        import redis  # only where a shared store is asked for

        self._redis = redis
        timeout = {"socket_timeout": TIMEOUT_S, "socket_connect_timeout": TIMEOUT_S}
        self._client = client if client is not None else redis.Redis.from_url(url, **timeout)
        self._url = url
        self._paused_until = 0.0  # time.monotonic() before which a call fails without asking (PAUSE_S)
        self._locks = [threading.Lock() for _ in range(LOCKS)]
        self._sleep: Callable[[float], None] = time.sleep  # a test records the back-off instead of waiting it
        self._jitter = random.Random()  # unseeded: replicas that met must draw different waits
        self._dumps, self._loads, self._ttl = dumps, loads, max(1, int(ttl_s) + 1)

    def read(self, code: str, use: Callable[[C | None], R]) -> R:
        raw = self._call(self._fetch, self._client, code)
        return use(None if raw is None else self._parse(code, raw))

    def update(self, code: str, change: Callable[[C | None], R]) -> R:
        """`change` edits a copy read under WATCH; it is written back only when it changed, and computed again on a
        fresh copy when another replica wrote the class in between."""
        key = PREFIX + code

        def attempt(pipe: Any) -> R:
            raw = self._fetch(pipe, code)
            found = None if raw is None else self._parse(code, raw)
            result = change(found)
            if found is not None and (text := self._dumps(found)) != raw.decode("utf-8"):
                pipe.multi()
                self._write(pipe, found, text)
            return result

        return self._transaction(key, attempt)

    def stamp(self, code: str) -> tuple[int, float] | None:
        version, touched = self._call(self._client.hmget, PREFIX + code, ["version", "touched"])
        return self._stamp(code, version, touched)

    @staticmethod
    def _stamp(code: str, version: bytes | None, touched: bytes | None) -> tuple[int, float] | None:
        if version is None or touched is None:
            return None
        try:
            stamp = int(version), float(touched)
        except ValueError:  # bytes that are no number (int, float take bytes and refuse bad UTF-8 alike)
            raise RecordError(code) from None
        if not math.isfinite(stamp[1]):
            raise RecordError(code)
        return stamp

    def add(self, make: Callable[[set[str]], C], limit: int, alive_since: float) -> C | None:
        def attempt(pipe: Any) -> C | None:
            pipe.zremrangebyscore(INDEX, "-inf", f"({alive_since}")
            taken = {c.decode("utf-8") for c in pipe.zrange(INDEX, 0, -1)}
            if len(taken) >= limit:
                return None
            record = make(taken)
            pipe.multi()
            self._write(pipe, record, self._dumps(record))
            return record

        return self._transaction(INDEX, attempt)

    def alive(self, alive_since: float) -> list[C]:
        """Every record touched since `alive_since` (at most the classes' bound, read in one round trip)."""
        self._call(self._client.zremrangebyscore, INDEX, "-inf", f"({alive_since}")
        codes = [c.decode("utf-8") for c in self._call(self._client.zrange, INDEX, 0, -1)]
        pipe = self._client.pipeline(transaction=False)
        for code in codes:
            pipe.hget(PREFIX + code, "record")
        return [self._loads(raw.decode("utf-8")) for raw in self._call(pipe.execute) if raw is not None]

    def started(self, address: str, alive_since: float) -> int:
        """How many classes touched since `alive_since` client `address` started: one round trip, whatever their
        number (its set loses the idle ones there; `remove` takes out the ended ones)."""
        pipe = self._client.pipeline()
        pipe.zremrangebyscore(STARTED + address, "-inf", f"({alive_since}")
        pipe.zcard(STARTED + address)
        return int(self._call(pipe.execute)[1])

    def remove(self, code: str) -> None:
        starter = self._call(self._client.hget, PREFIX + code, "starter")
        pipe = self._client.pipeline()
        pipe.delete(PREFIX + code)
        pipe.zrem(INDEX, code)
        if starter is not None:
            pipe.zrem(STARTED + starter.decode("utf-8", "replace"), code)
        self._call(pipe.execute)

    def restore(self, record: C, limit: int, alive_since: float) -> bool:
        """Put `record` back under its code when the store holds none there, or a damaged one (and fewer than
        `limit` classes): whether it did. A class whose code is marked ended stays ended."""
        key = PREFIX + record.code

        def attempt(pipe: Any) -> bool:
            damaged = False
            try:
                raw = self._fetch(pipe, record.code)
                if raw is not None:
                    self._parse(record.code, raw)
                    self._stamp(record.code, *pipe.hmget(key, ["version", "touched"]))
                    return False  # there, and whole: the class never left
            except RecordError:
                damaged = True  # replaced, in the place it holds
            if pipe.exists(ENDED + record.code):
                return False
            pipe.zremrangebyscore(INDEX, "-inf", f"({alive_since}")
            if not damaged and pipe.zcard(INDEX) >= limit:
                return False
            pipe.multi()
            pipe.delete(key)  # a damaged record's other fields go with it
            self._write(pipe, record, self._dumps(record))
            return True

        return self._transaction(key, attempt)

    def _write(self, pipe: Any, record: C, text: str) -> None:
        """Queue in `pipe`'s transaction what keeps `record` (`text`, its JSON): its hash, the idle hour's expiry
        from now and its place in the index of classes and in its starter's, by last touch."""
        key, started = PREFIX + record.code, STARTED + record.starter
        fields = {"record": text, "version": record.version, "touched": record.touched, "starter": record.starter}
        pipe.hset(key, mapping=fields)
        pipe.expire(key, self._ttl)
        pipe.zadd(INDEX, {record.code: record.touched})
        pipe.zadd(started, {record.code: record.touched})
        pipe.expire(started, self._ttl)

    def mark_ended(self, code: str) -> None:
        self._call(self._client.set, ENDED + code, b"1", int(ENDED_S))

    def ended(self, code: str) -> bool:
        return bool(self._call(self._client.exists, ENDED + code))

    @staticmethod
    def _fetch(client: Any, code: str) -> bytes | None:
        """The record's bytes, refused by length before they cross the socket (a 20 MB record took 0.2 s a read)."""
        if client.hstrlen(PREFIX + code, "record") > MAX_RECORD_BYTES:
            raise RecordError(code)
        return client.hget(PREFIX + code, "record")

    def _parse(self, code: str, raw: bytes) -> C:
        """The record, or RecordError: whatever `loads` refuses (`_fetch` refused it by length)."""
        try:
            return self._loads(raw.decode("utf-8"))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # UnicodeDecodeError is a ValueError
            _LOGGER.warning("class %s: its record is damaged: %s", code, type(exc).__name__)
            raise RecordError(code) from exc

    def count(self, alive_since: float) -> int:
        self._call(self._client.zremrangebyscore, INDEX, "-inf", f"({alive_since}")
        return int(self._call(self._client.zcard, INDEX))

    def _transaction(self, key: str, attempt: Callable[[Any], R]) -> R:
        """`attempt` run under WATCH of `key` until its writes go through unchanged by another client."""
        with self._locks[hash(key) % LOCKS]:
            self._refuse_while_paused()  # here: threads that queued behind a call the store did not answer
            for retry in range(RETRIES + 1):
                if retry:
                    self._sleep(self.backoff(retry - 1))
                with self._client.pipeline() as pipe:
                    try:
                        pipe.watch(key)
                        result = attempt(pipe)
                        if pipe.explicit_transaction:
                            pipe.execute()
                        return result
                    except self._redis.WatchError:
                        continue
                    except self._redis.RedisError as exc:
                        raise self._unreachable(exc) from exc
        raise StoreError("the class store is too busy: try again")

    def backoff(self, retry: int) -> float:
        """How long the `retry`-th retry (from 0) waits: "full jitter", uniform in [0, min(cap, base · 2^retry))."""
        return self._jitter.random() * min(RETRY_CAP_S, RETRY_BASE_S * 2 ** min(retry, 30))

    def _call(self, fn: Callable[..., R], *args: object) -> R:
        self._refuse_while_paused()
        try:
            return fn(*args)
        except self._redis.RedisError as exc:
            raise self._unreachable(exc) from exc

    def _unreachable(self, exc: Exception) -> StoreError:
        """What a page says, and what the operator reads (a page must name no server path)."""
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, self._redis.ConnectionError | self._redis.TimeoutError):  # not a refusal such as OOM
            self._paused_until = time.monotonic() + PAUSE_S
        return StoreError(PAUSED, f"the class store ({self._url}) did not answer: {first}")

    def _refuse_while_paused(self) -> None:
        if time.monotonic() < self._paused_until:
            raise StoreError(PAUSED, f"the class store ({self._url}) did not answer within the last {PAUSE_S} s")


def url_from_environment() -> str | None:
    """The Redis URL $ATLAS_CLASS_STORE names, or None for this server's memory; StoreError when it is no URL."""
    url = os.environ.get(ENV, "").strip()
    if not url:
        return None
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise StoreError(f"{ENV} is a redis:// URL such as redis://127.0.0.1:6379/0, not {url!r}")
    return url
