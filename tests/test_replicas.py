"""2 replicas of the app behind haproxy (deploy/run-replicas.sh), 3 browser sessions: each stays on one replica.

bench/replicas.py does the work: separate browser contexts type a sentence through the proxy; haproxy's log names
the replica of every request, websockets (/_stcore/stream) included.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def test_sessions_stay_on_their_replica(tmp_path) -> None:
    if not (shutil.which("haproxy") or Path("/usr/sbin/haproxy").exists()):
        pytest.skip("haproxy is missing (apt-get install haproxy; scripts/test.sh installs it)")
    if not Path("/usr/bin/chromium").exists():
        pytest.fail("/usr/bin/chromium is missing: `bash scripts/test.sh` installs Debian's chromium")
    import replicas

    result = replicas.run(replicas=2, sessions=3, logdir=tmp_path)
    rows = result["rows"]
    assert all(r["websockets"] >= 1 for r in rows), rows
    assert all(r["ok"] for r in rows), rows  # websocket and every request on the replica the cookie names
    assert {r["cookie"] for r in rows} == {"r1", "r2"}, rows  # round-robin gave both replicas sessions
    assert sum(result["open_per_replica"].values()) >= 3, result["open_per_replica"]
