"""The page menu on a screen narrower than 768 px (a phone), drawn in the sidebar by app.py on every page.

Below 768 px Streamlit folds its top menu into the sidebar as one <ul> that holds each section as a <div> (a heading
and its <li>s) beside the first section's <li>s: invalid list markup that axe-core reports (serious "list" and
"listitem") and no option of st.navigation changes. There this menu takes its place: the same pages, in the same
sections (ui.pages), as page links under real headings. MENU_CSS shows one menu at each width: Streamlit's top menu
from 768 px up, this one below, where Streamlit's folded one is hidden (display: none: out of what a screen reader
reads and out of the Tab order too); tests/test_browser_phone_menu.py trips when Streamlit's markup or breakpoint
moves.

Two things Streamlit's folded menu did that a page link cannot: it closed the sidebar once a page was chosen (no page
can close the sidebar: a person closes it with its button or a tap beside it), and it told a screen reader which page
is shown (aria-current; a page link marks it with a background and a bold label only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st

from ui.markdown import literal

KEY = "phone_menu"
# 768 px: where Streamlit's frontend folds the top menu (a window.innerWidth below its `md` breakpoint, 768px).
MENU_CSS = f"""<style>
@media (min-width: 768px) {{
  /* its wrapper too: an empty element would still take a gap between the sidebar's elements */
  [data-testid="stLayoutWrapper"]:has(> .st-key-{KEY}), .st-key-{KEY} {{ display: none; }}
}}
@media (max-width: 767.98px) {{ [data-testid="stSidebarNav"] {{ display: none; }} }}
/* a section's heading in the size of Streamlit's own */
.st-key-{KEY} h2 {{ font-size: 0.875rem; font-weight: 600; padding: 0.75rem 0 0.25rem 0; }}
</style>"""


def draw(menu: Mapping[str, Sequence[object]]) -> None:
    """The sidebar's menu of every page of `menu` (st.navigation's sections of `st.Page`s: "" for the links without
    a heading), shown below 768 px only: MENU_CSS, which app.py draws with the layout's, hides it elsewhere."""
    with st.sidebar.container(key=KEY):
        for section, group in menu.items():
            if section:
                st.header(literal(section), anchor=False)  # h2: below the sidebar's title, "Attention Atlas"
            for page in group:
                st.page_link(page)
        st.divider()  # the menu apart from the model and the text below it, as Streamlit's own line sets it
