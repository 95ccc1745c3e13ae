"""The table behind a figure, downloaded: a CSV and a JSON button side by side, under the figure they belong to.

The tables come from viz/ (the frames the notebook API returns too), so a download holds the figure's numbers with
layers, heads and positions counted from 1."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pandas as pd
import streamlit as st

# A spreadsheet reads a text cell that starts so as a formula (OWASP's "CSV injection"): a token such as `=1+2`.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

Table = pd.DataFrame | Callable[[], pd.DataFrame]  # a frame, or a function that builds it when a button is clicked


def _built(table: Table) -> pd.DataFrame:
    return table() if callable(table) else table


def csv_text(table: Table) -> str:
    """The table as CSV, without pandas' index. A text cell that a spreadsheet would run as a formula gets a `'`
    first, which spreadsheets show as text; numbers are written as they are."""
    frame = _built(table)
    text = frame.select_dtypes(include=["object", "string"]).columns
    safe = frame.assign(**{c: frame[c].map(_as_text) for c in text})
    return safe.to_csv(index=False)


def _as_text(cell: object) -> object:
    return f"'{cell}" if isinstance(cell, str) and cell.startswith(FORMULA_START) else cell


def json_text(table: Table) -> str:
    """The table as JSON: a list with one object per row (column → value), empty cells as null, every character
    written as itself."""
    return _built(table).to_json(orient="records", force_ascii=False)


def table_downloads(table: Table, stem: str, key: str, what: str) -> None:
    """Two buttons side by side: "CSV of {what}" and "JSON of {what}", which download `table` as `{stem}.csv` and
    `{stem}.json` (`stem` from viz.labels.safe_filename: no spaces or slashes). `key` prefixes the buttons' keys
    (`{key}_csv`, `{key}_json`). The files are written when a button is clicked, and clicking reruns nothing."""
    row = st.container(horizontal=True, key=f"{key}_downloads")
    for fmt, text, mime in (("csv", csv_text, "text/csv"), ("json", json_text, "application/json")):
        data = partial(text, table)
        label = f"{fmt.upper()} of {what}"
        row.download_button(label, data, f"{stem}.{fmt}", mime, key=f"{key}_{fmt}", on_click="ignore")
