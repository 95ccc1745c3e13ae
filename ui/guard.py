"""What a browser may not do to the server: empty every cache with one message, or fill its memory with uploads.

Streamlit answers a client's `clear_cache` message (the "Clear cache" menu item, or any client on the network
sending it) by clearing `st.cache_data` and `st.cache_resource` for the whole server: every other session's
analyses and figures, and the model workers. The server of a class keeps those for everyone, so the message
clears only the sending session's own widget state, as a reload would.

Streamlit keeps every file a client PUTs to its upload endpoint (`/_stcore/upload_file/<session>/<id>`) in memory
until that session ends, whatever widget asked for it: fifteen requests of 100 MB held 1.5 GB. The app reads an
upload as soon as it arrives and forgets it (ui.widgets.trace_uploader), so the server holds at most
UPLOADS_PER_SESSION bytes of one session's uploads and UPLOADS_IN_ALL of everyone's: past either, the oldest held
files go first (a file still held after newer ones arrived is one no box of the app claimed).

Each widget declares the kind of value its browser part sends (a radio a string, a slider numbers); a client may
send any kind for any widget, and Streamlit hands, say, a JSON object to the radio's own decoder, which fails with
a traceback before any of the app's code runs. A value of another kind than its widget declared is dropped: the
widget keeps the value it had, as if the message had not named it.
"""

from __future__ import annotations

import itertools
import logging

from streamlit.runtime.app_session import AppSession
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.state.session_state import Serialized, WStates
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from ui.cache import MAX_UPLOAD_MB

log = logging.getLogger("attention_atlas")


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


# The kinds of value a built-in widget declares; a custom component's JSON may carry any, so it is left alone.
FIXED_KINDS = frozenset(
    {
        "bool_value",
        "double_array_value",
        "double_value",
        "int_value",
        "string_array_value",
        "string_trigger_value",
        "string_value",
        "trigger_value",
    }
)
_set_widget_from_proto = WStates.set_widget_from_proto
_set_widget_metadata = WStates.set_widget_metadata


def _drop_mistyped(states: WStates, widget_id: str) -> None:
    held, meta = states.states.get(widget_id), states.widget_metadata.get(widget_id)
    if not isinstance(held, Serialized) or meta is None or meta.value_type not in FIXED_KINDS:
        return
    sent = held.value.WhichOneof("value")
    if sent is not None and sent != meta.value_type:
        del states.states[widget_id]
        log.info("a client sent a %s for a widget that takes a %s; it was dropped", sent, meta.value_type)


def _set_widget_from_proto_typed(self: WStates, widget_state) -> None:
    _set_widget_from_proto(self, widget_state)
    _drop_mistyped(self, widget_state.id)


def _set_widget_metadata_typed(self: WStates, widget_meta) -> None:
    _set_widget_metadata(self, widget_meta)  # a value may arrive before its widget is first drawn
    _drop_mistyped(self, widget_meta.id)


def refuse_mistyped_widget_values() -> None:
    """Drop every widget value a client sends of another kind than its widget declared (idempotent)."""
    WStates.set_widget_from_proto = _set_widget_from_proto_typed  # no public switch exists
    WStates.set_widget_metadata = _set_widget_metadata_typed
