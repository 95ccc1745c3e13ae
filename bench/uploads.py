"""`python bench/uploads.py`: a hostile client's raw uploads against a real server, and the memory they cost.

A server started as the README starts it (bench/classroom.serve), one session opened over
Streamlit's websocket as a browser opens it, then files PUT straight to its upload endpoint
(`/_stcore/upload_file/<session>/<id>`), as any client on the network can, with matching XSRF cookie and header
(Streamlit's double-submit check asks for nothing more). No widget of the session ever claims them. Printed: the
server's resident memory (RSS, its process group) before, at its peak while sending, and after.

What it leaves out: uploads the app itself reads (the trace box parses a file: tests/test_trace_bounds.py bounds
that in-process), and the bodies Streamlit buffers while a request is in flight (at most one file's size each).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import requests
import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.web.server.starlette.starlette_app_utils import generate_xsrf_token_string

sys.path.insert(0, str(Path(__file__).resolve().parent))
import classroom  # the bench's own server helpers
from browser import stop_server

MB = 2**20


async def session_id(ws_url: str) -> tuple[str, object]:
    """Open a session as a browser does (its first page, run to the end) and return its id and the websocket."""
    ws = await websockets.connect(ws_url, subprotocols=["streamlit"], max_size=None, ping_interval=None)
    msg = BackMsg()
    msg.rerun_script.query_string = ""
    msg.rerun_script.context_info.timezone, msg.rerun_script.context_info.locale = "UTC", "en-US"
    await ws.send(msg.SerializeToString())
    found = ""
    while True:  # to the end of the first page: the model loaded, the server at its working size
        fwd = ForwardMsg()
        fwd.ParseFromString(await asyncio.wait_for(ws.recv(), 120))
        if fwd.WhichOneof("type") == "new_session":
            found = fwd.new_session.initialize.session_id
        elif fwd.WhichOneof("type") == "script_finished":
            return found, ws


def put(port: int, session: str, file_id: str, data: bytes) -> int:
    """PUT one file to the session's upload endpoint as any client may; the HTTP status."""
    token = generate_xsrf_token_string()
    response = requests.put(
        f"http://localhost:{port}/_stcore/upload_file/{session}/{file_id}",
        files={"file": (f"{file_id}.bin", data, "application/octet-stream")},
        headers={"X-Xsrftoken": token},
        cookies={"_streamlit_xsrf": token},
        timeout=120,
    )
    return response.status_code


def raw_uploads(ckpt_dir: Path, files: int, size_mb: int, sessions: int = 1) -> dict:
    """`files` uploads of `size_mb` MB each, in turn to `sessions` sessions, none claimed: the server's RSS before,
    at its peak and after."""
    proc, ws_url = classroom.serve(ckpt_dir, threads=1)
    port = int(ws_url.split(":")[2].split("/")[0])
    try:
        loop = asyncio.new_event_loop()
        opened = [loop.run_until_complete(session_id(ws_url)) for _ in range(sessions)]
        with classroom.RssSampler(proc.pid) as rss:
            before = rss.now()
            codes = [put(port, opened[i % sessions][0], f"f{i}", os.urandom(size_mb * MB)) for i in range(files)]
            time.sleep(1)
            after = rss.now()
        for _, ws in opened:
            loop.run_until_complete(ws.close())
        return {"codes": codes, "before": before, "peak": rss.peak, "after": after}
    finally:
        stop_server(proc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/uploads.py", description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=classroom.common.ROOT / "checkpoints" / "lm-english")
    parser.add_argument("--files", type=int, default=15)
    parser.add_argument("--sessions", type=int, default=1, help="sessions the files go to, in turn")
    parser.add_argument("--size-mb", type=int, default=99, help="MB per file (the server takes at most 100 MB)")
    args = parser.parse_args(argv)
    print(f"load: {classroom.uptime()}")
    result = raw_uploads(args.checkpoint, args.files, args.size_mb, args.sessions)
    sent, to = args.files * args.size_mb, "one session" if args.sessions == 1 else f"{args.sessions} sessions"
    print(f"{args.files} raw uploads of {args.size_mb} MB to {to} ({sent:,} MB sent, none claimed):")
    print(f"  HTTP status: {sorted(set(result['codes']))}")
    print(
        f"  server RSS: {result['before'] / MB:,.0f} MiB before, {result['peak'] / MB:,.0f} MiB at its peak, "
        f"{result['after'] / MB:,.0f} MiB after"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
