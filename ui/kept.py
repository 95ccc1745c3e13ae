"""`kept`: a page-level function's results kept in the server's one byte budget (inference.memory), shared by every
session: what st.cache_resource does, bounded by measured bytes instead of a count of entries.

Arguments make the key: a page's source (ui.cache.Source, or the Shown that adds its Analysis) by its key (path,
modification time, text; a trace file's hash), anything else as it is (it must be hashable). A client's
`clear_cache` message cannot reach these stores (ui.streamlit_private).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

from inference.memory import MISSING, ByteCache, measured_bytes

F = TypeVar("F", bound=Callable[..., Any])
SHARE = 256 * 2**20  # the most one store may hold of the budget


def _key(arg: Any) -> Any:
    """A source (ui.cache.Source, which names itself by a `key` property) by that key; anything else as it is."""
    return ("context", arg.key) if isinstance(getattr(type(arg), "key", None), property) else arg


def kept(
    spinner: str | None = None,
    max_bytes: int = SHARE,
    size: Callable[[Any], int] = measured_bytes,
    on_evict: Callable[[Any], None] | None = None,
) -> Callable[[F], F]:
    """Keep `fn`'s results per arguments in a `ByteCache`: computed once however many sessions ask at once (the
    others wait), `spinner` shown while it runs; `on_evict(value)` when one leaves (a worker to stop). The store
    is `fn.store` (tests, benchmarks)."""

    def wrap(fn: F) -> F:
        store = ByteCache(max_bytes, size=size, on_evict=on_evict)

        @functools.wraps(fn)
        def call(*args: Any) -> Any:
            key = tuple(_key(a) for a in args)
            value = store.get(key, MISSING)
            if value is not MISSING:
                return value
            if spinner is None:
                return store.get_or_compute(key, lambda: fn(*args))
            with st.spinner(spinner):
                return store.get_or_compute(key, lambda: fn(*args))

        call.store = store  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return wrap
