"""The server makes no outbound connection: `python -m atlas app` exactly as the README starts it (the repository's
.streamlit/config.toml), traced with strace while a browser opens the app and a session runs the model."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from tied import tied

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = ('inet_addr("127.', 'inet_pton(AF_INET6, "::1"', 'inet_pton(AF_INET6, "::ffff:127.')


def outbound(strace_log: str) -> list[str]:
    """The connect() calls of a strace log that leave the machine: internet families to a non-loopback address."""
    calls = [line for line in strace_log.splitlines() if "connect(" in line and "AF_INET" in line]
    return [c for c in calls if not any(addr in c for addr in LOOPBACK)]


def test_the_outbound_filter_keeps_only_what_leaves_the_machine() -> None:
    log = "\n".join(
        [
            '12 connect(7, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("8.8.8.8")}, 16) = 0',
            '12 connect(7, {sa_family=AF_INET, sin_port=htons(8501), sin_addr=inet_addr("127.0.0.1")}, 16) = 0',
            '12 connect(8, {sa_family=AF_UNIX, sun_path="/run/x"}, 110) = 0',
            '12 connect(9, {sa_family=AF_INET6, sin6_port=htons(1), inet_pton(AF_INET6, "::1", &sin6_addr)}, 28) = 0',
        ]
    )
    assert outbound(log) == [log.splitlines()[0]]


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace (scripts/test.sh installs it)")
def test_the_server_makes_no_outbound_connection_at_start_or_while_serving(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    trace = tmp_path / "connect.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("ATLAS_CHECKPOINTS", None)
    streamlit = [sys.executable, "-m", "atlas", "app", "--server.port", str(port)]
    cmd = ["strace", "-f", "-e", "trace=connect", "-o", str(trace), *streamlit]
    # its own process group: the server gets the stop signal too (sent to strace alone, strace detaches from the
    # server and exits, and the server runs on)
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=tied(),
    )
    url = f"http://localhost:{port}"
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("streamlit did not answer /_stcore/health within 90 s")
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium",
                args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
            )
            page = browser.new_page()
            page.goto(url)
            page.wait_for_selector(".js-plotly-plot", timeout=90_000)  # the model ran and a heatmap is drawn
            browser.close()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    log = trace.read_text()
    assert re.search(r"\+\+\+ exited with", log), "strace followed the server's processes"
    assert outbound(log) == []
