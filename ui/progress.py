"""A page's long job on screen: a progress bar and a Cancel button while it runs.

The job's chunks wait in the session's heavy lane of the model's worker (ui.cache.heavy_chunk, analysis.worker).
Pressing Cancel runs `on_cancel` (the page forgets the job it was asked for) and asks Streamlit for a new run of the
page, which stops this one at the chunk it waits for: that chunk is dropped unrun, and the page draws without the job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import streamlit as st

from ui.markdown import literal

Show = Callable[[float, str], None]  # (fraction done, what it is doing: shown as text, never Markdown)


def forget(key: str) -> Callable[[], None]:
    """An `on_cancel` that drops `key` from the session: the page's record that its job was asked for."""
    return lambda: st.session_state.pop(key, None)


@contextmanager
def running(key: str, on_cancel: Callable[[], None], first: str = "Starting…") -> Iterator[Show]:
    """A progress bar (`first` as its text) and a Cancel button, keyed `key`, for the body of the `with`; yields
    `show(fraction, text)` to move the bar. Both leave the page when the job is done."""
    slot = st.empty()
    with slot.container():
        bar = st.progress(0.0, text=first)
        st.button("Cancel", key=f"{key}_cancel", on_click=on_cancel, help="Stop this job; the page keeps the rest.")
    try:
        yield lambda fraction, text: bar.progress(min(1.0, max(0.0, fraction)), text=literal(text))
    except Exception:  # the page says what went wrong in the bar's place
        slot.empty()
        raise
    slot.empty()  # a stopped run (not an Exception) is replaced by the next one: nothing to clear then
