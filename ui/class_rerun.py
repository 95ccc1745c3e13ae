"""The one place a live class touches Streamlit's private API: asking another session's page to rerun, from the
push's thread (live/push.py), as Streamlit's own "run on save" asks it. tests/test_class_rerun.py checks that
every call made here is in the pinned Streamlit, so an upgrade that drops one fails there, not silently here. It also
puts the class's own routes (the device cookie, the followers' stream) before Streamlit's in the server, and holds
the `CHANNEL` the teacher's page publishes its drawn view on and that stream reads."""

from __future__ import annotations

import functools
from collections.abc import Callable

from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime import Runtime
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData
from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState

from live.push import Channel

CHANNEL = Channel()  # every session of this server publishes and listens here (ui/class_stream.py serves it)


def this_run(fragment: bool = False) -> Callable[[bool], bool] | None:
    """A callable that reruns the page drawing now (`fragment`: the fragment drawing now) from any thread; called
    with True it reruns the whole page. None outside a page's run."""
    run_context = get_script_run_ctx()
    if run_context is None:
        return None
    rerun = ClientState()
    rerun.page_script_hash, rerun.query_string = run_context.page_script_hash, run_context.query_string
    if run_context.context_info:
        rerun.context_info.CopyFrom(run_context.context_info)
    if fragment and (fragment_id := ThreadState.get().fragment_id):
        rerun.fragment_id = fragment_id
    return functools.partial(rerun_session, run_context.session_id, rerun)


def rerun_session(session_id: str, rerun: ClientState, whole: bool = False) -> bool:
    """Ask session `session_id`'s rerun (`whole`: the page's, not the fragment's: asked again, a fragment's request
    may have been dropped with its fragment); False when it is gone. Asked on the session's event loop
    (`rerun_now`), where its browser's own requests are handled, not from the push's thread: AppSession replaces
    its script runner without a lock."""
    session = Runtime.instance().get_app_session(session_id) if Runtime.exists() else None
    if session is None:
        return False
    session._call_soon_on_event_loop(functools.partial(rerun_now, session, whole_page(rerun) if whole else rerun))
    return True


def rerun_now(session: AppSession, rerun: ClientState) -> None:
    """On `session`'s event loop: rerun its page. A run under way or about to start (a click's, whose callback has
    not run yet) is not stopped: a whole page's rerun joins it, as a rerun does with fastReruns off, keeping the
    click (with fastReruns on, Streamlit's default, AppSession stops that run and starts this one in its place,
    and the click is lost: a teacher's Ask among them, when the push's rerun comes before the click's run). A
    fragment's rerun never stops a run; Streamlit itself drops one whose fragment is gone."""
    runner = session._scriptrunner
    if runner is not None and not rerun.fragment_id and runner.request_rerun(_rerun_data(rerun)):
        return
    session.request_rerun(rerun)


def _rerun_data(rerun: ClientState) -> RerunData:
    """The whole page's rerun as a script runner takes it: no widget states of its own, so that those of a run it
    joins (a click's trigger among them) are kept."""
    return RerunData(
        query_string=rerun.query_string,
        page_script_hash=rerun.page_script_hash,
        context_info=rerun.context_info if rerun.HasField("context_info") else None,
    )


def whole_page(rerun: ClientState) -> ClientState:
    """The same rerun of the whole page: its fragment's id dropped, its page, address and browser kept."""
    page = ClientState()
    page.CopyFrom(rerun)
    page.ClearField("fragment_id")
    return page


def session_id() -> str | None:
    """The id of the session whose page is drawing now; None outside a page's run."""
    run_context = get_script_run_ctx()
    return None if run_context is None else run_context.session_id


def session_open(session_id: str) -> bool:
    """Whether session `session_id` still has its browser connected (a closed tab's is not)."""
    return Runtime.exists() and Runtime.instance().get_app_session(session_id) is not None


def serve_class_middleware() -> None:
    """Put ui/device_cookie.py's middleware and ui/class_stream.py's routes before Streamlit's own in the server
    `atlas app` starts: Streamlit sets no cookie of its own and a page cannot set one from Python, and a stream of
    events must not pass Streamlit's gzip (which buffers it)."""
    from starlette.middleware import Middleware
    from streamlit.web.server.starlette import starlette_app

    from ui.class_stream import ClassStream
    from ui.device_cookie import DeviceCookie

    streamlit_middleware = starlette_app.create_streamlit_middleware
    if getattr(streamlit_middleware, "with_class_middleware", False):
        return

    def with_class_middleware() -> list[Middleware]:
        return [Middleware(DeviceCookie), Middleware(ClassStream, channel=lambda: CHANNEL), *streamlit_middleware()]

    with_class_middleware.with_class_middleware = True
    starlette_app.create_streamlit_middleware = with_class_middleware
