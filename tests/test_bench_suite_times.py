"""bench/suite_times.py: a JUnit file's tests' own times by module, the browser share, and two runs side by side."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "suite_times.py"
RUN = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_browser_axe" name="test_no_violation[explore-lm]@tab-lm" time="2.5"/>
<testcase classname="tests.test_browser_axe" name="test_no_violation[math-lm]@tab-lm" time="1.5"/>
<testcase classname="tests.test_app.TestPages" name="test_page" time="0.5"/>
<testcase classname="tests.test_cli" name="test_trace[a]" time="1.0"/>
</testsuite></testsuites>"""
BEFORE = RUN.replace('time="2.5"', 'time="6.5"').replace(
    'classname="tests.test_cli" name="test_trace[a]"', 'classname="tests.test_old" name="test_gone"'
)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=60)


def test_times_add_up_by_module_and_by_test_with_their_parameters_folded(tmp_path: Path) -> None:
    (tmp_path / "run.xml").write_text(RUN)
    out = run(str(tmp_path / "run.xml")).stdout
    assert "4 tests, their own times 6 s (browser modules 4 s, 73 %)" in out
    assert "| 4.0 | 2 | test_browser_axe |" in out
    assert "| 0.5 | 1 | test_app |" in out  # a test class's module, not its class
    assert "| 4.0 | test_browser_axe::test_no_violation |" in out  # both parameters, the group left out


def test_two_runs_side_by_side_with_each_modules_ratio(tmp_path: Path) -> None:
    (tmp_path / "run.xml").write_text(RUN)
    (tmp_path / "before.xml").write_text(BEFORE)
    out = run(str(tmp_path / "run.xml"), str(tmp_path / "before.xml")).stdout
    assert "| 8.0 | 4.0 | 0.50 | 2 → 2 | test_browser_axe |" in out
    assert "| 0.0 | 1.0 | new | 0 → 1 | test_cli |" in out
    assert "| 1.0 | 0.0 | 0.00 | 1 → 0 | test_old |" in out


def test_a_missing_or_damaged_file_is_one_line(tmp_path: Path) -> None:
    missing = run(str(tmp_path / "none.xml"))
    assert missing.returncode != 0 and "no such JUnit file" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "bad.xml").write_text("<testsuites><testcase")
    bad = run(str(tmp_path / "bad.xml"))
    assert bad.returncode != 0 and "not a JUnit XML file" in bad.stderr and "Traceback" not in bad.stderr
