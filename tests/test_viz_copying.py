"""The Training steps page's picture of a run learning to copy: induction score and both copy losses."""

from __future__ import annotations

import numpy as np
import pytest

from viz.training import copying_curve


def test_the_copying_curve_draws_the_score_and_both_losses_on_their_own_axes() -> None:
    fig = copying_curve([100, 200, 300], [0.02, 0.4, 0.9], [7.7, 7.8, 7.7], [7.5, 3.0, 0.5], chosen=200)
    names = [t["name"] for t in fig.data]
    assert names == ["best induction score", "loss, first copy", "loss, second copy"]
    assert list(fig.data[0]["y"]) == [0.02, 0.4, 0.9] and fig.data[0]["yaxis"] in (None, "y")
    assert fig.data[2]["yaxis"] == "y2" and list(fig.data[2]["y"]) == [7.5, 3.0, 0.5]
    assert fig.layout.shapes[0]["x0"] == 200


def test_the_copying_curve_needs_every_value_at_every_step() -> None:
    with pytest.raises(ValueError, match="every step"):
        copying_curve([1, 2], [0.1], [7.0, 7.0], [7.0, 7.0])


@pytest.mark.parametrize("snapshots", [1, 5, 6, 7, 12, 13, 18])
def test_the_strip_of_snapshots_lays_out_any_number_of_them(snapshots: int) -> None:
    from viz.training import head_over_steps

    weights = [np.eye(3) for _ in range(snapshots)]
    fig = head_over_steps(weights, [f"step {i}" for i in range(snapshots)], ["a", "b", "c"], ["a", "b", "c"])
    domains = [fig.layout[f"yaxis{'' if i == 0 else i + 1}"].domain for i in range(snapshots)]
    assert all(0 <= low < high <= 1 for low, high in domains)


@pytest.mark.parametrize("snapshots", [6, 11, 13])
def test_the_strips_rows_leave_room_for_titles_and_ticks(snapshots: int) -> None:
    """Key labels only under the first column's bottom panel (a turned label ran into the next panel's first), and a
    row's two-line titles between the rows, clear of the panels above: the rows overlapped titles and ticks at
    1600 px."""
    from viz.training import STRIP_TITLE, head_over_steps

    labels = [f"step {100 * i:,} · loss {7 - i / 3:.3f}" for i in range(snapshots)]
    fig = head_over_steps([np.eye(3)] * snapshots, labels, ["a", "b", "c"], ["a", "b", "c"])
    axis = lambda kind, i: fig.layout[f"{kind}axis{'' if i == 0 else i + 1}"]
    cols = 6
    for i in range(snapshots):
        named = i == (snapshots - 1) // cols * cols
        assert (axis("x", i).showticklabels is not False) == named, i
    plot = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    for i, note in enumerate(fig.layout.annotations[cols:], start=cols):
        above = axis("y", i - cols).domain[0]  # the bottom of the panel above this one's title
        assert "<br>" in note.text and (above - note.y) * plot >= STRIP_TITLE, (i, note.y, above)
