"""What a browser may not do to the server: empty every cache with one message.

Streamlit answers a client's `clear_cache` message (the "Clear cache" menu item, or any client on the network
sending it) by clearing `st.cache_data` and `st.cache_resource` for the whole server: every other session's
analyses and figures, and the model workers. The server of a class keeps those for everyone, so the message
clears only the sending session's own widget state, as a reload would.
"""

from __future__ import annotations

import logging

from streamlit.runtime.app_session import AppSession

log = logging.getLogger("attention_atlas")


def _clear_own_state_only(session: AppSession) -> None:
    log.info("a client asked to clear the server's caches; only its own session state was cleared")
    session._session_state.clear()  # noqa: SLF001 - what Streamlit's own handler does for the session


def refuse_cache_clears() -> None:
    """Make every session's `clear_cache` message clear that session's state only (idempotent)."""
    AppSession._handle_clear_cache_request = _clear_own_state_only  # noqa: SLF001 - no public switch exists
