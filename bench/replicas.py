"""Sessions stay on their replica: 2 `streamlit run app.py` replicas behind haproxy (deploy/run-replicas.sh).

Starts deploy/run-replicas.sh (2 replicas + haproxy, loopback, own ports), opens S sessions through the proxy, each a
separate Playwright browser context (own cookies, like separate students) with a marker cookie `atlas_bench=sK`,
has each type a sentence and waits for its heatmap. While all are open it reads haproxy's stats (open connections
per replica); then it closes them, stops everything and reads haproxy's log, where each request line names the
replica that served it and the Cookie header sent. Checks: every session's websocket(s) (/_stcore/stream) went to
one replica, the one its SERVERID cookie names, and both replicas got sessions.

    python bench/replicas.py [--sessions 6] [--replicas 2]
Needs: haproxy (apt-get install haproxy), /usr/bin/chromium, playwright.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
SENTENCES = [
    "My friends went to the market together.",
    "The cat sat on the warm mat.",
    "She read the letter twice before answering.",
    "We walked home along the river.",
    "The teacher wrote a long word on the board.",
    "He found his keys under the old chair.",
]
# The first chart holds new data (a calcdata object other than the one remembered before submitting), painted.
REMEMBER = "() => { window.__old = document.querySelector('.stPlotlyChart .js-plotly-plot').calcdata; }"
PAINTED = """() => {
  const gd = document.querySelector('.stPlotlyChart .js-plotly-plot');
  if (!gd || !gd.calcdata || gd.calcdata === window.__old) return false;
  const img = gd.querySelector('.heatmaplayer image');
  return !!(img && img.getAttribute('href'));
}"""
LINE = re.compile(r"replicas/(\S+) (\d+) \S+ (\S+) (\S+) \{(.*)\}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ok(url: str, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"deploy/run-replicas.sh exited ({proc.returncode}) before {url} answered")
        try:
            if urllib.request.urlopen(url, timeout=2).read().strip() == b"ok":
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer ok within {timeout:.0f} s")


def start(replicas: int, logdir: Path) -> tuple[subprocess.Popen, dict]:
    """deploy/run-replicas.sh on free ports; returns the process (own group) and its ports."""
    base = free_port()
    while any(_busy(base + i) for i in range(replicas)):
        base = free_port()
    ports = {"proxy": free_port(), "stats": free_port(), "base": base}
    env = {
        **os.environ,
        "PROXY_PORT": str(ports["proxy"]),
        "STATS_PORT": str(ports["stats"]),
        "BASE_PORT": str(base),
        "LOGDIR": str(logdir),
        "PYTHON": sys.executable,
        "ATLAS_CHECKPOINTS": os.environ.get("ATLAS_CHECKPOINTS", str(ROOT / "checkpoints")),
    }
    proc = subprocess.Popen(
        ["bash", str(ROOT / "deploy" / "run-replicas.sh"), str(replicas)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(logdir / "run-replicas.err", "w"),  # lives as long as the process
        start_new_session=True,
    )
    try:
        for i in range(replicas):
            wait_ok(f"http://127.0.0.1:{base + i}/_stcore/health", 120, proc)
        wait_ok(f"http://127.0.0.1:{ports['proxy']}/_stcore/health", 30, proc)
        deadline = time.time() + 60  # haproxy's own checks must see every replica UP, or round-robin skips it
        while len(servers_up(ports["stats"])) < replicas:
            if time.time() > deadline:
                raise TimeoutError(f"haproxy sees only {servers_up(ports['stats'])} UP")
            time.sleep(0.5)
    except BaseException:
        stop(proc)
        raise
    return proc, ports


def _busy(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the script, which is supervisord (it stops every program), then the whole group if it lingers
    (supervisord's programs have process groups of their own: that last resort leaves them running)."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _stats(stats_port: int) -> list[dict[str, str]]:
    """haproxy stats CSV, one dict per server of the backend."""
    csv = urllib.request.urlopen(f"http://127.0.0.1:{stats_port}/stats;csv", timeout=5).read().decode()
    head = csv.splitlines()[0].lstrip("# ").split(",")
    out = []
    for row in csv.splitlines()[1:]:
        f = dict(zip(head, row.split(","), strict=False))
        if f.get("pxname") == "replicas" and f.get("svname") not in ("BACKEND", "FRONTEND"):
            out.append(f)
    return out


def servers_up(stats_port: int) -> list[str]:
    return [f["svname"] for f in _stats(stats_port) if f.get("status", "").startswith("UP")]


def open_per_replica(stats_port: int) -> dict[str, int]:
    """Current connections per replica (open websockets)."""
    return {f["svname"]: int(f["scur"] or 0) for f in _stats(stats_port)}


def run(replicas: int = 2, sessions: int = 6, logdir: Path | None = None) -> dict:
    from playwright.sync_api import sync_playwright

    logdir = logdir or Path(tempfile.mkdtemp(prefix="atlas-replicas-"))
    proc, ports = start(replicas, logdir)
    url = f"http://127.0.0.1:{ports['proxy']}"
    cookie, seconds, open_now = {}, {}, {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            contexts, pages = [], []
            for k in range(sessions):  # one at a time: round-robin hands out replicas in turn
                ctx = browser.new_context(viewport={"width": 1200, "height": 900})
                ctx.add_cookies([{"name": "atlas_bench", "value": f"s{k}", "url": url}])
                page = ctx.new_page()
                page.set_default_timeout(120_000)
                page.goto(f"{url}/?model=lm-english")
                contexts.append(ctx)
                pages.append(page)
            for k, page in enumerate(pages):
                page.locator(".stPlotlyChart .heatmaplayer image, .stPlotlyChart .heatmaplayer .hm").first.wait_for(
                    state="attached"
                )
                page.evaluate(REMEMBER)
                box = page.get_by_role("textbox", name="Text", exact=True)
                box.fill(SENTENCES[k % len(SENTENCES)])
                t0 = time.perf_counter()
                box.press("Control+Enter")
                page.wait_for_function(PAINTED)
                seconds[f"s{k}"] = time.perf_counter() - t0
                cookie[f"s{k}"] = next((c["value"] for c in contexts[k].cookies() if c["name"] == "SERVERID"), "-")
            open_now = open_per_replica(ports["stats"])
            for ctx in contexts:
                ctx.close()
            browser.close()
        time.sleep(1)  # haproxy logs a websocket when it closes
    finally:
        stop(proc)
    streams: dict[str, list[str]] = defaultdict(list)
    requests: dict[str, set[str]] = defaultdict(set)
    for line in (logdir / "haproxy.log").read_text().splitlines():
        m = LINE.search(line)
        if not m:
            continue
        server, _status, _method, path, cookies = m.groups()
        s = re.search(r"atlas_bench=(s\d+)", cookies)
        if not s:
            continue
        requests[s.group(1)].add(server)
        if path.startswith("/_stcore/stream"):
            streams[s.group(1)].append(server)
    rows = []
    for k in range(sessions):
        sid = f"s{k}"
        ok = (
            len(set(streams[sid])) == 1
            and set(streams[sid]) == {cookie.get(sid)}
            and requests[sid] == {cookie.get(sid)}
        )
        rows.append(
            {
                "session": sid,
                "cookie": cookie.get(sid, "-"),
                "websockets": len(streams[sid]),
                "ws_replicas": ",".join(sorted(set(streams[sid]))) or "-",
                "all_requests_on": ",".join(sorted(requests[sid])) or "-",
                "submit_to_heatmap_s": seconds.get(sid, float("nan")),
                "ok": ok,
            }
        )
    used = {r["ws_replicas"] for r in rows if r["ok"]}
    return {"rows": rows, "open_per_replica": open_now, "replicas_used": used, "logdir": logdir, "replicas": replicas}


def report(result: dict) -> bool:
    print(f"{'session':8} {'SERVERID':8} {'websockets':>10} {'ws on':6} {'all requests on':16} {'heatmap s':>9}  ok")
    for r in result["rows"]:
        print(
            f"{r['session']:8} {r['cookie']:8} {r['websockets']:>10} {r['ws_replicas']:6} {r['all_requests_on']:16} "
            f"{r['submit_to_heatmap_s']:9.2f}  {'yes' if r['ok'] else 'NO'}"
        )
    print(f"open connections per replica while all sessions were open (haproxy stats): {result['open_per_replica']}")
    every = all(r["ok"] for r in result["rows"])
    spread = len(result["replicas_used"]) == result["replicas"]
    print(
        f"every session on one replica: {'yes' if every else 'NO'}; replicas with sessions: "
        f"{len(result['replicas_used'])}/{result['replicas']}; logs: {result['logdir']}"
    )
    return every and spread


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--sessions", type=int, default=6)
    a = ap.parse_args()
    return 0 if report(run(a.replicas, a.sessions)) else 1


if __name__ == "__main__":
    sys.exit(main())
