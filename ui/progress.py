"""A page's long job on screen: a progress bar and a Cancel button while it runs.

The job's chunks wait in the session's heavy lane of the model's worker (ui.cache.heavy_chunk, analysis.worker).
Pressing Cancel makes the page forget the job it was asked for and asks Streamlit for a new run of the
page, which stops this one at the chunk it waits for: that chunk is dropped unrun, and the page draws without the job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import streamlit as st

from ui import errors
from ui.markdown import literal

Show = Callable[[float, str], None]  # (fraction done, what it is doing: shown as text, never Markdown)


@errors.safe
def forget(key: str) -> None:
    """A button's callback: drop `key` from the session (the page's record that its job was asked for, or was
    cancelled)."""
    st.session_state.pop(key, None)


@errors.safe
def _cancel(key: str, remember: object) -> None:
    """Cancel pressed: the page forgets the job it was asked for (`key` in the session), or, with `remember`,
    keeps that there instead (the detector's lines, so that they are not scored again until asked)."""
    if remember is None:
        st.session_state.pop(key, None)
    else:
        st.session_state[key] = remember


@contextmanager
def running(button: str, key: str, remember: object = None, first: str = "Starting…") -> Iterator[Show]:
    """A progress bar (`first` as its text) and a Cancel button keyed `button`_cancel, for the body of the `with`;
    yields `show(fraction, text)` to move the bar. Cancel drops `key` from the session, or sets it to `remember`.
    Both leave the page when the job is done."""
    slot = st.empty()
    with slot.container():
        bar = st.progress(0.0, text=first)
        st.button(
            "Cancel",
            key=f"{button}_cancel",
            on_click=_cancel,
            args=(key, remember),
            help="Stop this job; the page keeps the rest.",
        )
    try:
        yield lambda fraction, text: bar.progress(min(1.0, max(0.0, fraction)), text=literal(text))
    except Exception:  # the page says what went wrong in the bar's place
        slot.empty()
        raise
    slot.empty()  # a stopped run (not an Exception) is replaced by the next one: nothing to clear then
