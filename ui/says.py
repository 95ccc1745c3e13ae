"""The sentence that says what to look at in a page's first figure, drawn right under it: on a projector and on a
phone it is in the first view with the figure (tests/test_browser_first_figure.py finds it by its key)."""

from __future__ import annotations

import streamlit as st

from ui.widgets import DeltaGenerator

KEY = "figure_says"  # one a page: the browser test reads `.st-key-figure_says`


def figure_says(text: str, where: DeltaGenerator | None = None) -> None:
    """`text` (Markdown: escape a person's words with ui.markdown.literal) as a caption in its own keyed container
    in `where` (a container or column; default: the page), under the figure drawn there just before."""
    with (where if where is not None else st).container(key=KEY):
        st.caption(text)
