"""How a Lesson step lays out its charts: one key and file name per chart, columns that stack in projector mode."""

from __future__ import annotations

import streamlit as st

from ui.widgets import projector, show_chart
from viz.labels import safe_filename

PROB = st.column_config.ProgressColumn("probability", min_value=0.0, max_value=1.0, format="%.3f")


def chart(fig, key: str, *parts: object) -> None:
    """A lesson chart, through ui.widgets.show_chart: large type in projector mode, cell numbers only where they fit."""
    show_chart(fig, f"lesson_{key}", safe_filename("lesson", key, *parts))


def side_by_side(n: int, spec: list[int] | None = None) -> list:
    """`n` columns, or `n` containers one below the other in projector mode (each chart the page's width)."""
    return [st.container() for _ in range(n)] if projector() else st.columns(spec or n)
