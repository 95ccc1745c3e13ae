"""What one Streamlit rerun costs the server at its least: a probe app that draws one cached chart in a fragment,
rerun --runs times over the websocket as a browser asks it (`rerun_script`, with and without the fragment's id),
one after another. Server CPU (from /proc) and wall time a rerun. A live class's follow cannot cost less than this
if it is a rerun: 300 followers × this CPU is the floor of a follow by reruns (docs/benchmarks.md, 300 followers).

    python bench/fragment_rerun.py [--runs 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from browser import stop_server
from class_follow import Client, cpu_seconds
from classroom import free_port, wait_healthy

PROBE = """
import json
import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

@st.cache_resource
def spec():
    rng = np.random.default_rng(0)
    fig = go.Figure(go.Heatmap(z=rng.random((14, 14)), text=[[str(i) for i in range(14)]] * 14))
    return json.loads(pio.to_json(fig, validate=False))

@st.fragment(run_every=3600)  # a fragment the page declares (its timer never fires in the probe)
def view():
    st.markdown("**Following**: the teacher's view")
    st.plotly_chart(go.Figure(spec(), _validate=False), key="c")

view()
"""


async def probe(url: str, pid: int, runs: int) -> dict[str, tuple[float, float]]:
    client = Client(url, "")
    await client.open()
    for _ in range(20):  # warm
        await client.send(fragment=True)
        await client.wait_finished()
    found = {}
    for kind in ("fragment", "page"):
        cpu, start = cpu_seconds(pid), time.perf_counter()
        for _ in range(runs):
            await client.send(fragment=kind == "fragment")
            await client.wait_finished()
        found[kind] = ((cpu_seconds(pid) - cpu) / runs, (time.perf_counter() - start) / runs)
    await client.close()
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        app = Path(folder) / "probe.py"
        app.write_text(PROBE)
        port = free_port()
        flags = ["--server.headless", "true", "--runner.postScriptGC", "false", "--server.fileWatcherType", "none"]
        cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(port), *flags]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            url = wait_healthy(proc, port)
            found = asyncio.run(probe(url, proc.pid, args.runs))
        finally:
            stop_server(proc)
    for kind, (cpu, wall) in found.items():
        print(f"  a {kind} rerun: {1000 * cpu:.1f} ms of server CPU, {1000 * wall:.1f} ms wall ({args.runs} runs)")
    print(f"  cores: {os.cpu_count()}, load average now: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
