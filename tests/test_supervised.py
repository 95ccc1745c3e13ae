"""The deploy under supervisord (deploy/run-replicas.sh, 2 replicas): one death is restarted, the rest keep serving.

A replica killed as the kernel's OOM killer would (SIGKILL) loses only its own sessions: the proxy serves its
browsers from the other replica, and supervisord has it answering again (measured in deploy/README.md: about 6 s on
a quiet machine, 15 s at most; waited for here, not timed, as a loaded test machine takes longer). A killed
redis-server comes back with the classes it held (its append-only file). SIGTERM to the deploy stops every program.
The tests share one deploy and run in this order.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
SUPERVISORCTL = shutil.which("supervisorctl") or "/usr/bin/supervisorctl"
PROGRAMS = ("replicas:r1", "replicas:r2", "redis", "haproxy")
BACK_WITHIN_S = 60  # the wait for a killed replica to answer again; 10-20 s seen at load 10 on 2 cores


class Deploy:
    def __init__(self, proc: subprocess.Popen, ports: dict, logdir: Path) -> None:
        self.proc, self.ports, self.logdir = proc, ports, logdir
        self.seen: set[int] = set()  # every program's process id read: none may outlive the deploy

    def pid(self, program: str) -> int:
        """The program's process id as supervisord reports it (0 while it is not running)."""
        conf = str(self.logdir / "supervisord.conf")
        out = subprocess.run([SUPERVISORCTL, "-c", conf, "pid", program], capture_output=True, text=True, timeout=30)
        pid = int(out.stdout.strip()) if out.stdout.strip().isdigit() else 0
        self.seen |= {pid} - {0}
        return pid

    def pids(self) -> dict[str, int]:
        return {name: self.pid(name) for name in PROGRAMS}

    def store(self):
        import redis

        return redis.Redis(unix_socket_path=str(self.logdir / "redis.sock"), socket_timeout=5)


def wait_for(state: Callable[[], object], seconds: float, what: str) -> object:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := state():
            return found
        time.sleep(0.1)
    raise AssertionError(f"not within {seconds:.0f} s: {what}")


def get(url: str, cookie: str = "") -> tuple[int, str, str]:
    """Status, body and Set-Cookie headers (all of them, joined) of one GET; (0, "", "") when nothing answers."""
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.read().decode(errors="replace"), "; ".join(r.headers.get_all("Set-Cookie") or [])
    except OSError:
        return 0, "", ""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def deploy() -> Iterator[Deploy]:
    for tool, package in (("haproxy", "haproxy"), ("supervisord", "supervisor"), ("redis-server", "redis-server")):
        if not (shutil.which(tool) or Path(f"/usr/sbin/{tool}").exists() or Path(f"/usr/bin/{tool}").exists()):
            pytest.skip(f"{tool} is missing (apt-get install {package}; scripts/test.sh installs it)")
    import replicas

    # A short folder: the control and store sockets live in it, and a Unix socket's path is at most 107 bytes.
    logdir = Path(tempfile.mkdtemp(prefix="atlas-sv-", dir="/tmp"))
    proc, ports = replicas.start(2, logdir)  # both replicas answer, haproxy sees both UP
    found = Deploy(proc, ports, logdir)
    found.pids()
    try:
        yield found
    finally:
        replicas.stop(proc)
        for pid in found.seen:
            if alive(pid):  # supervisord was killed before it could stop them: they are ours to end
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(logdir, ignore_errors=True)


def test_a_killed_replica_is_started_again_while_the_other_serves_its_browsers(deploy: Deploy) -> None:
    import replicas

    before = deploy.pids()
    r1 = f"http://127.0.0.1:{deploy.ports['base']}/_stcore/health"
    proxy = f"http://127.0.0.1:{deploy.ports['proxy']}"
    os.kill(before["replicas:r1"], signal.SIGKILL)
    wait_for(lambda: get(r1)[0] == 0, 10, "r1's port stops answering")
    status, page, cookie = get(f"{proxy}/", cookie="SERVERID=r1")  # a browser of the dead replica
    assert status == 200 and "<title>" in page, (status, page[:200])
    assert "SERVERID=r2" in cookie, cookie  # served by the other replica, which the browser now sticks to
    assert replicas.servers_up(deploy.ports["stats"]) == ["r2"]  # that refused connect marked r1 DOWN at once
    assert get(f"{proxy}/_stcore/health", cookie="SERVERID=r1")[:2] == (200, "ok")

    wait_for(lambda: get(r1)[:2] == (200, "ok"), BACK_WITHIN_S, "supervisord has r1 answering its health check")
    after = deploy.pids()
    assert after["replicas:r1"] not in (0, before["replicas:r1"]), after
    assert {k: v for k, v in after.items() if k != "replicas:r1"} == {
        k: v for k, v in before.items() if k != "replicas:r1"
    }  # the other replica, the store and the proxy never stopped
    wait_for(lambda: len(replicas.servers_up(deploy.ports["stats"])) == 2, 30, "haproxy sees r1 UP again")


def test_a_killed_store_comes_back_with_the_classes_it_held(deploy: Deploy) -> None:
    key = "atlas:class:TEST"  # the prefix of live/store.py's class records
    deploy.store().hset(key, mapping={"record": '{"code": "TEST"}', "version": 1})
    aof = deploy.logdir / "appendonlydir"
    wait_for(
        lambda: any(key.encode() in f.read_bytes() for f in aof.glob("*.aof")), 10, "the record in the append-only file"
    )
    before = deploy.pids()
    os.kill(before["redis"], signal.SIGKILL)

    def answering() -> bool:
        from redis import RedisError

        try:
            return deploy.pid("redis") not in (0, before["redis"]) and bool(deploy.store().ping())
        except RedisError:  # not listening yet, or still loading its file
            return False

    wait_for(answering, 15, "supervisord has the redis-server answering again")
    assert deploy.store().hget(key, "record") == b'{"code": "TEST"}'
    after = deploy.pids()
    assert {k: v for k, v in after.items() if k != "redis"} == {k: v for k, v in before.items() if k != "redis"}
    proxy = f"http://127.0.0.1:{deploy.ports['proxy']}"
    assert get(f"{proxy}/_stcore/health")[:2] == (200, "ok")


def test_sigterm_stops_every_program_it_supervises(deploy: Deploy) -> None:
    pids = deploy.pids()
    assert all(pids.values()), pids
    deploy.proc.send_signal(signal.SIGTERM)
    assert deploy.proc.wait(60) == 0
    assert [name for name, pid in pids.items() if alive(pid)] == []
