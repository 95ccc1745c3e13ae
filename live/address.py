"""A class's addresses: the one its students open, one their own devices reach, never the teacher's loopback; and
the one a client comes from, as the proxy in front forwards it.

The teacher's browser may name the server `localhost` or 127.0.0.1, which a phone cannot open. The students' link
is then built, in this order, from the public address an operator sets (ATLAS_PUBLIC_URL, e.g. behind a proxy),
the teacher's own address when it is not a loopback one, or this machine's network address with the port the page
was opened on. A client's address is X-Forwarded-For's last hop when the connection comes from the loopback or
from ATLAS_TRUSTED_PROXY (one or more addresses), else the connection's peer. Plain Python (no streamlit).
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
from collections.abc import Collection
from urllib.parse import urlsplit

PUBLIC_URL = "ATLAS_PUBLIC_URL"  # environment: the app's address as students reach it (http or https)
TRUSTED_PROXY = "ATLAS_TRUSTED_PROXY"  # environment: the proxies whose X-Forwarded-For is believed (" " or ",")
TRUSTED_PROXIES = {a for a in os.environ.get(TRUSTED_PROXY, "").replace(",", " ").split() if a}
# Where a UDP socket is "connected" to learn the route out (RFC 5737's TEST-NET-1): a UDP connect sends nothing.
ROUTE_PROBE = ("192.0.2.1", 9)
NO_ADDRESS = (
    "No address that students' phones can open is known: set ATLAS_PUBLIC_URL to the app's address, or open "
    "this page by the machine's network address instead of localhost."
)


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (localhost, 127.0.0.0/8, ::1, 0.0.0.0)."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


@functools.lru_cache(maxsize=1)  # asked once a process: the host name's look-up may wait on a resolver
def machine_address() -> str | None:
    """A non-loopback IPv4 address of this machine: the one its default route leaves by, else one its host name
    resolves to; None when it has none (a machine without a network)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(ROUTE_PROBE)
            found = probe.getsockname()[0]
        if not is_loopback(found):
            return found
    except OSError:  # no route out
        pass
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return None
    return next((info[4][0] for info in infos if not is_loopback(info[4][0])), None)


def students_base(page_url: str | None, public: str | None = None, machine: str | None = None) -> tuple[str, str]:
    """(the address students open, without a trailing slash; "") or ("", the one line that says why none is known
    and how to fix it). `page_url`: the teacher's page as their browser opened it; `public`: ATLAS_PUBLIC_URL's
    value (read from the environment when None); `machine`: this machine's address (`machine_address` when None)."""
    public = (os.environ.get(PUBLIC_URL, "") if public is None else public).strip()
    if public:
        parts = urlsplit(public)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return "", "ATLAS_PUBLIC_URL is not an http:// or https:// address, such as https://atlas.example.org."
        return public.rstrip("/"), ""
    parts = urlsplit(page_url or "")
    scheme = parts.scheme if parts.scheme in ("http", "https") else "http"
    if parts.hostname and not is_loopback(parts.hostname):
        return f"{scheme}://{parts.netloc}", ""
    machine = machine_address() if machine is None else machine
    if not machine:
        return "", NO_ADDRESS
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: the scheme's own
        port = None
    return f"{scheme}://{machine}{f':{port}' if port else ''}", ""


def address_of(peer: object, forwarded_for: object, trusted: Collection[str]) -> str:
    """The client's address: X-Forwarded-For's last hop (what the proxy itself added) when the connection's peer is
    the loopback (None) or one of the `trusted` proxies, else the peer; "loopback" when neither is an address."""
    peer = _address(peer)
    forwarded = _address(forwarded_for.split(",")[-1]) if isinstance(forwarded_for, str) else None
    if forwarded and (peer is None or peer in {_address(one) for one in trusted}):
        return forwarded
    return peer or "loopback"


def _address(text: object) -> str | None:
    """`text` as an IP address, or None when it is none (a forged header's junk among them)."""
    try:
        return str(ipaddress.ip_address(text.strip())) if isinstance(text, str) else None
    except ValueError:
        return None
