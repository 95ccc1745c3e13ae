"""Head statistics: a sortable table of every head; the chosen one opens on Explore."""

from __future__ import annotations

import streamlit as st

from ui import charts, errors, sidebar, state
from ui.widgets import ATTENTION, HEAD, LAYER
from viz.stats import for_display

FMT = st.column_config.NumberColumn
COLUMNS = {
    "attention": st.column_config.TextColumn("attention"),
    "entropy_bits": FMT("entropy (bits)", format="%.3f", help="0 = each query looks at one key only"),
    "mean_distance": FMT("mean distance", format="%.2f", help="average |query − key| in positions"),
    "previous_token": FMT("previous token", format="%.3f", help="weight on the token just before"),
    "first_token": FMT("first token (sink)", format="%.3f", help="weight on position 0"),
    "diagonal": FMT("diagonal", format="%.3f", help="weight on the query's own position"),
}
STATS_PICK = state.session_key("stats_pick")  # the table's row to open on Explore


def _on_row() -> None:
    rows = st.session_state["stats_table"]["selection"]["rows"]
    if rows:
        st.session_state[STATS_PICK] = rows[0]


def body() -> None:
    st.title("Head statistics")
    ctx = sidebar.chosen()
    if ctx is None:
        return
    table = charts.head_statistics(ctx)
    st.caption("Averaged over the query tokens. Click a column header to sort, a row to pick the head.")
    st.dataframe(
        for_display(table),
        hide_index=True,
        column_config=COLUMNS,
        key="stats_table",
        on_select=_on_row,
        selection_mode="single-row",
        height=min(600, 35 * (len(table) + 1) + 3),
    )
    rows = list(range(len(table)))
    labels = [f"{r.label}, layer {r.layer + 1}, head {r.head + 1}" for r in table.itertuples()]
    state.keep_valid(STATS_PICK, rows, 0)
    pick = st.selectbox("Head to open", rows, key=STATS_PICK, format_func=lambda i: labels[i])
    if st.button("Open on Explore", key="open_head", type="primary"):
        row = table.iloc[pick]
        st.session_state.update({ATTENTION: row["attention"], LAYER: int(row["layer"]), HEAD: int(row["head"])})
        st.switch_page("views/explore.py")


errors.guarded(body)
