"""Errors on a page: a short message where a traceback would be, the traceback in the log."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec

import streamlit as st

from inference.checkpoint import CheckpointError
from inference.text import InputError

log = logging.getLogger("attention_atlas")
P = ParamSpec("P")


def safe(func: Callable[P, None]) -> Callable[P, None]:
    """Decorate a page body or fragment: any error becomes a short st.error instead of a traceback.

    Streamlit's own control flow (st.rerun, st.switch_page, st.stop) derives from BaseException and passes.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            func(*args, **kwargs)
        except (InputError, CheckpointError) as exc:
            st.error(str(exc))
        except Exception as exc:  # the page must never show a traceback; the log keeps it
            log.exception("page failed")
            st.error(f"Something went wrong while drawing this page: {type(exc).__name__}: {exc}")

    return wrapper


def guarded(body: Callable[[], None]) -> None:
    """Run a page body under `safe`."""
    safe(body)()
