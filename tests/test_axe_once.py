"""tests/browser_support.settled_violations reads a page once it holds still, and runs axe-core on it once: a
violation it finds is returned, however clean a second look would be (a retry until clean would hide an
intermittent one). A stand-in page records what is asked of it; no browser is started."""

from __future__ import annotations

import browser_support
from browser_support import HOLDS_STILL, RUN_AXE, SETTLED, settled_violations


class Page:
    """Answers waits at once and axe with `looks` in turn, recording every call."""

    def __init__(self, *looks: list[str]) -> None:
        self.looks, self.calls = list(looks), []

    def add_script_tag(self, path: str) -> None:
        self.calls.append("axe loaded")

    def wait_for_function(self, script: str, **kwargs) -> None:
        self.calls.append({SETTLED: "settled", HOLDS_STILL: "holds still"}[script])

    def evaluate(self, script: str, *args: object) -> list[str]:
        assert script == RUN_AXE
        self.calls.append("axe")
        return self.looks.pop(0)


def test_axe_runs_once_on_a_settled_page_and_its_violation_is_returned(monkeypatch) -> None:
    monkeypatch.setattr(browser_support, "AXE", browser_support.Path(__file__))  # any file: the page is a stand-in
    page = Page(["color-contrast (serious): …"], [])
    assert settled_violations(page) == ["color-contrast (serious): …"]
    assert page.calls == ["axe loaded", "settled", "holds still", "settled", "axe"]


def test_a_page_the_caller_settled_is_still_held_still_before_axe(monkeypatch) -> None:
    monkeypatch.setattr(browser_support, "AXE", browser_support.Path(__file__))
    page = Page([])
    assert settled_violations(page, settled=True) == []
    assert page.calls == ["axe loaded", "holds still", "axe"]
