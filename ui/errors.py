"""Errors on a page: a short message where a traceback would be, the traceback in the log."""

from __future__ import annotations

import functools
import logging
import os
import site
import sys
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec

import streamlit as st

from inference import catalog
from inference.checkpoint import CheckpointError
from inference.text import InputError
from live.store import ClassError
from ui.markdown import literal

log = logging.getLogger("attention_atlas")
P = ParamSpec("P")


def _server_folders() -> list[tuple[str, str]]:
    """(absolute folder, what a visitor reads instead), longest first: the checkpoints folder (its models by name),
    the installed packages, the app's own folder and the home folder."""
    root = Path(__file__).resolve().parents[1]
    folders = [(catalog.checkpoints_dir(), ""), (root, ""), (Path.home(), "~/")]
    folders += [(Path(p), "") for p in [*site.getsitepackages(), site.getusersitepackages(), sys.prefix]]
    pairs = []
    for folder, shown in folders:
        for form in {str(folder), str(Path(folder).resolve())}:
            if len(form) > 1:
                pairs.append((form.rstrip(os.sep) + os.sep, shown))
    return sorted(set(pairs), key=lambda pair: -len(pair[0]))


def shown(message: str) -> str:
    """A message as every visitor may read it: paths relative to the checkpoints folder (or the installed
    packages', the app's), never the server's absolute paths; and as plain text, never Markdown (a message quotes
    tokens and names from files, which a shared trace file chooses)."""
    for folder, instead in _server_folders():
        message = message.replace(folder, instead)
    return literal(message)


def safe(func: Callable[P, None]) -> Callable[P, None]:
    """Decorate a page body, a fragment or a widget's callback (which runs before the page, outside its guard):
    any error becomes a short st.error instead of a traceback.

    Streamlit's own control flow (st.rerun, st.switch_page, st.stop) derives from BaseException and passes.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            func(*args, **kwargs)
        except (InputError, CheckpointError, ClassError) as exc:  # each a line meant for a person
            st.error(shown(str(exc)))
        except Exception as exc:  # the page must never show a traceback; the log keeps it
            log.exception("page failed")
            st.error(shown(f"Something went wrong while drawing this page: {type(exc).__name__}: {exc}"))

    return wrapper


def guarded(body: Callable[[], None]) -> None:
    """Run a page body under `safe`."""
    safe(body)()
