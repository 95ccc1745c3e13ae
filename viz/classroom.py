"""The reveal of a class's question: how the class answered, as a distribution, beside what the model does."""

from __future__ import annotations

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
