"""What the browser tests share: a streamlit server started as the README starts it, and Debian's chromium.

The fixtures themselves (`server`, `published_server`, `browser`, `page`) are in tests/conftest.py, session-scoped:
each pytest-xdist worker starts one server of each kind and one chromium, whichever browser modules it runs.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
SHOTS = ROOT / "screenshots"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_suffix() -> str:
    """ "-gw0" under pytest-xdist's first worker, "" without xdist: two workers never write one log."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return f"-{worker}" if worker else ""


def serve(extra_env: dict[str, str] | None = None, log_name: str = "server") -> Iterator[str]:
    """A streamlit server on a free loopback port, on the shipped checkpoints (and `extra_env`); its url, until the
    generator is closed. Its output goes to screenshots/`log_name`[-worker].log."""
    port = free_port()
    env = {**os.environ, "ATLAS_CHECKPOINTS": str(ROOT / "checkpoints"), "OMP_NUM_THREADS": "1", **(extra_env or {})}
    cmd = [
        sys.executable,
        "-m",
        "atlas",
        "app",  # the README's command: `streamlit run app.py`, its first page run before it listens
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",  # files edited while the tests run must not put "File change. Rerun" on pages
        "none",
    ]
    SHOTS.mkdir(exist_ok=True)
    log_file = f"{log_name}{worker_suffix()}.log"
    log = open(SHOTS / log_file, "w")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"streamlit exited with {proc.returncode}; see screenshots/{log_file}")
                time.sleep(0.5)
        else:
            pytest.fail(f"streamlit did not answer /_stcore/health within 90 s; see screenshots/{log_file}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def launch_chromium(playwright):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `bash scripts/test.sh` installs Debian's chromium")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
