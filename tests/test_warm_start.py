"""The server as the README starts it (`python -m atlas app`) has loaded the model before it listens: the first
session a class opens uses that model, where a bare `streamlit run app.py` makes the first sessions load it. Read
from the server's own system calls (strace): when it opened the checkpoint's weights, when it bound its port."""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
MODEL = ROOT / "checkpoints" / "lm-english"


def weights_opened(cold: bool, tmp_path: Path) -> tuple[int, int]:
    """The server's opens of lm-english's weights (before it bound its port, after), through its first page."""
    sys.path.insert(0, str(BENCH))
    try:
        import classroom
        from browser import stop_server
    finally:
        sys.path.remove(str(BENCH))

    async def open_link(url: str) -> list[str]:
        session = classroom.Session(url, "lm-english")
        try:
            return (await session.open()).errors
        finally:
            await session.close()

    log = tmp_path / f"{'cold' if cold else 'warm'}.strace"
    proc, port = classroom.spawn(MODEL, 1, cold, prefix=("strace", "-f", "-e", "trace=openat,bind", "-o", str(log)))
    try:
        url = classroom.wait_healthy(proc, port)
        assert asyncio.run(open_link(url)) == []
    finally:
        stop_server(proc)
    calls = log.read_text().splitlines()
    bound = next(i for i, line in enumerate(calls) if re.search(rf"bind\(.*htons\({port}\)", line))
    opens = [i for i, line in enumerate(calls) if "openat(" in line and str(MODEL / "model.safetensors") in line]
    return sum(i < bound for i in opens), sum(i > bound for i in opens)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace (scripts/test.sh installs it)")
def test_the_readme_server_loads_the_model_before_it_listens(tmp_path: Path) -> None:
    pytest.importorskip("websockets")
    before, after = weights_opened(cold=False, tmp_path=tmp_path)
    assert before >= 1 and after == 0, (before, after)  # the first page used the model the warm run loaded
    # the bare command: the weights are read only once a session asks (what the check above rules out)
    before, after = weights_opened(cold=True, tmp_path=tmp_path)
    assert before == 0 and after >= 1, (before, after)
