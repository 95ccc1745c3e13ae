"""The followers' stream route (ui/class_stream.py), driven as the ASGI server drives it: a stream receives each
message its class's channel publishes, from any thread, and only the latest when it was too slow for some; it leaves
the channel when its client goes; a bad code or a full server is one line, never a stream; plotly.js is served
compressed from the plotly package; any other path is Streamlit's."""

from __future__ import annotations

import asyncio
import gzip
import threading

import pytest

from live import push
from live.push import Channel, message
from ui import class_stream, streamlit_private
from ui.class_stream import PLOTLY_JS, ClassStream

STREAM = {"type": "http", "path": "/_atlas/class-stream", "query_string": b"class=abcde", "headers": []}


async def until(check, what: str) -> None:
    """Wait for a state (the route runs on this loop), failing after ten seconds."""

    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), 10)
    except TimeoutError:
        pytest.fail(f"never came: {what}")


async def streamlit(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 299, "headers": []})
    await send({"type": "http.response.body", "body": b"streamlit's"})


class Browser:
    """One client of the route: what it was sent, and its going away."""

    def __init__(self, slow: bool = False) -> None:
        self.sent: list[dict] = []
        self.going = asyncio.Event()
        self.written = asyncio.Event()  # a slow client reads its socket only when this is set
        if not slow:
            self.written.set()

    async def receive(self) -> dict:
        await self.going.wait()
        return {"type": "http.disconnect"}

    async def send(self, msg: dict) -> None:
        self.sent.append(msg)
        if msg.get("body", b"").startswith(b"data: "):
            await self.written.wait()

    def events(self) -> list[bytes]:
        return [m["body"] for m in self.sent if m.get("body", b"").startswith(b"data: ")]


def test_a_stream_receives_each_message_its_class_publishes_and_leaves_when_its_client_goes() -> None:
    async def scenario() -> None:
        channel, browser = Channel(), Browser()
        route = ClassStream(streamlit, lambda: channel)
        served = asyncio.ensure_future(route(dict(STREAM), browser.receive, browser.send))
        await until(lambda: channel.streams("ABCDE") == 1 and len(browser.sent) == 2, "the stream's opening")
        start = browser.sent[0]
        assert start["status"] == 200 and (b"content-type", b"text/event-stream; charset=utf-8") in start["headers"]
        data = message(2, "", "The cat sat.", [("head_chart", {"data": []})])
        publisher = threading.Thread(target=channel.publish, args=("ABCDE", 2, data))  # the teacher's script thread
        publisher.start()
        publisher.join()
        await until(lambda: browser.events() == [data], "the message")
        channel.publish("OTHER", 3, message(3, "", "another class", []))
        browser.going.set()
        await asyncio.wait_for(served, 10)
        assert browser.events() == [data] and channel.streams() == 0

    asyncio.run(scenario())


def test_a_slow_stream_skips_to_the_latest_message_and_queues_none() -> None:
    async def scenario() -> None:
        channel, browser = Channel(), Browser(slow=True)
        served = asyncio.ensure_future(
            ClassStream(streamlit, lambda: channel)(dict(STREAM), browser.receive, browser.send)
        )
        await until(lambda: channel.streams("ABCDE") == 1, "the stream")
        first, second, third = (message(v, "", f"text {v}", []) for v in (1, 2, 3))
        channel.publish("ABCDE", 1, first)
        await until(lambda: browser.events() == [first], "the first message, being written")
        channel.publish("ABCDE", 2, second)  # while the first is still being written
        channel.publish("ABCDE", 3, third)
        browser.written.set()
        await until(lambda: browser.events() == [first, third], "the latest")
        browser.going.set()
        await asyncio.wait_for(served, 10)
        assert browser.events() == [first, third]

    asyncio.run(scenario())


def test_a_bad_code_or_a_full_server_is_one_line_and_no_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    async def answer(scope, channel: Channel) -> tuple[int, str]:
        browser = Browser()
        await asyncio.wait_for(ClassStream(streamlit, lambda: channel)(scope, browser.receive, browser.send), 10)
        return browser.sent[0]["status"], browser.sent[1]["body"].decode()

    channel = Channel()
    status, text = asyncio.run(answer({**STREAM, "query_string": b"class=%3Cscript%3E"}, channel))
    assert status == 400 and "class code" in text and "\n" not in text and "<" not in text
    monkeypatch.setattr(push, "MAX_LISTENERS", 0)
    status, text = asyncio.run(answer(dict(STREAM), channel))
    assert status == 503 and "\n" not in text and channel.streams() == 0


def test_plotly_js_is_served_from_the_plotly_package_compressed_and_other_paths_are_streamlits() -> None:
    async def get(path: str, headers: list) -> Browser:
        browser = Browser()
        scope = {"type": "http", "path": path, "query_string": b"", "headers": headers}
        await ClassStream(streamlit, Channel)(scope, browser.receive, browser.send)
        return browser

    packed = asyncio.run(get("/app/_atlas/plotly.min.js", [(b"accept-encoding", b"gzip, br")]))
    assert (b"content-encoding", b"gzip") in packed.sent[0]["headers"]
    assert gzip.decompress(packed.sent[1]["body"]) == PLOTLY_JS.read_bytes()
    plain = asyncio.run(get("/_atlas/plotly.min.js", []))
    assert plain.sent[1]["body"] == PLOTLY_JS.read_bytes()
    other = asyncio.run(get("/_stcore/health", []))
    assert other.sent[0]["status"] == 299


def test_atlas_app_puts_the_stream_before_streamlits_middleware(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.web.server.starlette import starlette_app

    monkeypatch.setattr(starlette_app, "create_streamlit_middleware", starlette_app.create_streamlit_middleware)
    streamlit_private.serve_class_middleware()
    stack = starlette_app.create_streamlit_middleware()
    [ours] = [m for m in stack if m.cls is class_stream.ClassStream]
    assert stack.index(ours) == 1 and ours.kwargs["channel"]() is class_stream.CHANNEL
