"""viz.style.frozen builds the JSON plotly.js receives without Plotly's to_dict + JSON round trip: the same dict,
for the app's own figures and for values the round trip writes in its own way (NaN, NumPy scalars, tuples, keys
Plotly leaves as they are, a template of its own), and one shared default template that nothing changes."""

from __future__ import annotations

import copy
import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from viz.heads import head_heatmap, heads_grid, select_head, swap_head
from viz.style import for_projector, frozen, thaw, unvalidated


def round_trip(fig: go.Figure) -> dict:
    return json.loads(pio.to_json(fig, validate=False))


RNG = np.random.default_rng(0)
WEIGHTS = RNG.dirichlet(np.ones(5), size=(2, 3, 5)).astype(np.float32)  # layers × heads × queries × keys
PIECES = ["▁The", "▁cat", "▁sat", "<0xC8>", "."]


def odd_values() -> go.Figure:
    """A figure of the values the round trip writes in its own way."""
    z = np.array([[1.0, np.nan], [np.inf, -np.inf]])
    data = [
        {"type": "heatmap", "z": z, "x": ("a", "b"), "y": [np.int64(1), np.float32(2.5)], "zmax": np.float64(np.nan)},
        {"type": "scatter", "x": np.arange(3, dtype=np.int64), "y": [float("nan"), 1.0, np.nan], "mode": "lines"},
        {"type": "scatter", "x": [[1, 2], (3, 4)], "y": np.array([True, False, True]), "customdata": [np.arange(2)]},
    ]
    layout = {"xaxis": {"range": np.array([0.0, 2.0])}, "meta": {"tile": (3, 4), "n": np.uint8(7)}, "title": "x"}
    return unvalidated(data, layout)


FIGURES = {
    "head heatmap": lambda: head_heatmap(WEIGHTS[0, 0], PIECES, PIECES),
    "grid of heads": lambda: heads_grid(WEIGHTS),
    "grid, a head selected": lambda: heads_grid(WEIGHTS, selected=(2, 3)),
    "odd values": odd_values,
    "a template of its own": lambda: go.Figure(go.Bar(x=[1, 2], y=[3, 4]), layout={"template": "plotly_dark"}),
    "no template": lambda: go.Figure(go.Bar(x=[1], y=[2]), layout={"template": None}),
    "a trace's own uid": lambda: go.Figure(go.Scatter(y=[1, 2], uid="kept-out")),
    "validated, with frames": lambda: go.Figure(go.Scatter(y=[1, 2]), frames=[go.Frame(data=[go.Scatter(y=[2, 1])])]),
}


@pytest.mark.parametrize("name", FIGURES)
def test_frozen_is_what_plotly_writes(name: str) -> None:
    fig = FIGURES[name]()
    assert frozen(fig) == round_trip(fig)


def test_frozen_keeps_the_figure_as_it_was() -> None:
    fig = odd_values()
    before = copy.deepcopy(fig.to_plotly_json())
    frozen(fig)
    assert json.dumps(fig.to_plotly_json(), default=str) == json.dumps(before, default=str)


def test_the_shared_template_stays_as_plotly_writes_it() -> None:
    """Every frozen figure on the default template holds one dict: drawing, restyling and swapping heads of one of
    them leaves it, and so every other, unchanged."""
    first, second = frozen(head_heatmap(WEIGHTS[0, 0], PIECES, PIECES)), frozen(heads_grid(WEIGHTS))
    assert first["layout"]["template"] is second["layout"]["template"]
    pristine = round_trip(go.Figure())["layout"]["template"]
    for_projector(thaw(first)).update_layout(template={"layout": {"font": {"size": 40}}})
    for_projector(select_head(second, (1, 1))).layout.template.layout.paper_bgcolor = "red"
    swap_head(first, WEIGHTS[1, 2], "another head")
    assert first["layout"]["template"] == pristine
