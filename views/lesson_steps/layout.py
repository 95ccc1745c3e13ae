"""How a Lesson step lays out its charts: one key and file name per chart, columns that stack in projector mode,
and on a projector the step's first chart lifted into the slot above its words (`first_chart_in`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import streamlit as st

from ui.widgets import Chart, DeltaGenerator, projector, show_chart
from viz.labels import safe_filename

# What to look at in each step's first figure: one sentence, drawn right under it (ui.says), so that a projector and
# a phone show it with the figure; the step's paragraph, below, says why.
LOOK = {
    "embeddings": "Each row is one token of the sentence as the model first reads it: a list of numbers, one colour "
    "each.",
    "positional-encoding": "Each row is one position's vector, added to its token: left columns change fast, right "
    "ones slowly, so no two rows match.",
    "padding-mask": "The short sentence is filled up with pads to the long one's length: no query may attend to a pad.",
    "no-peek-mask": "Above the diagonal every cell is ✗: a token may attend to itself and to the tokens before it, "
    "never to the ones after.",
    "scaled-dot-product": "One query's row, step by step: its raw scores, the mask, then softmax's weights, which sum "
    "to 1.",
    "multi-head": "Every head of every layer on the same sentence: each draws a pattern of its own.",
    "feed-forward": "Each row is one token, each column one unit of the feed-forward layer: most cells stay near 0, a "
    "few light up.",
    "residual-layernorm": "The length of the token vectors at each sub-layer: what comes in, what the sub-layer "
    "adds, what goes out.",
    "cross-attention": "Each row is a step of the decoder; the bright cell in it is the source word it looks at to "
    "write the next word.",
    "next-token": "Each row: a token, the one that follows it in the text, and the model's own first guess for it.",
    "kv-cache": "The new token's query against every key kept so far: the cache grows by one key and one value a step.",
    "quadratic-cost": "How the time and memory of one attention sub-layer grow as the text gets longer: the memory "
    "keeps one score for every pair of tokens, so twice the text needs four times as much; the sentence below says "
    "how much the time grew here.",
    "induction-heads": "The same random tokens twice: in the second half, the bright stripe beside the diagonal is "
    "the head looking at the token that came after the same token the first time.",
    "induction-circuit": "The previous-token head: each token looks at the one just before it, the first step of "
    "copying.",
}
PROB = st.column_config.ProgressColumn("probability", min_value=0.0, max_value=1.0, format="%.3f")
# The place the step's first chart goes, while a step is drawn on a projector; None once it is drawn. A ContextVar:
# each session's script runs in its own thread, so one session's slot is never another's.
_FIRST_CHART: ContextVar[DeltaGenerator | None] = ContextVar("lesson_first_chart", default=None)


@contextmanager
def first_chart_in(slot: DeltaGenerator) -> Iterator[Callable[[], bool]]:
    """While drawing a step, its first chart goes to `slot` (a container placed above the step's words), the rest
    where the step draws them: the picture opens the step, its captions and pickers follow. Yields a function that
    says whether a chart went to the slot (a step waiting for its question's answer draws none)."""
    token = _FIRST_CHART.set(slot)
    try:
        yield lambda: _FIRST_CHART.get() is None
    finally:
        _FIRST_CHART.reset(token)


def figure_place() -> DeltaGenerator | None:
    """Where the step's next figure goes: the slot `first_chart_in` set, the first time it is asked; else None, the
    page (as show_chart and data_table read it)."""
    slot = _FIRST_CHART.get()
    _FIRST_CHART.set(None)
    return slot


def chart(fig: Chart, key: str, *parts: object) -> None:
    """A lesson chart, through ui.widgets.show_chart: large type in projector mode, cell numbers only where they fit;
    the step's first one in the slot `first_chart_in` set, if any."""
    show_chart(fig, f"lesson_{key}", safe_filename("lesson", key, *parts), where=figure_place())


def side_by_side(n: int, spec: list[int] | None = None) -> list:
    """`n` columns, or `n` containers one below the other in projector mode (each chart the page's width)."""
    return [st.container() for _ in range(n)] if projector() else st.columns(spec or n)
