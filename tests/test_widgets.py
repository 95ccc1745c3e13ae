"""ui.widgets.show_chart: a frozen figure goes to st.plotly_chart as it is, and the browser receives what it would
have received for the Figure (a follower's page draws cached charts without copying them)."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest


def _page(projector: bool) -> None:  # an AppTest script: names are imported inside
    import json

    import numpy as np
    import streamlit as st

    from ui.widgets import PROJECTOR, show_chart
    from viz.heads import head_heatmap, heads_grid, outlined
    from viz.style import for_projector, frozen, thaw

    st.session_state[PROJECTOR] = projector
    rng = np.random.default_rng(0)
    weights = rng.random((6, 6)) / 6
    pieces = [f"t{i}" for i in range(6)]
    head = frozen(head_heatmap(weights, pieces, pieces, "one head"))
    grid = outlined(frozen(heads_grid(rng.random((2, 3, 6, 6)) / 6, "all heads")), (1, 2))
    before = json.dumps([head, grid])
    for name, spec in (("head", head), ("grid", grid)):
        fig = thaw(spec)
        st.plotly_chart(for_projector(fig) if projector else fig, key=f"{name}_figure")
        show_chart(spec, f"{name}_frozen", name)
    st.session_state["unchanged"] = json.dumps([head, grid]) == before


def _drawn(projector: bool) -> tuple[dict[str, dict], bool]:
    at = AppTest.from_function(_page, args=(projector,), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    specs = {chart.proto.id and chart.key: json.loads(chart.proto.spec) for chart in at.get("plotly_chart")}
    return specs, at.session_state["unchanged"]


def test_a_frozen_figure_is_drawn_as_its_figure_and_left_unchanged() -> None:
    for projector in (False, True):
        specs, unchanged = _drawn(projector)
        assert set(specs) == {"head_figure", "head_frozen", "grid_figure", "grid_frozen"}
        for name in ("head", "grid"):
            assert specs[f"{name}_frozen"] == specs[f"{name}_figure"], (name, projector)
        assert specs["head_frozen"]["data"][0]["z"]["bdata"]  # the matrix still travels as a typed array
        assert unchanged  # the cached spec is shared by every session: drawing it changes nothing


def test_a_small_table_reads_a_frame_an_arrow_table_and_rows_alike() -> None:
    import pandas as pd
    import pyarrow as pa

    from ui.widgets import table_rows

    frame = pd.DataFrame({"rank": [1, 2], "token": ["▁the", "<b>"], "probability": [0.5, 0.25]})
    rows = [(1, "▁the", 0.5), (2, "<b>", 0.25)]
    for given in (frame, pa.Table.from_pandas(frame, preserve_index=False), (list(frame.columns), rows)):
        columns, records = table_rows(given)
        got = list(records)
        assert columns == ["rank", "token", "probability"] and got == rows
        assert all(type(a) is type(b) for row, want in zip(got, rows, strict=True) for a, b in zip(row, want))
