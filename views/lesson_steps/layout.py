"""How a Lesson step lays out its charts: one key and file name per chart, columns that stack in projector mode,
and on a projector the step's first chart lifted into the slot above its words (`first_chart_in`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import streamlit as st

from ui.widgets import projector, show_chart
from viz.labels import safe_filename

PROB = st.column_config.ProgressColumn("probability", min_value=0.0, max_value=1.0, format="%.3f")
# The place the step's first chart goes, while a step is drawn on a projector; None once it is drawn. A ContextVar:
# each session's script runs in its own thread, so one session's slot is never another's.
_FIRST_CHART: ContextVar[object | None] = ContextVar("lesson_first_chart", default=None)


@contextmanager
def first_chart_in(slot: object) -> Iterator[None]:
    """While drawing a step, its first chart goes to `slot` (a container placed above the step's words), the rest
    where the step draws them: the picture opens the step, its captions and pickers follow."""
    token = _FIRST_CHART.set(slot)
    try:
        yield
    finally:
        _FIRST_CHART.reset(token)


def figure_place():
    """Where the step's next figure goes: the slot `first_chart_in` set, the first time it is asked; else the page."""
    slot = _FIRST_CHART.get()
    _FIRST_CHART.set(None)
    return st if slot is None else slot


def chart(fig, key: str, *parts: object) -> None:
    """A lesson chart, through ui.widgets.show_chart: large type in projector mode, cell numbers only where they fit;
    the step's first one in the slot `first_chart_in` set, if any."""
    show_chart(fig, f"lesson_{key}", safe_filename("lesson", key, *parts), where=figure_place())


def side_by_side(n: int, spec: list[int] | None = None) -> list:
    """`n` columns, or `n` containers one below the other in projector mode (each chart the page's width)."""
    return [st.container() for _ in range(n)] if projector() else st.columns(spec or n)
