"""Attention Atlas: see every attention head of our own small trained Transformer at work.

Run with `python -m atlas app` (this script, started warm: ui/serve.py) or `streamlit run app.py`. Checkpoints are
read from `checkpoints/` (or the folder in $ATLAS_CHECKPOINTS).
"""

from __future__ import annotations

import os
from functools import partial

import streamlit as st
import torch

from ui import (
    cache,
    class_live,
    class_session,
    errors,
    pages,
    phone_menu,
    sidebar,
    state,
    streamlit_private,
    widgets,
)

# One intra-op thread unless a pass is long: concurrent sessions already use the cores, and a short request waits
# on threads more than it gains from them (bench/trace_speed.py --threads); the model workers give a pass over
# hundreds of tokens more (analysis/worker.py, LONG_THREADS).
torch.set_num_threads(int(os.environ.get("ATLAS_TORCH_THREADS", "1")))

# Projector mode (`projector=1` in the URL, or the session's toggle) keeps the sidebar collapsed: the whole width for
# the charts. Streamlit empties the URL's values while a page picked from the menu runs its first time, and a page
# config that turns "collapsed" to "auto" opens the sidebar, so the session's value counts too.
on_projector = state.flag(st.query_params.get(widgets.PROJECTOR, "")) or widgets.projector()
st.set_page_config(
    page_title="Attention Atlas", layout="wide", initial_sidebar_state="collapsed" if on_projector else "auto"
)

cache.freeze_heap_once()
streamlit_private.refuse_cache_clears()  # a client's "clear cache" must not empty every session's caches
streamlit_private.bound_uploads()  # nor may its uploads fill the server's memory
streamlit_private.refuse_undecodable_widget_values()  # nor a forged widget value show a traceback

# Each page declares the widget values it keeps (ui.state); these three calls serve every declared one.
state.keep_state()
state.restore_from_url()
st.html(widgets.LAYOUT_CSS + phone_menu.MENU_CSS)  # one element a run: every page draws both
if widgets.projector():
    st.html(widgets.PROJECTOR_CSS)

# No page icons: a Material icon makes the browser fetch the tab icon from a CDN, and emoji need an emoji font.
# The menu sits at the top of every page, in the first view at any width; the sidebar keeps the model and text.
MENU = {
    section: [st.Page(p.script, title=p.title, url_path=p.url_path or None, default=not p.url_path) for p in group]
    for section, group in pages.sections().items()
}
page = st.navigation(MENU, position="top")
# The whole run is a class's page when it is the teacher's or a follower's (heavy work waits for it: analysis.lanes),
# its sidebar and class panel too: a heavy chunk let go while they draw holds the interpreter's lock they need.
with cache.page_running(class_session.leads_or_follows()):
    class_session.follow(page.url_path)  # a student following a class: the teacher's view and page, before any widget
    st.sidebar.title("Attention Atlas")
    phone_menu.draw(MENU)  # below 768 px, in place of the top menu Streamlit folds into the sidebar
    errors.guarded(partial(sidebar.sidebar, page.url_path))  # the page's own opening text, where it has one
    sidebar.projector_toggle()
    class_live.sidebar_start()
    if widgets.projector() and page.url_path not in sidebar.OWN_TEXT_PAGES:  # the sidebar folded away: its choice
        errors.guarded(sidebar.projector_summary)
    class_live.panel(page.url_path)  # a class's link, questions and following, above the page
    try:
        page.run()
        state.sync_url()
        class_session.publish(page.url_path)  # the teacher's view, to the class
    finally:  # a rerun asked of this page is over, however it ended (a follower's place goes to the next)
        class_session.run_over()
