"""Play, pause and step through a page's steps (Generate's decoding steps, Training steps' snapshots).

A page draws its step widget and everything that follows the step inside `player`: a fragment that, while it plays,
Streamlit reruns by itself every PLAY_EVERY seconds, each rerun showing the next step. Only that fragment runs, from
what the page already computed and the caches hold: a playing session never runs the model. A fragment's timer is
set when the page runs, and only a run of the whole page drops it, so starting, pausing and reaching the last step
each rerun the page once; stepping while paused reruns the fragment alone.

The state of a player whose step widget has key `key`: `_{key}_playing` (True while it plays), `_{key}_at` (the
index of the step it plays) and `_{key}_acted` (a button was used in this run, which therefore shows that choice
rather than the next step). While it plays, the step widget is disabled and the player, not the widget, says which
step shows: a timer's rerun carries the widget's value as the browser last drew it, which on a busy server is a step
or two behind, and would otherwise send the playing back there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st

from ui import errors, state

PLAY_EVERY = 1.5  # seconds a step stays on screen while playing: time to point at the figure and say what changed
MOVES = ("first", "previous", "next", "last")
LABELS = {"first": "First", "previous": "Previous", "next": "Next", "last": "Last"}
ICONS = {
    "first": ":material/first_page:",
    "previous": ":material/chevron_left:",
    "play": ":material/play_arrow:",
    "pause": ":material/pause:",
    "next": ":material/chevron_right:",
    "last": ":material/last_page:",
}


def _playing(key: str) -> str:
    return f"_{key}_playing"


def _acted(key: str) -> str:
    return f"_{key}_acted"


def _at(key: str) -> str:
    return f"_{key}_at"


def playing(key: str) -> bool:
    """Whether the player of step widget `key` is playing."""
    return bool(st.session_state.get(_playing(key)))


def player(key: str, body: Callable[..., None], *args: object, every: float = PLAY_EVERY) -> None:
    """Run `body(*args)` as a fragment that reruns every `every` seconds while the player of step widget `key`
    plays (and only then: a paused page costs the server nothing). `body` draws `controls(key, options)`, then the
    step widget, then what the step shows; its `args` stay in the session, so they name what to draw (a Source),
    never hold an Analysis (ui.cache.held)."""
    state.fragment(body, run_every=every if playing(key) else None)(*args)


def _index(key: str, options: Sequence) -> int:
    """The index of the step shown: the one playing, else the step widget's value (the last when it is none)."""
    if playing(key) and _at(key) in st.session_state:
        return min(int(st.session_state[_at(key)]), len(options) - 1)
    value = st.session_state.get(key)
    return options.index(value) if value in options else len(options) - 1


def _stop() -> None:
    """Rerun the whole page: the run that drops a playing fragment's timer (only a page run declares timers)."""
    st.rerun()


@errors.safe  # a callback: runs outside the page's guard
def move(key: str, options: list, to: str) -> None:
    """First / Previous / Next / Last: show that step, and pause."""
    i = _index(key, options)
    target = {"first": 0, "previous": max(0, i - 1), "next": min(len(options) - 1, i + 1)}.get(to, len(options) - 1)
    st.session_state[key] = options[target]
    chosen(key)


@errors.safe  # a callback: runs outside the page's guard
def chosen(key: str) -> None:
    """The person chose a step with a button: it is shown, and playing stops there."""
    st.session_state[_acted(key)] = True
    if st.session_state.pop(_playing(key), False):
        _stop()


@errors.safe  # a callback: runs outside the page's guard
def slid(key: str) -> None:
    """The step widget's value changed: the person's choice while paused (shown as it is). While playing the widget
    is disabled, and a change is the browser's older value coming back with a timer's rerun: `advance` replaces it."""
    if not playing(key):
        st.session_state[_acted(key)] = True


@errors.safe  # a callback: runs outside the page's guard
def play_pause(key: str, options: list) -> None:
    """Play from the step shown (from the first when the last is shown), or pause."""
    st.session_state[_acted(key)] = True
    if playing(key):
        st.session_state[key] = options[_index(key, options)]  # the step played, whatever the widget last said
        st.session_state.pop(_playing(key))
        _stop()
    at = _index(key, options)
    at = 0 if at == len(options) - 1 else at
    st.session_state[key], st.session_state[_at(key)] = options[at], at
    st.session_state[_playing(key)] = True
    _stop()  # the page declares the fragment again, now with its timer


def advance(key: str, options: Sequence) -> None:
    """At the start of the player's run: while playing, a run nobody asked for (the timer's) shows the next step;
    at the last step the player stops."""
    if st.session_state.pop(_acted(key), False) or not playing(key):
        return
    i = min(_index(key, options) + 1, len(options) - 1)
    st.session_state[key], st.session_state[_at(key)] = options[i], i
    if i == len(options) - 1:  # the last step is shown now: stop, and drop the timer
        st.session_state.pop(_playing(key), None)
        _stop()


def controls(key: str, options: Sequence, noun: str = "step") -> None:
    """The step buttons of step widget `key` (values `options`, in order): First, Previous, Play or Pause, Next,
    Last, in one row above the widget, each labelled in words. Called first in the player's body: it also moves a
    playing player on (`advance`)."""
    options = list(options)
    advance(key, options)
    i, last = _index(key, options), len(options) - 1
    on = playing(key)
    row = st.container(horizontal=True, key=f"{key}_player")
    for to in MOVES[:2]:
        row.button(
            LABELS[to],
            key=f"{key}_{to}",
            icon=ICONS[to],
            disabled=i == 0,
            on_click=move,
            args=(key, options, to),
            help=f"Show the {to} {noun}",
        )
    row.button(
        "Pause" if on else "Play",
        key=f"{key}_play",
        icon=ICONS["pause" if on else "play"],
        on_click=play_pause,
        args=(key, options),
        help=f"Show each {noun} in turn, one every {PLAY_EVERY:g} s, stopping at the last"
        + ("" if i < last else f" (starts again from the first {noun})"),
    )
    for to in MOVES[2:]:
        row.button(
            LABELS[to],
            key=f"{key}_{to}",
            icon=ICONS[to],
            disabled=i == last,
            on_click=move,
            args=(key, options, to),
            help=f"Show the {to} {noun}",
        )
