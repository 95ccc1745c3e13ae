"""One byte budget for everything the server keeps between reruns, measured, least recently used out first.

A server keeps the analyses its workers computed, the figures and tables built from them, ablations, head rankings,
the Lesson's recordings, induction probes and the models of training steps. Each store is a `ByteCache`; every one
of them belongs to the one `Budget` (`BUDGET`, `ATLAS_MEMORY_MB` megabytes, default 768), and the loaded models
are charged to it too (`Budget.charge`: their parameters and buffers, for as long as the model lives). When a put
takes the total over the budget, the entry used least recently in any store goes first, whichever store holds it;
an entry larger than what the models leave is used once and not kept.

Sizes are measured, not estimated: `measured_bytes` walks a value (dataclasses, containers, NumPy arrays, torch
tensors, strings) and adds what each object occupies (`sys.getsizeof`, an array's buffer once however many views
share it). An array shared by entries of two stores (the pages' copy of an analysis and its full copy) counts in
both: the budget errs towards keeping less, never more.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import itertools
import os
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any

import numpy as np
import torch

MISSING = object()  # ByteCache.get's answer for a key it does not hold, where None is a value kept
ENV_VAR = "ATLAS_MEMORY_MB"
DEFAULT_MB = 768
SESSION_SHARE = 0.25  # the most of the budget one session's work may hold: four sessions at least share it


def _libc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to give back this way
        return None


_TRIM = _libc_trim()


def give_back() -> bool:
    """Return the heap's freed memory to the system (glibc's `malloc_trim`): glibc keeps what a traced pass freed
    for reuse, so without it the server's RSS stays at its largest pass however little it keeps. Cheap (well
    under a millisecond); the worker calls it after each batch. False where there is no glibc."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


_LASTING: dict[int, Any] = {}  # id → the object (held, so that its id is never another's)
_LASTING_LOCK = threading.Lock()


def lasting(value: Any) -> Any:
    """Mark `value` as one object the server holds for its whole life and shares among many entries (a chart's
    default template): `measured_bytes` counts it, and what it holds, in no entry. Returns `value`."""
    with _LASTING_LOCK:
        _LASTING[id(value)] = value
    return value


def measured_bytes(value: Any) -> int:
    """Bytes `value` occupies with everything it holds: each object once (by identity), an array's or tensor's
    buffer once (by its base buffer), a model's parameters and buffers. Objects that are not data (modules,
    functions, classes, locks, threads) count their own size only, except a `torch.nn.Module`'s tensors. What
    `lasting` marked counts nothing."""
    seen: set[int] = set(_LASTING)
    buffers: set[tuple[int, int]] = set()
    total = 0
    stack = [value]
    size_of = sys.getsizeof
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        kind = type(obj)  # the built-in types first, by identity: most of a figure's or a table's objects
        if kind in _ATOMS:
            total += size_of(obj)
            continue
        if kind is list or kind is tuple:
            total += size_of(obj)
            stack.extend(obj)
            continue
        if kind is dict:
            total += size_of(obj)
            stack.extend(obj.keys())
            stack.extend(obj.values())
            continue
        names = _field_names(kind)
        if names:
            total += size_of(obj)
            stack.extend(getattr(obj, name) for name in names)
            continue
        if isinstance(obj, np.ndarray):
            base = obj
            while isinstance(base.base, np.ndarray):
                base = base.base
            total += sys.getsizeof(obj) - (obj.nbytes if obj.base is None and obj.flags.owndata else 0)
            key = (id(base), base.nbytes)
            if key not in buffers:
                buffers.add(key)
                total += base.nbytes
            continue
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            key = (storage.data_ptr(), storage.nbytes())
            if key not in buffers:
                buffers.add(key)
                total += storage.nbytes()
            total += sys.getsizeof(obj)
            continue
        if isinstance(obj, torch.nn.Module):
            stack.extend(obj.parameters())
            stack.extend(obj.buffers())
            total += sys.getsizeof(obj)
            continue
        total += sys.getsizeof(obj)
        if isinstance(obj, (str, bytes, bytearray, int, float, complex, bool, type(None))):
            continue
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            stack.extend(getattr(obj, f.name) for f in dataclasses.fields(obj))
        elif hasattr(obj, "__dict__") and not callable(obj) and type(obj).__module__ not in ("threading", "queue"):
            stack.extend(vars(obj).values())
    return total


_ATOMS = frozenset((str, int, float, bool, bytes, complex, type(None)))  # exact types holding nothing else


_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(kind: type) -> tuple[str, ...]:
    """A dataclass's field names (empty for any other type), looked up once a type."""
    names = _FIELDS.get(kind)
    if names is None:
        is_data = dataclasses.is_dataclass(kind)
        names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(kind)) if is_data else ()
    return names


class Budget:
    """The bytes every registered `ByteCache` holds plus what `charge` adds, kept at or under `max_bytes` by
    evicting the least recently used entry of any cache. Thread-safe (one lock for every cache)."""

    def __init__(self, max_bytes: int, session_share: float = SESSION_SHARE) -> None:
        self.max_bytes = max_bytes
        self.session_share = session_share
        self.lock = threading.RLock()
        self.charged = 0  # the models' bytes: counted, never evicted by the budget
        self.by_owner: dict[Hashable, int] = {}  # bytes of the entries each session's work put
        # who is asking, where a put names nobody: the app sets it to the browser session running the page
        self.owner: Callable[[], Hashable | None] = lambda: None
        self._caches: weakref.WeakSet[ByteCache] = weakref.WeakSet()
        self._ticks = itertools.count()

    def tick(self) -> int:
        return next(self._ticks)

    def register(self, cache: ByteCache) -> None:
        with self.lock:
            self._caches.add(cache)

    @property
    def held(self) -> int:
        """Bytes held by the registered caches."""
        with self.lock:
            return sum(c.bytes for c in self._caches)

    @property
    def total(self) -> int:
        return self.held + self.charged

    def charge(self, owner: object, nbytes: int) -> None:
        """Count `nbytes` (a loaded model) until `owner` is garbage-collected, and make room for them."""
        with self.lock:
            self.charged += nbytes
        weakref.finalize(owner, self._release, nbytes)
        self.settle()

    def _release(self, nbytes: int) -> None:
        with self.lock:
            self.charged -= nbytes

    def room(self) -> int:
        """The most one entry may take: what the models leave."""
        return max(0, self.max_bytes - self.charged)

    def owner_room(self) -> int:
        """The most the entries of one session's work may hold together: its share of what the models leave."""
        return int(self.room() * self.session_share)

    def counted(self, owner: Hashable | None, nbytes: int) -> None:
        """`nbytes` more (or fewer) held for `owner` (the caller holds the lock)."""
        if owner is None:
            return
        held = self.by_owner.get(owner, 0) + nbytes
        if held > 0:
            self.by_owner[owner] = held
        else:
            self.by_owner.pop(owner, None)

    def settle(self, owner: Hashable | None = None) -> list[Any]:
        """Evict least-recently-used entries across the caches until the total fits, `owner`'s own first while its
        work holds more than its share (`owner_room`): one session filling the caches evicts its own entries, not
        the class's. Returns what went, for the caller to release outside the lock (a worker to stop)."""
        gone = []
        with self.lock:
            while owner is not None and self.by_owner.get(owner, 0) > self.owner_room():
                oldest = min(
                    (c for c in self._caches if c.holds(owner)), key=lambda c: c.oldest_tick(owner), default=None
                )
                if oldest is None:
                    break
                gone.append((oldest, oldest.pop_oldest(owner)[0]))
            total = self.total
            while total > self.max_bytes:
                oldest = min((c for c in self._caches if c), key=lambda c: c.oldest_tick(), default=None)
                if oldest is None:
                    break
                value, size = oldest.pop_oldest()
                total -= size
                gone.append((oldest, value))
        for cache, value in gone:
            cache.released(value)
        return [value for _, value in gone]


BUDGET = Budget(int(float(os.environ.get(ENV_VAR, DEFAULT_MB)) * 2**20))


class _AbandonedError(Exception):
    """The thread computing a value was stopped before it had one: a waiting thread computes it instead."""


class ByteCache:
    """A thread-safe least-recently-used map under `max_bytes` of its own and the shared `budget`. A value's size
    is `size(value)` (default `measured_bytes`); `on_evict(value)` is called for a value that leaves (a worker to
    stop). `get_or_compute` runs a missing value's computation once however many threads ask at once."""

    def __init__(
        self,
        max_bytes: int,
        budget: Budget | None = None,
        size: Callable[[Any], int] = measured_bytes,
        on_evict: Callable[[Any], None] | None = None,
    ) -> None:
        self.max_bytes = max_bytes
        self.budget = budget if budget is not None else BUDGET
        self.size = size
        self.on_evict = on_evict
        self.bytes = 0
        # key → (value, size, tick, owner): owner, the session whose work put it (None: nobody's, a notebook's)
        self._items: OrderedDict[Hashable, tuple[Any, int, int, Hashable | None]] = OrderedDict()
        self._running: dict[Hashable, Future] = {}
        self.budget.register(self)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self.budget.lock:
            item = self._items.get(key)
            if item is None:
                return default
            self._items[key] = (item[0], item[1], self.budget.tick(), item[3])
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: Any, owner: Hashable | None = MISSING) -> None:
        """Keep `value` for `key`, put by `owner`'s work (default: the budget's `owner()`, the session asking)."""
        owner = self.budget.owner() if owner is MISSING else owner
        size = self.size(value)
        gone = []
        with self.budget.lock:
            if key in self._items:
                old, old_size, _, old_owner = self._items.pop(key)
                self.bytes -= old_size
                self.budget.counted(old_owner, -old_size)
                gone.append(old)
            if size <= min(self.max_bytes, self.budget.room(), self.budget.owner_room() if owner is not None else size):
                self._items[key] = (value, size, self.budget.tick(), owner)
                self.bytes += size
                self.budget.counted(owner, size)
                while self.bytes > self.max_bytes:
                    gone.append(self.pop_oldest()[0])
        for old in gone:
            if old is not value:
                self.released(old)
        self.budget.settle(owner)

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The kept value, or `compute()` run once for every thread asking for `key` meanwhile, then kept. When the
        thread computing it is stopped (a BaseException that is no error: its session left or ran its page again),
        a thread waiting for it computes it itself: one session's stop never reaches another's page."""
        while True:
            with self.budget.lock:
                value = self.get(key, MISSING)
                if value is not MISSING:
                    return value
                future = self._running.get(key)
                owner = future is None
                if owner:
                    future = self._running[key] = Future()
            if owner:
                break
            try:
                return future.result()
            except _AbandonedError:
                continue
        try:
            value = compute()
        except Exception as exc:
            future.set_exception(exc)
            raise
        except BaseException:
            future.set_exception(_AbandonedError())
            raise
        finally:
            with self.budget.lock:
                self._running.pop(key, None)
        self.put(key, value)
        future.set_result(value)
        return value

    def clear(self) -> None:
        with self.budget.lock:
            values = [v for v, _, _, _ in self._items.values()]
            for _, size, _, owner in self._items.values():
                self.budget.counted(owner, -size)
            self._items.clear()
            self.bytes = 0
        for value in values:
            self.released(value)

    def holds(self, owner: Hashable) -> bool:
        """Whether an entry of `owner`'s work is here (the caller holds the budget's lock)."""
        return any(item[3] == owner for item in self._items.values())

    def oldest_tick(self, owner: Hashable | None = MISSING) -> int:
        """The tick of the least recently used entry (of `owner`'s work, if given)."""
        if owner is MISSING:
            return next(iter(self._items.values()))[2]
        return next(item[2] for item in self._items.values() if item[3] == owner)

    def pop_oldest(self, owner: Hashable | None = MISSING) -> tuple[Any, int]:
        """Remove the least recently used entry (of `owner`'s work, if given; the caller holds the budget's lock);
        its value and size."""
        if owner is MISSING:
            _, (value, size, _, who) = self._items.popitem(last=False)
        else:
            key = next(k for k, item in self._items.items() if item[3] == owner)
            value, size, _, who = self._items.pop(key)
        self.bytes -= size
        self.budget.counted(who, -size)
        return value, size

    def released(self, value: Any) -> None:
        if self.on_evict is not None:
            self.on_evict(value)
