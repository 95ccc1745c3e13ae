"""Forced decoding and the model's certainty: each token fed to the decoder beside the probability and rank the
model gave it (a table), and tokens shaded by that probability with the percentage written in each (a strip).

The rows are analysis.forced's `ForcedRow`s, read by their fields: viz needs no torch to draw them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import pandas as pd
import plotly.graph_objects as go

from viz.labels import display_piece, escape
from viz.style import COLORSCALE, Reflowed, cell_numbers_width, finish_layout, frozen_spec, unvalidated

PER_LINE = 8  # tokens a line of the strip: each cell keeps about 120 px at 1024 px, a piece and its % in 16 px type
LINE_PX = 52  # a line of cells: two lines of 15 px text and the air between lines
FONT = 15
# The strip on a phone: a 390 px screen's chart box (the main area's 1.5rem sides off), its cells' text in 13 px type,
# as many tokens a line as their pieces and percentages fit, at least NARROW_LEAST.
NARROW_BOX_PX = 340
NARROW_FONT = 13
NARROW_LINE_PX = 44
NARROW_LEAST = 2


class Row(Protocol):
    position: int
    piece: str
    probability: float
    rank: int
    top_piece: str
    top_probability: float


def percent(p: float) -> str:
    """A probability as people read it: `3 %`, `42 %`; below 1 %: `0.4 %` or `<0.1 %`, so nothing small reads 0."""
    if p >= 0.01:
        return f"{p * 100:.0f} %"
    return f"{p * 100:.1f} %" if p >= 0.001 else "<0.1 %"


def forced_frame(rows: Sequence[Row]) -> pd.DataFrame:
    """One line per token fed: its number from 1 (1: the first token after the start), the token, the model's
    probability for it (as a number and as text), its rank among the whole vocabulary (1: the model's own top
    choice there), and that top choice with its probability."""
    return pd.DataFrame(
        {
            "token #": [i + 1 for i in range(len(rows))],
            "token": [display_piece(r.piece) for r in rows],
            "probability": [r.probability for r in rows],
            "as %": [percent(r.probability) for r in rows],
            "rank": [r.rank for r in rows],
            "model's choice": [display_piece(r.top_piece) for r in rows],
            "its probability": [percent(r.top_probability) for r in rows],
        }
    )


def probability_strip(
    rows: Sequence[Row],
    title: str,
    per_line: int = PER_LINE,
    font: int = FONT,
    line_px: int = LINE_PX,
    colorbar: bool = True,
) -> go.Figure:
    """The tokens in reading order, `per_line` a line, each cell shaded by the probability the model gave it and
    its percentage written under the token (`_strip_spec`)."""
    spec = _strip_spec(rows, title, per_line, font, line_px, colorbar)
    return unvalidated(spec["data"], spec["layout"])


def _strip_spec(
    rows: Sequence[Row], title: str, per_line: int, font: int, line_px: int, colorbar: bool
) -> dict[str, Any]:
    """The strip's series and layout as plain dicts (what `unvalidated` builds the Figure of). The tokens in reading
    order, `per_line` a line, each cell shaded by the probability the model gave it
    (cividis: dark is unsure, light is sure) and the percentage written under the token in `font` px type:
    readable without colour. Lines `line_px` tall; `colorbar`: the scale beside them (a phone's strip leaves it to
    the numbers and the caption). Hover: the token's number from 1, the token, its probability and rank, and the
    model's own choice there."""
    if not rows:
        raise ValueError("no tokens to shade: the strip needs at least one row")
    lines = math.ceil(len(rows) / per_line)
    z: list[list[float | None]] = [[None] * per_line for _ in range(lines)]
    text = [[""] * per_line for _ in range(lines)]
    hover = [[""] * per_line for _ in range(lines)]
    for i, r in enumerate(rows):
        y, x = divmod(i, per_line)
        piece = escape(display_piece(r.piece))  # Plotly renders tags: a piece such as <s> is escaped
        z[y][x] = r.probability
        text[y][x] = f"{piece}<br>{percent(r.probability)}"
        choice = escape(display_piece(r.top_piece))
        hover[y][x] = (
            f"token {i + 1}: {piece}<br>probability {percent(r.probability)}, rank {r.rank}"
            f"<br>the model's choice: {choice} ({percent(r.top_probability)})"
        )
    heatmap = {
        "type": "heatmap",
        "z": z,
        "text": text,
        "texttemplate": "%{text}",
        "textfont": {"size": font},
        "customdata": hover,
        "hovertemplate": "%{customdata}<extra></extra>",
        "colorscale": COLORSCALE,
        "zmin": 0.0,
        "zmax": 1.0,
        "xgap": 3,
        "ygap": 3,
        # A one-line strip is about 60 px tall: two ticks, which do not print on top of each other, and no title,
        # which they printed over (the caption says light is sure, dark unsure)
        "colorbar": {
            "title": {"text": "probability" if lines > 1 else ""},
            "tickformat": ".0%",
            "tickvals": [0.0, 0.5, 1.0] if lines > 1 else [0.0, 1.0],
            "len": 1.0,
            "thickness": 12,
        },
        "showscale": colorbar,
    }
    layout = finish_layout(title, 50 + line_px * lines)  # 50: finish_layout's margins above and below the plot
    layout["xaxis"] = {"visible": False, "range": [-0.5, per_line - 0.5], "fixedrange": True}
    layout["yaxis"] = {"visible": False, "autorange": "reversed", "fixedrange": True}
    return {"data": [heatmap], "layout": layout}


def probability_strips(rows: Sequence[Row], title: str) -> Reflowed:
    """The strip as a screen of a laptop or a projector shows it (PER_LINE tokens a line), and as a phone's does:
    the most tokens a line (PER_LINE at most, NARROW_LEAST at least) whose cell text fits NARROW_BOX_PX
    (viz.style.cell_numbers_width), in NARROW_FONT type, without the colour bar."""
    narrow = probability_strip(rows, title, _narrow_per_line(rows, title), NARROW_FONT, NARROW_LINE_PX, colorbar=False)
    return Reflowed(probability_strip(rows, title), narrow)


def _narrow_per_line(rows: Sequence[Row], title: str) -> int:
    """The phone's strip's tokens a line, measured on its plain dicts: no Figure built for each one tried."""
    for per_line in range(PER_LINE, NARROW_LEAST - 1, -1):
        if cell_numbers_width(_strip_spec(rows, title, per_line, NARROW_FONT, NARROW_LINE_PX, False)) <= NARROW_BOX_PX:
            return per_line
    return NARROW_LEAST


def frozen_strips(rows: Sequence[Row], title: str) -> Reflowed:
    """`probability_strips`, each strip `frozen` (viz.style.frozen_spec: no Figure is built for either)."""
    wide = _strip_spec(rows, title, PER_LINE, FONT, LINE_PX, True)
    narrow = _strip_spec(rows, title, _narrow_per_line(rows, title), NARROW_FONT, NARROW_LINE_PX, False)
    return Reflowed(frozen_spec(wide["data"], wide["layout"]), frozen_spec(narrow["data"], narrow["layout"]))
