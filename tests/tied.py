"""Servers a test starts end with the test process, however it ends.

A test's `finally` stops its server when the test ends normally or fails; an interrupted run (Ctrl+C reaching
pytest-xdist's workers, a worker killed on a timeout) runs no `finally`, and its servers would keep their ports and
memory until someone kills them by hand. On Linux, `tied` asks the kernel (prctl PR_SET_PDEATHSIG) to send the child
SIGTERM the moment the process that started it dies; elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def tied() -> Callable[[], None]:
    """A `preexec_fn` for subprocess.Popen: the child gets SIGTERM when the process calling `tied` dies (the
    kernel ties it to the calling thread: start servers from the test's own thread, as fixtures do). It runs in
    the child between fork and exec; if the parent died before the prctl took hold, the child ends at once."""
    parent = os.getpid()

    def preexec() -> None:
        if _PRCTL is None:
            return
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # already gone: nobody would stop this child
            os._exit(1)

    return preexec
