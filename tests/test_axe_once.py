"""tests/browser_support.settled_violations reads a page once it holds still, and runs axe-core on it once: a
violation it finds is returned, however clean a second look would be (a retry until clean would hide an
intermittent one). A stand-in page records what is asked of it; no browser is started."""

from __future__ import annotations

import browser_support
from browser_support import AXE_LOADED, HOLDS_STILL, RUN_AXE, SETTLED, settled_violations


class Page:
    """Answers waits at once and axe with `looks` in turn, recording every call; `has_axe`: axe-core was injected
    before (a page reached from the menu of a tab)."""

    def __init__(self, *looks: list[str], has_axe: bool = False) -> None:
        self.looks, self.calls, self.has_axe = list(looks), [], has_axe

    def add_script_tag(self, path: str) -> None:
        self.calls.append("axe loaded")
        self.has_axe = True

    def wait_for_function(self, script: str, **kwargs) -> None:
        self.calls.append({SETTLED: "settled", HOLDS_STILL: "holds still"}[script])

    def evaluate(self, script: str, *args: object) -> list[str] | bool:
        if script == AXE_LOADED:
            return self.has_axe
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


def test_a_page_that_has_axe_is_not_given_it_again(monkeypatch) -> None:
    monkeypatch.setattr(browser_support, "AXE", browser_support.Path(__file__))
    page = Page(["region (moderate): …"], has_axe=True)
    assert settled_violations(page, settled=True) == ["region (moderate): …"]
    assert page.calls == ["holds still", "axe"]
