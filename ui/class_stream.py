"""The route a follower's page keeps open to receive its class's view as the teacher's page drew it: server-sent
events at `…/_atlas/class-stream?class=CODE` (live/push.py's `Channel` gives it each message), and plotly.js at
`…/_atlas/plotly.min.js` (the copy inside the plotly package: offline, cached by the browser for a day), which
ui/class_pushed.py's component draws the figures with.

A plain ASGI middleware, put before Streamlit's own by ui/streamlit_private.py's `serve_class_middleware` (so that no
gzip buffers the events). An idle stream costs its socket and a comment line every KEEPALIVE_S (a proxy closes a
silent connection); a stream holds at most the one message it is writing, the latest: a slow client skips the
versions it was too slow for, never queues them. A request it does not serve goes to Streamlit unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gzip
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import plotly

from live.push import Channel
from live.rules import normal_code

CHANNEL = Channel()  # every session of this server publishes and listens here (this stream serves it)

STREAM = "/_atlas/class-stream"
PLOTLY = "/_atlas/plotly.min.js"
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
KEEPALIVE_S = 45.0  # under a proxy's usual minute of silence (nginx's proxy_read_timeout); a closed one reconnects

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGI = Callable[[Scope, Receive, Send], Awaitable[None]]


class ClassStream:
    """Serves STREAM and PLOTLY (at any base path: the app may sit under a proxy's prefix); the rest to `app`."""

    def __init__(self, app: ASGI, channel: Callable[[], Channel]) -> None:
        self.app, self.channel = app, channel

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path.endswith(STREAM):
            await self.stream(scope, receive, send)
        elif path.endswith(PLOTLY):
            await _plotly(scope, send)
        else:
            await self.app(scope, receive, send)

    async def stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        try:
            code = normal_code(query.get("class", [""])[0])
        except ValueError as exc:
            await _text(send, 400, f"A class stream needs its class's code: {exc}.")
            return
        loop = asyncio.get_running_loop()
        waiting: list[bytes] = []  # the latest message not yet written (at most one)
        wake = asyncio.Event()

        def offer(data: bytes) -> None:
            waiting[:] = [data]
            wake.set()

        channel = self.channel()
        token = channel.listen(code, lambda version, data: loop.call_soon_threadsafe(offer, data))
        if token is None:
            await _text(send, 503, "This server holds as many class streams as it may: the page follows by reruns.")
            return
        gone = asyncio.ensure_future(_disconnected(receive))
        gone.add_done_callback(lambda _: wake.set())  # a client gone ends the wait at once
        try:
            headers = [
                (b"content-type", b"text/event-stream; charset=utf-8"),
                (b"cache-control", b"no-cache, no-store"),
                (b"x-accel-buffering", b"no"),  # nginx: write each event as it comes
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b": open\n\n", "more_body": True})
            while not gone.done():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), KEEPALIVE_S)
                if gone.done():
                    break
                data, waiting[:] = (waiting[0] if waiting else b": keep\n\n"), []
                wake.clear()
                await send({"type": "http.response.body", "body": data, "more_body": True})
        except OSError:  # the client went while a message was written
            pass
        finally:
            channel.leave(code, token)
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await gone


async def _disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


@functools.cache
def _plotly_gzip() -> bytes:
    """plotly.js compressed once (4.8 MB → about 1.4 MB: three hundred phones on a classroom's wifi)."""
    return gzip.compress(PLOTLY_JS.read_bytes(), compresslevel=6, mtime=0)


async def _plotly(scope: Scope, send: Send) -> None:
    accepted = b"".join(v for k, v in scope.get("headers", ()) if k.lower() == b"accept-encoding")
    packed = b"gzip" in accepted
    body = _plotly_gzip() if packed else PLOTLY_JS.read_bytes()
    headers = [
        (b"content-type", b"text/javascript; charset=utf-8"),
        (b"cache-control", b"public, max-age=86400"),
        (b"content-length", str(len(body)).encode()),
        *([(b"content-encoding", b"gzip")] if packed else []),
        (b"vary", b"accept-encoding"),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _text(send, status: int, text: str) -> None:
    body = text.encode("utf-8")
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
