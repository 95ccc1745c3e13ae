"""Streamlit keeps whatever a client PUTs to its upload endpoint until the session ends (fifteen 100 MB
requests would hold 1.5 GB). ui.streamlit_private bounds what it holds per session and in all, letting the oldest go."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from ui import streamlit_private

BENCH = Path(__file__).resolve().parent.parent / "bench"
MB = 2**20


def rec(file_id: str, size: int) -> UploadedFileRec:
    return UploadedFileRec(file_id=file_id, name=f"{file_id}.bin", type="application/octet-stream", data=b"x" * size)


def test_the_oldest_uploads_go_past_the_per_session_and_the_server_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streamlit_private, "UPLOADS_PER_SESSION", 3 * MB)
    monkeypatch.setattr(streamlit_private, "UPLOADS_IN_ALL", 5 * MB)
    monkeypatch.setattr(MemoryUploadedFileManager, "add_file", streamlit_private._add_file_bounded)
    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    for i in range(4):
        manager.add_file("a", rec(f"a{i}", MB))
    assert list(manager.file_storage["a"]) == ["a1", "a2", "a3"], "one session: its 3 newest MB"
    for i in range(3):
        manager.add_file("b", rec(f"b{i}", MB))
    held = {sid: list(files) for sid, files in manager.file_storage.items()}
    assert held == {"a": ["a2", "a3"], "b": ["b0", "b1", "b2"]}, "past 5 MB in all, the oldest (a1) went"
    assert manager._total_bytes == 5 * MB and manager._file_count == 5  # Streamlit's own counts stay true
    manager.remove_file("b", "b2")  # the app reads an upload and forgets it
    manager.add_file("b", rec("b0", MB))  # the same id again replaces itself
    assert manager._total_bytes == 4 * MB and [r.file_id for r in manager.get_files("b", ["b0"])] == ["b0"]


@pytest.mark.slow
def test_raw_uploads_to_a_real_server_cost_at_most_the_bound() -> None:
    pytest.importorskip("psutil")
    pytest.importorskip("websockets")
    sys.path.insert(0, str(BENCH))
    try:
        import uploads
    finally:
        sys.path.remove(str(BENCH))
    ckpt = Path(__file__).resolve().parent.parent / "checkpoints" / "induction"  # the smallest model: a quick start
    result = uploads.raw_uploads(ckpt, files=8, size_mb=99)
    assert set(result["codes"]) == {204}
    grew = (result["after"] - result["before"]) / MB
    # unbounded, the eight files stay (792 MB); bounded, two (198 MB) and the last request's buffers at most
    assert grew < streamlit_private.UPLOADS_PER_SESSION / MB + 150, f"the server grew by {grew:.0f} MiB"
