"""The one place the app touches Streamlit's private API (its modules other than `streamlit`,
`streamlit.components.v1` and `streamlit.testing.v1`, and its objects' `_` attributes), so that a Streamlit upgrade
has one file to read; tests/test_streamlit_private.py holds every other file to that, and tests/test_class_rerun.py
checks that the calls made here are in the pinned Streamlit. `atlas app` starting Streamlit's server as its own
command line does (ui/serve.py, streamlit.web) is the one other use.

What it does with it:
- **the run's context**: which session's page is drawing (`session_id`), whether a fragment reruns alone
  (`fragment_alone`), the run's yield check a heavy wait gives way at (`run_yield_check`), and the types the pages
  name (`DeltaGenerator`, `PlotlyState`, `DeletedFile`);
- **a live class**: asking another session's page to rerun, from the push's thread (live/push.py), as Streamlit's
  own "run on save" asks it (`this_run`, `rerun_session`), whether a session's browser is still connected, and the
  class's own routes (the device cookie, the followers' stream) before Streamlit's in the server;
- **the guards**: what a browser may not do to the server (below).

Streamlit answers a client's `clear_cache` message (the "Clear cache" menu item, or any client on the network
sending it) by clearing `st.cache_data` and `st.cache_resource` for the whole server: every other session's
analyses and figures, and the model workers. The server of a class keeps those for everyone, so the message
clears only the sending session's own widget state, as a reload would.

Streamlit keeps every file a client PUTs to its upload endpoint (`/_stcore/upload_file/<session>/<id>`) in memory
until that session ends, whatever widget asked for it: fifteen requests of 100 MB held 1.5 GB. The app reads an
upload as soon as it arrives and forgets it (ui.widgets.trace_uploader, `forget_upload`), so the server holds at
most UPLOADS_PER_SESSION bytes of one session's uploads and UPLOADS_IN_ALL of everyone's: past either, the oldest
held files go first (a file still held after newer ones arrived is one no box of the app claimed).

A client may send any kind of value for any widget (a JSON object for a radio), and Streamlit hands it to the
widget's own decoder, which fails with a traceback before any of the app's code runs. A value its decoder fails on
is dropped, as is one Streamlit could not write back in the kind it came in (a boolean for a radio): the widget
keeps the value it had, as if the message had not named it. (The kind alone cannot tell: the browser itself sends
an int for a whole-number box that declares a float.)
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Callable

from streamlit.delta_generator import DeltaGenerator as DeltaGenerator  # the pages' type of a place to draw
from streamlit.elements.plotly_chart import PlotlyState as PlotlyState  # what a chart's selection returns
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime import Runtime
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData
from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState, get_run_yield_check
from streamlit.runtime.state.session_state import Serialized, WStates
from streamlit.runtime.uploaded_file_manager import DeletedFile as DeletedFile  # an upload the bound let go
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

log = logging.getLogger("attention_atlas")
# The largest trace file an uploader takes: Streamlit refuses a larger one itself (its own message), and
# .streamlit/config.toml's server.maxUploadSize is the same number for the whole server. What a trace takes as .npz,
# as JSON and parsed, by length and model: python bench/trace_size.py.
MAX_UPLOAD_MB = 100


# ---------------------------------------------------------------------------------------------------------------
# the run's context


def session_id() -> str | None:
    """The id of the browser session whose page is drawing now; None outside a page's run (a model worker's
    thread, a notebook)."""
    run_context = get_script_run_ctx(suppress_warning=True)
    return None if run_context is None else run_context.session_id


def in_a_page() -> bool:
    """Whether this thread is drawing a session's page."""
    return get_script_run_ctx(suppress_warning=True) is not None


def fragment_alone() -> bool:
    """Whether this run is a fragment's rerun alone, not its page's whole run."""
    run_context = get_script_run_ctx(suppress_warning=True)
    return run_context is not None and bool(run_context.fragment_ids_this_run)


def run_yield_check() -> Callable[[], None]:
    """The running page's yield check: called while it waits, it raises when Streamlit stops the run (the session
    left, or ran its page again), so that the wait gives way."""
    return get_run_yield_check()


def forget_upload(file_id: str) -> None:
    """Drop an uploaded file from Streamlit's store once read, as st.chat_input does with its files: the store
    keeps every upload of a session until the session ends, whatever became of its box."""
    run_context = get_script_run_ctx(suppress_warning=True)
    if run_context is not None and isinstance(run_context.uploaded_file_mgr, MemoryUploadedFileManager):
        run_context.uploaded_file_mgr.remove_file(session_id=run_context.session_id, file_id=file_id)


# ---------------------------------------------------------------------------------------------------------------
# a live class


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


def session_open(session_id: str) -> bool:
    """Whether session `session_id` still has its browser connected (a closed tab's is not)."""
    return Runtime.exists() and Runtime.instance().get_app_session(session_id) is not None


def serve_class_middleware() -> None:
    """Put ui/device_cookie.py's middleware and ui/class_stream.py's routes before Streamlit's own in the server
    `atlas app` starts: Streamlit sets no cookie of its own and a page cannot set one from Python, and a stream of
    events must not pass Streamlit's gzip (which buffers it)."""
    from starlette.middleware import Middleware
    from streamlit.web.server.starlette import starlette_app

    from ui.class_stream import CHANNEL, ClassStream
    from ui.device_cookie import DeviceCookie

    streamlit_middleware = starlette_app.create_streamlit_middleware
    if getattr(streamlit_middleware, "with_class_middleware", False):
        return

    def with_class_middleware() -> list[Middleware]:
        return [Middleware(DeviceCookie), Middleware(ClassStream, channel=lambda: CHANNEL), *streamlit_middleware()]

    with_class_middleware.with_class_middleware = True
    starlette_app.create_streamlit_middleware = with_class_middleware


# ---------------------------------------------------------------------------------------------------------------
# the guards


def _clear_own_state_only(session: AppSession) -> None:
    log.info("a client asked to clear the server's caches; only its own session state was cleared")
    session._session_state.clear()  # what Streamlit's own handler does for the session


def refuse_cache_clears() -> None:
    """Make every session's `clear_cache` message clear that session's state only (idempotent)."""
    AppSession._handle_clear_cache_request = _clear_own_state_only  # no public switch exists


UPLOADS_PER_SESSION = 2 * MAX_UPLOAD_MB * 2**20  # Compare's two boxes, each file read as soon as it arrives
UPLOADS_IN_ALL = 3 * MAX_UPLOAD_MB * 2**20  # every session's together
_arrivals = itertools.count()


def _add_file_bounded(self: MemoryUploadedFileManager, session_id: str, file: UploadedFileRec) -> None:
    """MemoryUploadedFileManager.add_file, keeping the bounds above by letting the oldest held files go."""
    with self._lock:  # the manager's own lock, as its own methods take it
        arrived = self.__dict__.setdefault("_atlas_arrived", {})
        storage = self.file_storage[session_id]
        _drop(self, session_id, file.file_id)  # a file sent again under its id replaces itself
        _make_room(self, arrived, len(file.data), UPLOADS_PER_SESSION, session_id)
        _make_room(self, arrived, len(file.data), UPLOADS_IN_ALL)
        storage[file.file_id] = file
        self._total_bytes += len(file.data)  # the counts its stats report
        self._file_count += 1
        arrived[(session_id, file.file_id)] = next(_arrivals)


def _drop(manager: MemoryUploadedFileManager, session_id: str, file_id: str) -> None:
    old = manager.file_storage.get(session_id, {}).pop(file_id, None)
    if old is not None:
        manager._total_bytes -= len(old.data)
        manager._file_count -= 1


def _make_room(
    manager: MemoryUploadedFileManager, arrived: dict, incoming: int, cap: int, session_id: str | None = None
) -> None:
    """Let the oldest held files go (of `session_id`, or of every session) until `incoming` more bytes fit under
    `cap`; `arrived` orders them and forgets files the app or a session's end removed since."""
    held = {
        (sid, fid): len(rec.data)
        for sid, files in manager.file_storage.items()
        if session_id is None or sid == session_id
        for fid, rec in files.items()
    }
    for key in [k for k in arrived if k not in held and (session_id is None or k[0] == session_id)]:
        arrived.pop(key)
    total = sum(held.values())
    for key in sorted(held, key=lambda k: arrived.get(k, -1)):
        if total + incoming <= cap:
            break
        _drop(manager, *key)
        arrived.pop(key, None)
        total -= held[key]
        log.warning("an upload of session %s held %d bytes past the bound; it was let go", key[0][:8], held[key])


def bound_uploads() -> None:
    """Keep Streamlit's held uploads within UPLOADS_PER_SESSION and UPLOADS_IN_ALL (idempotent)."""
    MemoryUploadedFileManager.add_file = _add_file_bounded


_decoded = WStates.__getitem__


def _getitem_decodable(self: WStates, key: str):
    """WStates.__getitem__, dropping a client's value that its widget's decoder fails on, or whose decoded value
    cannot be written back in the kind the client sent (Streamlit answers in that kind: a bool for a radio)."""
    held, meta = self.states.get(key), self.widget_metadata.get(key)
    try:
        value = _decoded(self, key)
        if isinstance(held, Serialized):
            self.get_serialized(key)
        return value
    except KeyError:
        raise
    except Exception as exc:  # whatever a widget's serde raises: a value only a forged message sends
        if not isinstance(held, Serialized):
            raise
        self.states[key] = held  # as it came (the mapping may be iterated over right now), and its widget as declared
        self.widget_metadata[key] = meta
        log.info("a client's value for a widget failed its decoder (%s); it was dropped", type(exc).__name__)
        raise KeyError(key) from None  # what Streamlit meets for a value it cannot use yet: the previous one serves


def refuse_undecodable_widget_values() -> None:
    """Drop every widget value a client sends that its widget's decoder fails on (idempotent)."""
    WStates.__getitem__ = _getitem_decodable  # no public switch exists
