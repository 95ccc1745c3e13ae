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

A client may send any kind of value for any widget (a JSON object for a radio), and Streamlit hands it to the
widget's own decoder, which fails with a traceback before any of the app's code runs. A value its decoder fails on
is dropped, as is one Streamlit could not write back in the kind it came in (a boolean for a radio): the widget
keeps the value it had, as if the message had not named it. (The kind alone cannot tell: the browser itself sends
an int for a whole-number box that declares a float.)
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
