"""A server a test starts ends with the test process, even when that process is killed and runs no cleanup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

# A parent that starts a long-lived child through `tied()`, prints the child's pid and waits to be killed.
PARENT = """
import subprocess, sys, time
sys.path.insert(0, {here!r})
from tied import tied
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]{extra})
print(child.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def _orphan_after_parent_killed(extra: str) -> bool:
    """Start the parent, SIGKILL it (no cleanup runs) and say whether its child is still running 5 s later."""
    code = PARENT.format(here=str(HERE), extra=extra)
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait(10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    alive = _alive(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    return alive


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the tie is Linux's prctl")
def test_a_tied_child_ends_when_its_parent_is_killed():
    assert not _orphan_after_parent_killed(", preexec_fn=tied()")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the tie is Linux's prctl")
def test_an_untied_child_outlives_its_parent():
    """The check above can fail: without the tie the child runs on."""
    assert _orphan_after_parent_killed("")
