"""bench/classroom.py end to end: two sessions over Streamlit's websocket against a real server, tiny checkpoints."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]
BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_two_sessions_get_the_same_pages_as_one_session_alone(tmp_path: Path) -> None:
    pytest.importorskip("websockets")
    pytest.importorskip("psutil")
    sys.path.insert(0, str(BENCH))
    try:
        import classroom
    finally:
        sys.path.remove(str(BENCH))
    out = tmp_path / "classroom.md"
    assert classroom.main(["--tiny", "--quick", "--model", "tiny-lm", "--out", str(out)]) == 0
    row = next(line for line in out.read_text().splitlines() if line.startswith("| tiny-lm"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "2 × 1"
    assert cells[2].endswith(" ms") or cells[2].endswith(" s"), "the first page (the teacher's link) is timed"
    assert cells[8].endswith(" ms") or cells[8].endswith(" s"), "the server's CPU a typed page is measured"
    assert cells[9].endswith(" ms") or cells[9].endswith(" s"), "the sessions' own CPU a typed page is measured"
    assert cells[12] == "0/2"  # mismatches


def test_the_class_on_two_replicas_gets_the_same_pages(tmp_path: Path) -> None:
    """`--replicas 2`: the sessions go through deploy/run-replicas.sh's proxy, and every process it started is gone
    after the run."""
    pytest.importorskip("websockets")
    psutil = pytest.importorskip("psutil")
    sys.path.insert(0, str(BENCH))
    try:
        import classroom
    finally:
        sys.path.remove(str(BENCH))
    out = tmp_path / "classroom.md"
    assert classroom.main(["--tiny", "--quick", "--model", "tiny-lm", "--replicas", "2", "--out", str(out)]) == 0
    text = out.read_text()
    assert "`deploy/run-replicas.sh 2`" in text
    row = next(line for line in text.splitlines() if line.startswith("| tiny-lm, 2 replicas"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[8].endswith(" ms") or cells[8].endswith(" s"), "the deployment's CPU a typed page is measured"
    assert cells[9].endswith(" ms") or cells[9].endswith(" s"), "the sessions' own CPU a typed page is measured"
    assert cells[12] == "0/2"  # mismatches
    assert not started_by_the_bench(psutil), "the deployment's processes outlived the bench"


def started_by_the_bench(psutil) -> list[str]:
    """Processes of a deployment bench/classroom.py started (their LOGDIR is its temporary folder)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if "classroom-replicas." in proc.environ().get("LOGDIR", ""):
                found.append(" ".join(proc.info["cmdline"] or []))
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def test_sentences_differ_between_sessions() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import classroom
    finally:
        sys.path.remove(str(BENCH))
    english = classroom.everyday_sentences(150, seed=0)
    letters = classroom.letter_strings(150, seed=0)
    assert len(set(english)) == len(set(letters)) == 150
    assert all(set(s) <= set("abcdefghijklmnop") for s in letters)
