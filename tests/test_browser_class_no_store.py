"""`atlas app` on a class store that does not answer (as under a supervisor that starts the replicas before
redis-server): the server starts, says so to its operator in one line, and its pages work, the class panel saying in
one line that the class is paused (tests/test_class_state.py: a store the URL misnames is refused at start)."""

from __future__ import annotations

import re

import pytest
from browser_support import SHOTS, serve, settle, worker_suffix
from playwright.sync_api import expect

pytestmark = pytest.mark.browser
SILENT = "redis://127.0.0.1:1/0"  # port 1: nothing listens there


@pytest.fixture(scope="module")
def no_store_server():
    yield from serve({"ATLAS_CLASS_STORE": SILENT}, "server-no-store")


def test_the_server_starts_on_a_store_that_does_not_answer_and_its_pages_say_the_class_is_paused(
    no_store_server, page
) -> None:
    log = (SHOTS / f"server-no-store{worker_suffix()}.log").read_text()
    [said] = [line for line in log.splitlines() if line.startswith("atlas app:")]
    assert "does not answer" in said or "did not answer" in said, said
    assert said.endswith("serving anyway, the class paused until it answers (pages work without it)")
    page.goto(f"{no_store_server}/?model=lm-english&class=ABCDE")
    settle(page)
    expect(page.get_by_text(re.compile(r"^The class is paused: its store does not answer"))).to_have_count(1)
    expect(page.locator(".js-plotly-plot").first).to_be_visible()  # the page drew on its own
    assert page.get_by_text(re.compile("went wrong|Traceback|redis://")).count() == 0
