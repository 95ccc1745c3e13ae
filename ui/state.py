"""Widget values that outlive a page: kept in the session while another page shows, and in the URL to share a view.

A page declares its own keys where it defines the widgets (`PAPER_THRESHOLD = state.url_key("paper_threshold", float)`);
keys several pages share are declared beside the shared widgets (ui.sidebar, ui.widgets). A declaration is a fact
of the code, the same for every session, so declarations go into one registry for the process, and app.py keeps
and writes back every declared key whichever page is shown.

A session reads its URL once, on its first run. A parameter waits until its key is declared (a page declares its
keys when it runs), and stays in the URL until then, so a link opened on one page keeps another page's choices.
Numbers a person reads count from 1, so the URL does too: an index kept in the URL (`url_index`) is written as
index + 1.
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import threading
import zlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import streamlit as st

from inference.jsonfile import lone_surrogate
from inference.text import MAX_CHARS
from ui.streamlit_private import fragment_alone, in_a_page

PLAIN_LONGEST = 1000  # a kept text up to this many characters goes into the URL as it is: a link a person can read
PACKED = "z:"  # the prefix of a text compressed into the URL (pack_text): zlib, then URL-safe base64
URL_LONGEST = 8000  # the longest value written into the URL, a text compressed: longer ones break shared links
PENDING = "_url_pending"  # session key: the first run's URL parameters that no declared key has taken yet
FROM_URL = "_from_url"  # session key: the keys whose value came from the URL
REFUSED = "_url_refused"  # session key: {key: why} for the URL values that could not be read (`refused`)


def flag(value: str) -> bool:
    """A URL's on/off value: 1, true, yes or on (any case) is on."""
    return value.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Declaration:
    """One declared session key: its URL parameter (None: not in the URL), how the URL's text becomes the value,
    whether the value is a list (comma-joined in the URL), whether it is kept while other pages show, the
    longest value the URL holds (a longer one stays out, so a link stays short), and how a value (a list's item)
    is written into the URL; `keep_off`: a switch off is written (as 0) rather than left out."""

    key: str
    url: str | None
    parse: Callable[[str], object] = str
    is_list: bool = False
    across_pages: bool = True
    longest: int | None = None
    write: Callable[[object], str] = str
    keep_off: bool = False


@dataclass(frozen=True)
class FromOne:
    """Parse a URL's 1-based number into a 0-based index; `words` are special values written as words (a head
    picker's "all" for its average). A number below 1 is refused: 0 would read as the index -1."""

    words: tuple[tuple[str, object], ...] = ()

    def __call__(self, text: str) -> object:
        for word, value in self.words:
            if text.strip().lower() == word:
                return value
        number = int(text)
        if number < 1:
            raise ValueError(f"{number} is not a number counted from 1")
        return number - 1


@dataclass(frozen=True)
class ToOne:
    """Write a 0-based index as the 1-based number a person reads, or a special value as its word (see FromOne)."""

    words: tuple[tuple[str, object], ...] = ()

    def __call__(self, value: object) -> str:
        for word, special in self.words:
            if value == special:
                return word
        return str(int(value) + 1)


_declared: dict[str, Declaration] = {}
_lock = threading.Lock()  # sessions run in threads: one may declare while another reads the registry


def declared() -> list[Declaration]:
    """Every key declared so far, in the order declared."""
    with _lock:
        return list(_declared.values())


def _declare(decl: Declaration) -> str:
    with _lock:
        known = _declared.setdefault(decl.key, decl)
    if known != decl:
        raise ValueError(f"session key {decl.key!r} is declared twice, differently: {known} and {decl}")
    if in_a_page():  # a page running in a session: take the URL's value
        _claim(decl)
    return decl.key


def url_key(
    key: str,
    parse: Callable[[str], object] = str,
    *,
    url: str | None = None,
    across_pages: bool = True,
    longest: int | None = None,
) -> str:
    """Declare widget key `key` kept in the URL as parameter `url` (default: the key), read back with `parse`
    (a ValueError skips the parameter), and in the session while other pages show unless `across_pages` is False.
    Returns `key`, for the widget."""
    return _declare(Declaration(key, url or key, parse, across_pages=across_pages, longest=longest))


def url_index(
    key: str,
    url: str,
    *,
    words: tuple[tuple[str, object], ...] = (),
    across_pages: bool = True,
) -> str:
    """Declare widget key `key`, a 0-based index (a layer, a head, a token position), kept in the URL as parameter
    `url` counted from 1, as its label reads; `words`: special values written as words (`("all", AVERAGE)`)."""
    return _declare(Declaration(key, url, FromOne(words), across_pages=across_pages, write=ToOne(words)))


def url_list(
    key: str,
    url: str,
    parse: Callable[[str], object] = str,
    *,
    write: Callable[[object], str] = str,
) -> str:
    """Declare list widget key `key` (a multiselect) kept in the URL as `url`, its items comma-joined (each read
    with `parse`, written with `write`), and in the session while other pages show. Returns `key`."""
    return _declare(Declaration(key, url, parse, is_list=True, write=write))


def url_switch(key: str, url: str | None = None) -> str:
    """Declare toggle key `key` kept in the URL as parameter `url` (default: the key), 1 for on and 0 for off
    (`flag` reads it): a switch that starts on and is turned off is a choice too. Returns `key`."""
    return _declare(Declaration(key, url or key, flag, keep_off=True, write=on_off))


def on_off(value: object) -> str:
    """A switch as url_switch writes it: 1 or 0."""
    return "1" if value else "0"


def url_text(key: str, url: str | None = None) -> str:
    """Declare text widget key `key` kept in the URL as parameter `url` (default: the key), and in the session while
    other pages show: as it is up to PLAIN_LONGEST characters, compressed above (`pack_text`), and left out of the
    URL when even that is longer than URL_LONGEST characters (`in_url` says so, for the page to tell). Returns
    `key`."""
    return _declare(Declaration(key, url or key, linked_text, longest=URL_LONGEST, write=pack_text))


def linked_text(value: str) -> str:
    """The text a URL's value holds (unpack_text), refused (ValueError, which skips the parameter) when UTF-8
    cannot write it: a lone surrogate in a text box's value breaks every page of the session that draws it.
    Streamlit's own parsing makes one impossible today (it reads `%ED%A0%80` as three U+FFFD, and a packed text is
    decoded strictly), so this holds whatever a later version or another route hands the parser."""
    text = unpack_text(value)
    fault = lone_surrogate(text)
    if fault is not None:
        raise ValueError(f"a linked text that {fault}")
    return text


def pack_text(text: object) -> str:
    """A text as the URL holds it: as it is up to PLAIN_LONGEST characters, else PACKED + its UTF-8 compressed by
    zlib in URL-safe base64 without padding (≈0.6 characters of URL per character of English). A text that
    starts with PACKED is compressed whatever its length, so that it reads back as itself."""
    text = str(text)
    if len(text) <= PLAIN_LONGEST and not text.startswith(PACKED):
        return text
    return PACKED + base64.urlsafe_b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii").rstrip("=")


def unpack_text(value: str) -> str:
    """The text a URL's value holds (see pack_text). A packed value that is not one (not base64, not zlib, cut,
    not UTF-8, longer than URL_LONGEST, or unpacking to more than a text's MAX_CHARS characters can take) raises
    ValueError, which skips the parameter; at most that many bytes are ever unpacked."""
    if not value.startswith(PACKED):
        return value
    body = value[len(PACKED) :]
    if len(body) > URL_LONGEST:
        raise ValueError(f"a packed text of {len(body):,} characters is longer than a link holds ({URL_LONGEST:,})")
    try:
        data = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"a packed text that is not URL-safe base64: {exc}") from exc
    most = 4 * MAX_CHARS  # bytes: UTF-8 takes at most 4 a character
    unpacker = zlib.decompressobj()
    try:
        raw = unpacker.decompress(data, most)
    except zlib.error as exc:
        raise ValueError(f"a packed text that zlib cannot unpack: {exc}") from exc
    if unpacker.unconsumed_tail or not unpacker.eof or unpacker.unused_data:
        raise ValueError(f"a packed text that is cut, followed by more, or longer than {most:,} bytes")
    return raw.decode("utf-8")  # a UnicodeDecodeError is a ValueError


def session_key(key: str) -> str:
    """Declare widget key `key` kept in the session while other pages show, not in the URL. Returns `key`."""
    return _declare(Declaration(key, None))


def _claim(decl: Declaration) -> None:
    """Give `decl` its value from the session's first URL, once; a key the session already holds keeps its value.
    Its parameter leaves the pending ones, those no declared key has taken yet (sync_url keeps them in the link)."""
    pending = st.session_state.get(PENDING)
    if not pending or decl.url not in pending:
        return
    raw = pending.pop(decl.url)
    if decl.key in st.session_state or (decl.is_list and not raw):
        return
    try:
        value = [decl.parse(item) for item in raw.split(",")] if decl.is_list else decl.parse(raw)
    except ValueError as exc:
        st.session_state.setdefault(REFUSED, {})[decl.key] = str(exc)
        return
    st.session_state[decl.key] = value
    st.session_state.setdefault(FROM_URL, set()).add(decl.key)


def refused(key: str) -> str | None:
    """Why the session's link held a value for declared key `key` that could not be read (a packed text that is
    not one: unpack_text's ValueError), for the page to say beside the widget; None when it held none such."""
    return st.session_state.get(REFUSED, {}).get(key)


def restore_from_url() -> None:
    """On a session's first run, read its URL: declared keys take their values now, the others when declared."""
    if PENDING in st.session_state:
        return
    st.session_state[PENDING] = st.query_params.to_dict()
    for decl in declared():
        _claim(decl)


def keep_state() -> None:
    """Re-assign every value kept across pages: Streamlit drops a widget's value on a run that does not draw it."""
    for decl in declared():
        if decl.across_pages and decl.key in st.session_state:
            st.session_state[decl.key] = st.session_state[decl.key]


_after_fragment: list[Callable[[], None]] = []


def after_each_fragment(hook: Callable[[], None]) -> None:
    """Call `hook` after every rerun of a fragment alone (a page's fragment reruns only itself, not app.py's last
    lines: a class's teacher publishes the view from here, ui/class_session.py)."""
    if hook not in _after_fragment:
        _after_fragment.append(hook)


def fragment(body: Callable[..., None], *, run_every: float | None = None) -> Callable[..., None]:
    """`st.fragment(body)` whose every run first keeps the values kept across pages (`keep_state`). A fragment's
    rerun is a script run of its own, which app.py's `keep_state` does not reach, and at its end Streamlit drops
    the value of every kept widget the page does not draw (the Explore page's token position, rerunning Attention
    math's fragment). A page's fragment is declared with this, never with st.fragment (tests/test_state.py).
    `run_every`: seconds between the reruns Streamlit starts by itself (None: none), for a page that declares its
    fragment on each run (ui.player) or a class's follower polling (ui.class_live)."""

    @functools.wraps(body)
    def run(*args: object, **kwargs: object) -> None:
        alone = fragment_alone()  # rerun alone; in a page's run, app.py does
        if alone:
            keep_state()
        body(*args, **kwargs)
        if alone:
            for hook in list(_after_fragment):
                hook()

    return st.fragment(run, run_every=run_every)


def _in_url(decl: Declaration) -> str | None:
    """What the URL holds for `decl`'s current value; None when it holds nothing (no value, off, an empty list, or
    a value longer than `longest`, or one it cannot write: a picker's stale label, which a browser whose options
    the server changed under it (a class's follower) sends back until the page's check replaces it)."""
    value = st.session_state.get(decl.key)
    if decl.url is None or value is None or (value is False and not decl.keep_off) or (decl.is_list and not value):
        return None
    try:
        text = ",".join(map(decl.write, value)) if decl.is_list else decl.write(value)
    except (TypeError, ValueError):
        return None
    return text if decl.longest is None or len(text) <= decl.longest else None


def in_url(key: str) -> bool:
    """Whether the URL holds declared key `key`'s current value: False for a text too long for a link (url_text)."""
    with _lock:
        decl = _declared.get(key)
    return decl is not None and _in_url(decl) is not None


def url_values() -> dict[str, str]:
    """The URL's parameters for the current view: each declared key's value that a link can hold, and the
    parameters no page has declared yet (they stay in the link)."""
    values = dict(st.session_state.get(PENDING, {}))
    for decl in declared():
        text = _in_url(decl)
        if text is not None:
            values[decl.url] = text
    return values


def sync_url() -> None:
    """Write the current view into the URL so that a copied link restores it."""
    values = url_values()
    if st.query_params.to_dict() != values:
        st.query_params.from_dict(values)


@dataclass(frozen=True)
class Between:
    """The allowed values of a number widget: from `low` to `high`, both included."""

    low: float
    high: float


def keep_valid(key: str, allowed: Sequence | Between, default: object, *, owner: Hashable = None) -> None:
    """Before a widget is drawn, make its value (from the URL, another model, another text) one it can show.

    `allowed` is the widget's options or a `Between` range. A value among the options stays; a list value (a
    multiselect's) keeps its items among them, and becomes `default` only when none is left of a non-empty list;
    a number outside the range (infinities too) moves to its nearer end; NaN and anything else becomes `default`.
    `owner` is what the value belongs to, such as the model and text a token position was chosen on: when it
    changes, the value goes back to `default`, never keeping an index that now names another token, unless the
    value came from the URL (a shared link's position belongs to the link's text)."""
    value = st.session_state.get(key, default)
    valid = _within(value, allowed, default)
    if owner is not None:
        owner_key = f"_{key}_owner"
        if st.session_state.get(owner_key) != owner or valid != value:
            from_url = st.session_state.get(FROM_URL, set())
            if key not in from_url:
                valid = default
            from_url.discard(key)
            st.session_state[owner_key] = owner
    st.session_state[key] = valid


def _within(value: object, allowed: Sequence | Between, default: object) -> object:
    if isinstance(allowed, Between):
        if not isinstance(value, int | float) or math.isnan(value):
            return default
        return type(default)(min(max(value, allowed.low), allowed.high))  # ±inf: the nearer end
    if isinstance(default, list):
        if not isinstance(value, list):
            return default
        inside = [item for item in value if item in allowed]
        return inside if inside or not value else default
    return value if value in allowed else default
