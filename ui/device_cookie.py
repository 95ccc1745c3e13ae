"""A browser's device cookie: `atlas_device`, a random id the server sets on the page's response when the browser
sends none, so that reloads and new tabs of one browser are one device of a class (ui/class_session.py reads it with
`st.context.cookies`). HttpOnly (no script reads it), SameSite=Lax, for DAYS days; it holds nothing of the person.
A plain ASGI middleware: ui/streamlit_private.py's `serve_class_middleware` puts it before Streamlit's own."""

from __future__ import annotations

import re
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

COOKIE = "atlas_device"
DAYS = 180
VALID = re.compile(r"[A-Za-z0-9_-]{16,64}")  # what `secrets.token_urlsafe` makes; anything else is no cookie

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGI = Callable[[Scope, Receive, Send], Awaitable[None]]


def sent(cookie_header: str) -> str | None:
    """The device id a request's Cookie header holds, or None (absent or not one the server made)."""
    for part in cookie_header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and VALID.fullmatch(value):
            return value
    return None


class DeviceCookie:
    """Adds `Set-Cookie: atlas_device=…` to an HTML response whose request sent no device cookie."""

    def __init__(self, app: ASGI) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or sent(_header(scope, b"cookie")) is not None:
            await self.app(scope, receive, send)
            return

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                kind = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if kind.startswith(b"text/html"):
                    value = (
                        f"{COOKIE}={secrets.token_urlsafe(16)}; Path=/; Max-Age={DAYS * 86400}; HttpOnly; SameSite=Lax"
                    )
                    headers.append((b"set-cookie", value.encode("ascii")))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_cookie)


def _header(scope: Scope, name: bytes) -> str:
    return b"; ".join(v for k, v in scope.get("headers", []) if k.lower() == name).decode("latin-1")
