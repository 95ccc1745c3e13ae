"""The one adapter to Streamlit's private API (ui/streamlit_private.py): the calls it makes are in the pinned Streamlit,
a fragment's rerun asked again is its whole page's, and a page's rerun joins a run under way without losing its
click."""

from __future__ import annotations

from streamlit.proto.ClientState_pb2 import ClientState

from ui import streamlit_private


def test_the_streamlit_calls_the_push_makes_are_there() -> None:
    """ui/streamlit_private.py reruns a session as Streamlit's run-on-save does, through calls its pinned version has: a
    Streamlit upgrade that drops one fails here, not silently in the watching thread."""
    import dataclasses
    import inspect

    from streamlit.runtime import Runtime
    from streamlit.runtime.app_session import AppSession
    from streamlit.runtime.scriptrunner_utils.script_run_context import FragmentThreadState, ThreadState

    assert list(inspect.signature(Runtime.get_app_session).parameters) == ["self", "session_id"]
    assert list(inspect.signature(AppSession.request_rerun).parameters) == ["self", "client_state"]
    assert callable(AppSession._call_soon_on_event_loop) and "_scriptrunner" in AppSession.__init__.__code__.co_names
    assert "fragment_id" in {f.name for f in dataclasses.fields(FragmentThreadState)} and callable(ThreadState.get)
    assert streamlit_private.rerun_session("no such session", ClientState()) is False  # no server: no rerun
    assert streamlit_private.session_open("no such session") is False
    from streamlit.web.server.starlette import starlette_app  # the device cookie goes before its middleware

    assert "create_streamlit_middleware" in starlette_app.create_starlette_app.__code__.co_names
    assert "create_streamlit_middleware" in starlette_app.App._build_starlette_app.__code__.co_names


def test_a_fragments_rerun_asked_again_is_its_whole_pages() -> None:
    rerun = ClientState(page_script_hash="h", query_string="class=ABCDE", fragment_id="f1")
    rerun.context_info.timezone = "Asia/Tokyo"
    page = streamlit_private.whole_page(rerun)
    assert page.fragment_id == "" and rerun.fragment_id == "f1"  # the follower's own request is kept for next time
    assert (page.page_script_hash, page.query_string, page.context_info.timezone) == ("h", "class=ABCDE", "Asia/Tokyo")


class _Runner:
    """A script runner with a run under way (`takes`), or one that has stopped and refuses a rerun."""

    def __init__(self, takes: bool) -> None:
        self.takes, self.asked = takes, []

    def request_rerun(self, data) -> bool:
        self.asked.append(data)
        return self.takes


class _Session:
    """What `_rerun_now` reads of an AppSession: its runner (None: no run), its own `request_rerun`."""

    def __init__(self, runner: _Runner | None) -> None:
        self._scriptrunner, self.asked = runner, []

    def request_rerun(self, client_state) -> None:
        self.asked.append(client_state)


def test_a_whole_pages_rerun_joins_a_run_under_way_and_keeps_its_click() -> None:
    """With fastReruns (Streamlit's default) AppSession.request_rerun stops a run under way and starts the asked one
    in its place: a click whose run had not started yet (its callback not run) was lost, a teacher's Ask among them.
    The push's rerun joins that run instead, carrying no widget states, so the click's are kept when they merge."""
    from streamlit.proto.WidgetStates_pb2 import WidgetStates
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData, ScriptRequests

    page = ClientState(page_script_hash="h", query_string="class=ABCDE")
    runner = _Runner(takes=True)
    session = _Session(runner)
    streamlit_private.rerun_now(session, page)
    assert session.asked == [] and len(runner.asked) == 1  # joined the run, nothing stopped
    joined = runner.asked[0]
    assert (joined.page_script_hash, joined.query_string, joined.widget_states) == ("h", "class=ABCDE", None)

    click = WidgetStates()
    click.widgets.add(id="class_ask", trigger_value=True)
    requests = ScriptRequests()
    requests.request_rerun(RerunData(widget_states=click))  # the click's rerun, waiting for its run to start
    requests.request_rerun(joined)
    merged = requests._rerun_data.widget_states
    assert [(w.id, w.trigger_value) for w in merged.widgets] == [("class_ask", True)]


def test_a_rerun_with_no_run_under_way_or_of_a_fragment_is_asked_of_the_session() -> None:
    page = ClientState(page_script_hash="h")
    idle = _Session(None)
    streamlit_private.rerun_now(idle, page)
    assert idle.asked == [page]  # no run: the session starts one
    ended = _Session(_Runner(takes=False))
    streamlit_private.rerun_now(ended, page)
    assert ended.asked == [page]  # its runner has stopped: a new one
    fragment = ClientState(page_script_hash="h", fragment_id="f1")
    running = _Session(_Runner(takes=True))
    streamlit_private.rerun_now(running, fragment)
    assert running.asked == [fragment] and running._scriptrunner.asked == []  # a fragment's rerun stops no run
