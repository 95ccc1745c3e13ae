"""The server's side of who starts a class and one answer a device: the device cookie set on the page's response
(ui/device_cookie.py, wired before Streamlit's own middleware), the client's address through a trusted proxy, the
teachers' heartbeat (live/heartbeat.py) and `atlas app --teacher-password-file`."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from live.address import address_of
from live.heartbeat import Teachers
from ui import device_cookie, serve, streamlit_private


def _client() -> TestClient:
    routes = [Route("/", lambda r: HTMLResponse("<html></html>")), Route("/x", lambda r: JSONResponse({}))]
    return TestClient(Starlette(routes=routes, middleware=[device_cookie_middleware()]))


def device_cookie_middleware():
    from starlette.middleware import Middleware

    return Middleware(device_cookie.DeviceCookie)


def test_the_page_sets_a_device_cookie_once_http_only_and_lax() -> None:
    client = _client()
    first = client.get("/")
    set_cookie = first.headers["set-cookie"]
    assert set_cookie.startswith("atlas_device=") and "HttpOnly" in set_cookie and "SameSite=Lax" in set_cookie
    device = first.cookies["atlas_device"]
    assert device_cookie.sent(f"other=1; atlas_device={device}") == device
    again = client.get("/")  # the browser sends it back: the same device, nothing set again
    assert "set-cookie" not in again.headers
    assert "set-cookie" not in TestClient(client.app).get("/x").headers  # only the page's own response


def test_a_forged_device_cookie_is_no_cookie() -> None:
    assert device_cookie.sent("atlas_device=short") is None
    assert device_cookie.sent("atlas_device=" + "x" * 65) is None
    assert device_cookie.sent("atlas_device=<script>alert(1)</script>aaaaaaaa") is None
    fresh = _client().get("/", headers={"cookie": "atlas_device=short"})
    assert "set-cookie" in fresh.headers


def test_atlas_app_puts_the_device_cookie_before_streamlits_middleware(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.web.server.starlette import starlette_app

    monkeypatch.setattr(starlette_app, "create_streamlit_middleware", starlette_app.create_streamlit_middleware)
    streamlit_private.serve_class_middleware()
    streamlit_private.serve_class_middleware()  # twice is once
    stack = [m.cls for m in starlette_app.create_streamlit_middleware()]
    assert stack[0] is device_cookie.DeviceCookie and stack.count(device_cookie.DeviceCookie) == 1


def test_the_address_is_the_proxys_forwarded_one_only_from_a_trusted_proxy() -> None:
    assert address_of(None, "198.51.100.4, 203.0.113.7", set()) == "203.0.113.7"  # the loopback's proxy: its hop
    assert address_of("10.0.0.2", "203.0.113.7", {"10.0.0.2"}) == "203.0.113.7"
    assert address_of("2001:db8::1", "203.0.113.7", {"2001:DB8:0::1"}) == "203.0.113.7"  # one address, two spellings
    assert address_of("192.0.2.66", "203.0.113.7", {"10.0.0.2"}) == "192.0.2.66"  # a client forging the header
    assert address_of(None, "not an address", set()) == "loopback"
    assert address_of(None, None, set()) == "loopback"


def test_the_heartbeat_touches_the_open_teachers_class_and_forgets_a_closed_one() -> None:
    touched, swept, open_sessions = [], [], {"projector"}
    teachers = Teachers(
        lambda code, key: touched.append(code), open_sessions.__contains__, lambda: swept.append(1), every_s=None
    )
    teachers.teaching("projector", "ABCDE", "key-1")
    teachers.teaching("closed-tab", "FGHJK", "key-2")
    teachers.beat()
    assert touched == ["ABCDE"] and len(teachers) == 1 and swept == [1]

    def ended(code: str, key: str) -> None:
        raise ValueError("there is no class ABCDE on this server")

    teachers._touch = ended  # the class ended meanwhile
    teachers.teaching("projector", "ABCDE", "key-1")
    teachers.beat()  # the class ended meanwhile: forgotten, no traceback
    assert len(teachers) == 0


@pytest.mark.parametrize(
    ("content", "said"),
    [(b"", "is empty"), (b"x" * 2000, "more than 1024 bytes"), (None, "is not a file")],
)
def test_a_teacher_password_file_that_is_none_is_said_in_one_line(tmp_path: Path, content, said) -> None:
    path = tmp_path / "password"
    if content is not None:
        path.write_bytes(content)
    password, problem = serve.teacher_password(str(path))
    assert password is None and said in problem


def test_the_teacher_password_is_the_files_first_line(tmp_path: Path) -> None:
    path = tmp_path / "password"
    path.write_text("correct horse\nnot this\n")
    assert serve.teacher_password(str(path)) == ("correct horse", None)


def test_atlas_app_with_a_missing_password_file_stops_in_one_line(tmp_path: Path, capsys) -> None:
    assert serve.main(["--teacher-password-file", str(tmp_path / "none")]) == 2
    said = capsys.readouterr().err.strip()
    assert said.startswith("atlas app: the teacher password file") and "\n" not in said
