"""The teachers' heartbeat: while a teacher's page is open on this server, its class is touched every BEAT_S, so
that a class ends TEACHER_AWAY_S after its teacher's last page closed (live/rules.py) and frees its place.

Plain Python: whether a session is still open is asked of `is_open` (ui/streamlit_private.py's `session_open`, the
one place that knows Streamlit's sessions), and the class is touched through `touch` (Classroom.seen). One entry a
teacher's session, forgotten at the first beat that finds it closed or its class gone; one daemon thread a
server, started by the first teacher.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

BEAT_S = 60.0  # well under TEACHER_AWAY_S: a missed beat or two does not end a class


class Teachers:
    """The teachers' sessions open on this server and the classes they teach."""

    def __init__(
        self,
        touch: Callable[[str, str], None],
        is_open: Callable[[str], bool],
        sweep: Callable[[], object] = lambda: None,
        every_s: float | None = BEAT_S,
    ) -> None:
        """`every_s`: seconds between beats of its own thread; None: no thread (the caller beats, as a test)."""
        self._touch, self._is_open, self._sweep, self._every = touch, is_open, sweep, every_s
        self._lock = threading.Lock()
        self._sessions: dict[str, tuple[str, str]] = {}  # session → (code, key)
        self._thread: threading.Thread | None = None

    def teaching(self, session: str, code: str, key: str) -> None:
        """Session `session` is the teacher's page of class `code` (its key `key`); starts the beat once."""
        with self._lock:
            self._sessions[session] = (code, key)
            if self._thread is None and self._every is not None:
                self._thread = threading.Thread(target=self._run, name="atlas-teachers", daemon=True)
                self._thread.start()

    def left(self, session: str) -> None:
        with self._lock:
            self._sessions.pop(session, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def beat(self) -> None:
        """One visit: touch the class of each open teacher's session, forget the closed ones, end classes whose
        teacher has been away. A class that refuses the touch (ended, or the store down) is forgotten too."""
        with self._lock:
            sessions = dict(self._sessions)
        for session, (code, key) in sessions.items():
            try:
                if self._is_open(session):
                    self._touch(code, key)
                    continue
            except ValueError:  # ClassError: the class ended, or the store did not answer
                pass
            self.left(session)
        try:
            self._sweep()
        except ValueError:
            pass

    def _run(self) -> None:
        while True:
            time.sleep(self._every)
            self.beat()
