"""Where a live class's state lives (live/rules.py holds what it is and the rules): in this server's memory, or in
a Redis server that every replica behind the proxy shares (deploy/run-replicas.sh starts one), so that a teacher on
one replica and students on another are in the same class.

Both stores hand a class's record to a function and keep what the function made of it, atomically: the memory
store under one lock, Redis by optimistic transaction (WATCH the class's key, read, compute, write in MULTI/EXEC;
computed again when another replica wrote in between). A follower's poll reads only the version number. Redis holds
each class in one hash (`atlas:class:CODE`: the record as JSON, its version and when it was last touched) that
expires an idle hour after its last touch, and a sorted set of the classes by that time, which bounds their number.

`ATLAS_CLASS_STORE=redis://HOST:PORT/DB` picks Redis (the `redis` package, requirements.txt); unset, the memory.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

R = TypeVar("R")
ENV = "ATLAS_CLASS_STORE"
PREFIX = "atlas:class:"
INDEX = "atlas:classes"  # sorted set: code → when the class was last touched
TIMEOUT_S = 2.0  # a Redis call that takes longer fails in one line instead of holding a page


class Record(Protocol):
    """What a store reads of a class's record: its code, version and last touch (live/rules.py's _Class)."""

    code: str
    version: int
    touched: float


C = TypeVar("C", bound=Record)


class ClassError(ValueError):
    """A one-line refusal a page shows as it is: no such class, a wrong key, a bound reached, the store unreachable."""


class StoreError(ClassError):
    """The shared store cannot be reached or is misnamed."""


class MemoryStore(Generic[C]):
    """Every class of this server, in a dictionary under one lock (each call holds it for a few operations)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, C] = {}

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

    def count(self, alive_since: float) -> int:
        with self._lock:
            self._drop_before(alive_since)
            return len(self._records)

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
        self._dumps, self._loads, self._ttl = dumps, loads, max(1, int(ttl_s) + 1)

    def read(self, code: str, use: Callable[[C | None], R]) -> R:
        raw = self._call(self._client.hget, PREFIX + code, "record")
        return use(None if raw is None else self._loads(raw.decode("utf-8")))

    def update(self, code: str, change: Callable[[C | None], R]) -> R:
        """`change` edits a copy read under WATCH; it is written back only when it changed, and computed again on a
        fresh copy when another replica wrote the class in between."""
        key = PREFIX + code

        def attempt(pipe: Any) -> R:
            raw = pipe.hget(key, "record")
            found = None if raw is None else self._loads(raw.decode("utf-8"))
            result = change(found)
            if found is not None and (text := self._dumps(found)) != raw.decode("utf-8"):
                pipe.multi()
                pipe.hset(key, mapping={"record": text, "version": found.version, "touched": found.touched})
                pipe.expire(key, self._ttl)
                pipe.zadd(INDEX, {code: found.touched})
            return result

        return self._transaction(key, attempt)

    def stamp(self, code: str) -> tuple[int, float] | None:
        version, touched = self._call(self._client.hmget, PREFIX + code, ["version", "touched"])
        return None if version is None or touched is None else (int(version), float(touched))

    def add(self, make: Callable[[set[str]], C], limit: int, alive_since: float) -> C | None:
        def attempt(pipe: Any) -> C | None:
            pipe.zremrangebyscore(INDEX, "-inf", f"({alive_since}")
            taken = {c.decode("utf-8") for c in pipe.zrange(INDEX, 0, -1)}
            if len(taken) >= limit:
                return None
            record = make(taken)
            pipe.multi()
            key = PREFIX + record.code
            pipe.hset(
                key, mapping={"record": self._dumps(record), "version": record.version, "touched": record.touched}
            )
            pipe.expire(key, self._ttl)
            pipe.zadd(INDEX, {record.code: record.touched})
            return record

        return self._transaction(INDEX, attempt)

    def alive(self, alive_since: float) -> list[C]:
        """Every record touched since `alive_since` (at most the classes' bound: one round trip each)."""
        self._call(self._client.zremrangebyscore, INDEX, "-inf", f"({alive_since}")
        codes = [c.decode("utf-8") for c in self._call(self._client.zrange, INDEX, 0, -1)]
        found = (self._call(self._client.hget, PREFIX + code, "record") for code in codes)
        return [self._loads(raw.decode("utf-8")) for raw in found if raw is not None]

    def remove(self, code: str) -> None:
        pipe = self._client.pipeline()
        pipe.delete(PREFIX + code)
        pipe.zrem(INDEX, code)
        self._call(pipe.execute)

    def count(self, alive_since: float) -> int:
        self._call(self._client.zremrangebyscore, INDEX, "-inf", f"({alive_since}")
        return int(self._call(self._client.zcard, INDEX))

    def _transaction(self, key: str, attempt: Callable[[Any], R]) -> R:
        for _ in range(100):  # another replica's write in between: read and compute again
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
                    raise StoreError(self._unreachable(exc)) from exc
        raise StoreError("the class store is too busy: try again")

    def _call(self, fn: Callable[..., R], *args: object) -> R:
        try:
            return fn(*args)
        except self._redis.RedisError as exc:
            raise StoreError(self._unreachable(exc)) from exc

    def _unreachable(self, exc: Exception) -> str:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"the class store ({self._url}) did not answer: {first}"


def url_from_environment() -> str | None:
    """The Redis URL $ATLAS_CLASS_STORE names, or None for this server's memory; StoreError when it is no URL."""
    url = os.environ.get(ENV, "").strip()
    if not url:
        return None
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise StoreError(f"{ENV} is a redis:// URL such as redis://127.0.0.1:6379/0, not {url!r}")
    return url
