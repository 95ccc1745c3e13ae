"""The reveal of a class's question: how the class answered, as a distribution, beside what the model does."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import plotly.graph_objects as go

from viz.labels import escape
from viz.style import HIGHLIGHT, finish

CLASS_COLOR = "#56B4E9"  # Okabe–Ito sky blue: the class's answers; the model's answer in HIGHLIGHT


def answers_figure(prompt: str, choices: tuple[str, ...], counts: list[int], model_answer: int) -> go.Figure:
    """One bar per choice (top to bottom in the order offered): how many students picked it, the model's answer in
    vermillion and named in its label, so the bar and the words both say it (not the colour alone)."""
    if len(counts) != len(choices) or not 0 <= model_answer < len(choices):
        raise ValueError(f"{len(counts)} counts and answer {model_answer + 1} do not fit {len(choices)} choices")
    # Plotly reads tick text as its own HTML: a token such as <b> is escaped to show as itself.
    labels = [escape(f"{c}  ◀ the model" if i == model_answer else c) for i, c in enumerate(choices)]
    total = sum(counts)
    fig = go.Figure(
        go.Bar(
            x=counts,
            y=list(range(len(choices))),
            customdata=labels,
            orientation="h",
            marker_color=[HIGHLIGHT if i == model_answer else CLASS_COLOR for i in range(len(choices))],
            text=[f"{n} ({n / total:.0%})" if total else "0" for n in counts],
            textposition="auto",
            hovertemplate="%{customdata}: %{x} students<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=list(range(len(choices))), ticktext=labels)
    fig.update_xaxes(title_text=f"students ({total} answered)", rangemode="tozero", dtick=1 if total <= 10 else None)
    return finish(fig, prompt, max(220, 60 + 32 * len(choices)))


GRID_ROW_PX = 50  # one layer's row of the head grid
SIDE_TITLE_PX = 22  # a side's title line (make_subplots' 16 px type)
GRID_MAX_PX = 300  # the whole grid: it fits a projector's (1024×768) and a phone's (390×844) first view


def _count(count: int) -> str:
    return str(count) if count else ""  # a head no one picked stays blank


def _blank(score: float) -> str:
    return ""  # a score reads as its shade (its value on hover); the model's head's in the side's title


def head_grid_figure(
    shape: tuple[int, int], counts: list[int], scores: tuple[float, ...], model_answer: int, title: str
) -> go.Figure:
    """A head question's reveal: the class's picks per head as a layer × head heatmap with counts (left) and each
    head's score as its shade (right), choice `layer * heads + head` in each; the model's head outlined and starred
    in both, so the mark is a shape and a sign, not a colour alone, and its score in the side's title. `scores` may
    be empty (the right side is left out).

    Short cell text (a count, a head without picks blank, ★ without a space) and titles of about 20 characters, so
    that the counts print at 1024 px, in projector mode too (viz.style.cell_numbers_width), and the two titles stay
    apart on a phone (390 px: about 150 px a side)."""
    from plotly.subplots import make_subplots

    n_layers, n_heads = shape
    n = n_layers * n_heads
    if len(counts) != n or (scores and len(scores) != n) or not 0 <= model_answer < n:
        raise ValueError(f"{len(counts)} counts, {len(scores)} scores and answer {model_answer + 1} do not fit {shape}")
    sides = 2 if scores else 1
    total = sum(counts)
    fig = make_subplots(
        rows=1,
        cols=sides,
        shared_yaxes=True,
        horizontal_spacing=0.06,
        subplot_titles=[f"picks ({total} answered)", f"score (★ {scores[model_answer]:.2f})" if scores else ""][:sides],
    )
    layer_of, head_of = divmod(model_answer, n_heads)
    heads, layers = list(range(1, n_heads + 1)), [f"layer {r + 1}" for r in range(n_layers)]

    def rows(values: Sequence[float], shown: Callable[[float], str]) -> tuple[list[list[float]], list[list[str]]]:
        return [[values[r * n_heads + c] for c in range(n_heads)] for r in range(n_layers)], [
            [("★" if r * n_heads + c == model_answer else "") + shown(values[r * n_heads + c]) for c in range(n_heads)]
            for r in range(n_layers)
        ]

    for col, (values, shown, scale, what) in enumerate(
        [(counts, _count, [[0, "#ffffff"], [1, CLASS_COLOR]], "students"), (scores, _blank, "Greys", "score")][:sides],
        start=1,
    ):
        z, text = rows(list(values), shown)
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=heads,
                y=layers,
                text=text,
                texttemplate="%{text}",
                textfont={"size": 11},
                colorscale=scale,
                showscale=False,
                xgap=1,
                ygap=1,
                hovertemplate=f"%{{y}}, head %{{x}}: %{{z}} {what}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.add_shape(
            type="rect",
            x0=head_of + 0.5,
            x1=head_of + 1.5,
            y0=layer_of - 0.5,
            y1=layer_of + 0.5,
            line={"color": HIGHLIGHT, "width": 3},
            row=1,
            col=col,
        )
        fig.update_xaxes(title_text="head", tickmode="array", tickvals=heads, row=1, col=col)
    fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=layers)
    fig.update_layout(showlegend=False)
    finish(fig, title, min(GRID_MAX_PX, 100 + GRID_ROW_PX * n_layers))
    # The sides' titles sit above the plot, in the top margin: it holds them below the chart's own title's lines.
    return fig.update_layout(margin={"t": fig.layout.margin.t + SIDE_TITLE_PX})
