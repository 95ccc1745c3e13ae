"""Play, pause and step (ui.player) on Generate's decoding steps and Training steps' snapshots: each run of a playing
player that nobody asked for (the timer's) shows the next step, and it stops by itself at the last."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_training_view import TEXT, with_snapshots  # noqa: F401 (a fixture)

from ui import player, state

APP = str(Path(__file__).resolve().parents[1] / "app.py")
KEY = "gen_step"


@pytest.fixture
def generate(good_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., AppTest]:
    """Generate on the tiny language model, writing `tokens` tokens greedily: `tokens` decoding steps."""
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))

    def make(tokens: int = 4) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params.update(model="lm-tiny", text="the cat sat", gen_tokens=str(tokens), gen_mode="greedy")
        at.run()
        return ok(at.switch_page("views/generate.py").run())

    return make


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def step(at: AppTest) -> int:
    """The step the slider shows, checked against the step the attention row's title names."""
    value = at.slider(key=KEY).value
    charts = {el.key: json.loads(el.proto.spec) for el in at.get("plotly_chart")}
    assert f"step {value}," in charts["gen_self_row"]["layout"]["title"]["text"].replace("<br>", " ")
    return value


def button(at: AppTest, name: str):
    return at.button(key=f"{KEY}_{name}")


def test_the_step_buttons_move_the_slider_and_stop_at_the_ends(generate) -> None:
    at = generate()
    assert step(at) == 4 and button(at, "next").disabled and button(at, "last").disabled  # it opens on the last
    assert [button(at, n).label for n in ("first", "previous", "play", "next", "last")] == [
        "First",
        "Previous",
        "Play",
        "Next",
        "Last",
    ]
    button(at, "first").click().run()
    assert step(ok(at)) == 1 and button(at, "previous").disabled and button(at, "first").disabled
    button(at, "next").click().run()
    button(at, "next").click().run()
    assert step(ok(at)) == 3
    button(at, "previous").click().run()
    assert step(ok(at)) == 2 and at.query_params[KEY] == "2"
    button(at, "last").click().run()
    assert step(ok(at)) == 4


def test_playing_shows_each_step_in_turn_and_stops_at_the_last(generate) -> None:
    at = generate()
    button(at, "first").click().run()
    button(at, "play").click().run()  # the click shows the step it was on, and starts the timer
    assert step(ok(at)) == 1 and button(at, "play").label == "Pause"
    seen = []
    for _ in range(5):  # the timer's reruns
        at.run()
        seen.append(step(ok(at)))
    assert seen == [2, 3, 4, 4, 4], "one step a rerun, and no further than the last"
    assert button(at, "play").label == "Play", "stopped by itself"


def test_play_at_the_last_step_starts_again_from_the_first_and_pause_holds_the_step(generate) -> None:
    at = generate()
    button(at, "play").click().run()  # on the last step: from the first
    assert step(ok(at)) == 1
    at.run()
    assert step(ok(at)) == 2
    button(at, "play").click().run()  # Pause
    assert step(ok(at)) == 2 and button(at, "play").label == "Play"
    at.run()
    at.run()
    assert step(ok(at)) == 2, "a paused player does not move"


def test_choosing_a_step_while_playing_pauses_there(generate) -> None:
    at = generate()
    button(at, "first").click().run()
    button(at, "play").click().run()
    button(at, "next").click().run()
    assert step(ok(at)) == 2 and button(at, "play").label == "Play"
    at.slider(key=KEY).set_value(4).run()  # paused, the slider shows the step chosen
    assert step(ok(at)) == 4


def test_while_playing_the_slider_is_disabled_and_an_older_value_from_the_browser_does_not_move_it_back(
    generate,
) -> None:
    """A timer's rerun carries the slider's value as the browser last drew it, a step or two behind on a busy
    server: the player keeps its own step."""
    at = generate(tokens=6)
    button(at, "first").click().run()
    button(at, "play").click().run()
    at.run()
    at.run()
    assert step(ok(at)) == 3 and at.slider(key=KEY).disabled
    at.session_state[KEY] = 2  # the browser's stale value, brought by the timer's rerun
    at.run()
    assert step(ok(at)) == 4 and button(at, "play").label == "Pause"
    at.session_state[KEY] = 3
    button(at, "play").click().run()  # Pause, in the run that brought a stale value
    assert step(ok(at)) == 4 and button(at, "play").label == "Play" and not at.slider(key=KEY).disabled


def test_only_a_playing_player_asks_streamlit_to_rerun_it(generate, monkeypatch: pytest.MonkeyPatch) -> None:
    """A paused page costs the server nothing: the fragment's timer is declared only while it plays."""
    asked: list[float | None] = []
    declare = state.fragment

    def recording(body, *, run_every=None):
        asked.append(run_every)
        return declare(body, run_every=run_every)

    monkeypatch.setattr(state, "fragment", recording)
    at = generate()
    assert asked and set(asked) == {None}
    button(at, "play").click().run()
    assert asked[-1] == player.PLAY_EVERY
    button(at, "play").click().run()
    assert asked[-1] is None


def test_training_steps_play_through_the_snapshots_and_stop_at_the_last(
    with_snapshots: Path,  # noqa: F811 (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(with_snapshots))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(model="translate-tiny", text=TEXT)
    at.run()
    ok(at.switch_page("views/training.py").run())

    def shown() -> int:
        value = at.select_slider(key="step").value
        charts = {el.key: json.loads(el.proto.spec) for el in at.get("plotly_chart")}
        assert f"at step {value:,} ·" in charts["training_head"]["layout"]["title"]["text"].replace("<br>", " ")
        return value

    assert shown() == 5  # the middle snapshot
    at.button(key="step_first").click().run()
    assert shown() == 0 and at.button(key="step_previous").disabled
    at.button(key="step_play").click().run()
    assert shown() == 0 and at.button(key="step_play").label == "Pause"
    seen = []
    for _ in range(3):
        at.run()
        seen.append(shown())
    assert seen == [5, 20, 20] and at.button(key="step_play").label == "Play"
    assert at.query_params["step"] == "20"
