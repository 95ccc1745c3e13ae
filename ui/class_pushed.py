"""A class's view pushed to its followers' pages as the teacher's page drew it (live/push.py's `Channel`).

The teacher's page keeps the charts its run drew (ui/widgets.py's `show_chart` writes them under CHARTS_DRAWN) and,
when its view moves, `publish` encodes them once, with the view's version, page and text, and every follower's
stream on this server receives those bytes (ui/class_stream.py). A follower's page holds one component (`show`,
ui/class_pushed/index.html) that draws a pushed view newer than the one its own run drew, on the same page, with
plotly.js, and folds to nothing once its page's rerun (live/push.py's `Followers`) draws that view itself. No
figure is pushed while a question is open (the class predicts before it sees): the teacher's peek stays the
teacher's. A page change is not pushed: the follower's rerun takes it there.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import streamlit as st
import streamlit.components.v1 as components

from live.push import message
from ui import class_stream, widgets
from viz.style import frozen

FOLDER = Path(__file__).with_suffix("")  # ui/class_pushed/index.html


@functools.cache
def _component():
    """The component, declared at its first use in a page's run: `atlas app` imports the page's modules for its warm
    first run before Streamlit's runtime exists, and a component declared then is unknown to the server (404)."""
    return components.declare_component("class_pushed", path=str(FOLDER))


def record(teacher: bool) -> None:
    """At the start of a page's full run: a class's teacher's page keeps the charts it draws (a fragment's run adds
    its own to those of the page's last run); any other page keeps none."""
    if teacher:
        st.session_state[widgets.CHARTS_DRAWN] = {}
    else:
        st.session_state.pop(widgets.CHARTS_DRAWN, None)


def publish(code: str, version: int, page: str, text: str, held: bool) -> int:
    """The teacher's page showed `version` of class `code`: its charts (none when `held`, a question open) go to
    every follower's stream on this server. Returns how many streams were given them."""
    charts: Mapping[str, Any] = st.session_state.get(widgets.CHARTS_DRAWN) or {}
    figures = [] if held else [(key, _spec(fig)) for key, fig in charts.items()]
    return class_stream.CHANNEL.publish(code, version, message(version, page, text, figures))


def _spec(fig: go.Figure | dict[str, Any]) -> dict[str, Any]:
    """A chart as plotly.js takes it: a cached chart is already that (`frozen`); any other is encoded here once."""
    return fig if isinstance(fig, dict) else frozen(fig)


def show(code: str, page: str, drawn: int) -> None:
    """A follower's page drawn at version `drawn` of class `code`, on `page`: the pushed view of a later version
    of this page, the moment it arrives."""
    _component()(code=code, page=page, drawn=drawn, key="class_pushed", default=None)
