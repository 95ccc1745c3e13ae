"""Where a test run's time went, from the JUnit file pytest writes (`bash scripts/test.sh --junitxml=F`).

Prints the tests' own times (setup, call and teardown, as pytest-xdist's workers report them) added up by module,
the browser modules' share, and the slowest tests with their parameters folded together; with a second file, each
module's time in both and their ratio (the same machine's two runs: read the ratios of the modules a change touched
against the others', since a shared machine's speed moves between runs).

    python bench/suite_times.py RUN.xml [BEFORE.xml] [--top N]
"""

from __future__ import annotations

import argparse
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def module_of(classname: str) -> str:
    """'tests.test_browser_axe' or 'tests.test_x.TestClass' → 'test_browser_axe' / 'test_x'."""
    parts = classname.split(".")
    tests = [p for p in parts if p.startswith("test_")]
    return tests[0] if tests else classname


def test_of(case: ET.Element) -> str:
    """The module and the test's name without its parameters or its xdist group."""
    name = re.sub(r"\[.*", "", case.get("name", "")).split("@")[0]
    return f"{module_of(case.get('classname', ''))}::{name}"


def times(path: Path) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """Seconds by module, tests by module, and seconds by test (parameters folded)."""
    seconds: Counter[str] = Counter()
    count: Counter[str] = Counter()
    by_test: Counter[str] = Counter()
    for case in ET.parse(path).iter("testcase"):
        module, took = module_of(case.get("classname", "")), float(case.get("time") or 0)
        seconds[module] += took
        count[module] += 1
        by_test[test_of(case)] += took
    return seconds, count, by_test


def report(run: Path, before: Path | None = None, top: int = 25) -> str:
    seconds, count, by_test = times(run)
    total = sum(seconds.values())
    browser = sum(s for m, s in seconds.items() if m.startswith("test_browser"))
    lines = [
        f"# {run}: {sum(count.values())} tests, their own times {total:,.0f} s"
        f" (browser modules {browser:,.0f} s, {100 * browser / max(total, 1e-9):.0f} %)",
        "",
    ]
    if before is None:
        lines += ["| seconds | tests | module |", "|---|---|---|"]
        lines += [f"| {s:,.1f} | {count[m]} | {m} |" for m, s in seconds.most_common(top)]
    else:
        old, old_count, _ = times(before)
        lines[0] += f"; before ({before}): {sum(old.values()):,.0f} s"
        lines += ["| before s | now s | now / before | tests before → now | module |", "|---|---|---|---|---|"]
        for m in sorted(set(seconds) | set(old), key=lambda m: -(seconds[m] + old[m]))[:top]:
            ratio = f"{seconds[m] / old[m]:.2f}" if old[m] else "new"
            lines.append(f"| {old[m]:,.1f} | {seconds[m]:,.1f} | {ratio} | {old_count[m]} → {count[m]} | {m} |")
    lines += ["", "| seconds | test (parameters folded) |", "|---|---|"]
    lines += [f"| {s:,.1f} | {t} |" for t, s in by_test.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="a JUnit XML file of pytest")
    p.add_argument("before", type=Path, nargs="?", help="another run's JUnit XML file to compare with")
    p.add_argument("--top", type=int, default=25, help="modules and tests listed")
    args = p.parse_args()
    for path in (args.run, args.before):
        if path is not None and not path.is_file():
            raise SystemExit(f"{path}: no such JUnit file (bash scripts/test.sh --junitxml={path} writes one)")
    try:
        print(report(args.run, args.before, args.top))
    except ET.ParseError as exc:
        raise SystemExit(f"not a JUnit XML file: {exc}") from None


if __name__ == "__main__":
    main()
