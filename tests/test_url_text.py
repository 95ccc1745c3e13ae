"""A text too long to stand in the URL as it is goes in compressed (ui.state.pack_text), so a shared link still
opens it; a packed value that is not one is skipped, never a traceback, and never unpacked past a text's size."""

from __future__ import annotations

import base64
import random
import zlib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_app import LM, ok

from inference.text import MAX_CHARS
from ui.state import PACKED, PLAIN_LONGEST, URL_LONGEST, pack_text, unpack_text

ENGLISH = " ".join(p.read_text() for p in sorted(Path("course/steps").glob("*.md")))[:5000]


def packed(data: bytes) -> str:
    return PACKED + base64.urlsafe_b64encode(data).decode().rstrip("=")


def text_script() -> None:
    """A page with one text kept in the URL as `t`; it shows the text's length and whether the URL holds it."""
    import streamlit as st

    from ui import state

    key = state.url_text("test_only_text", "t")
    state.restore_from_url()
    st.text(f"{len(st.session_state.get(key, ''))} {state.in_url(key)}")
    state.sync_url()


def opened(text: str) -> AppTest:
    at = AppTest.from_function(text_script, default_timeout=30)
    at.query_params["t"] = text
    return ok(at.run())


def test_a_text_up_to_a_thousand_characters_stays_readable_in_the_url() -> None:
    text = "The cat sat on the mat. " * 40
    assert len(text) <= PLAIN_LONGEST and pack_text(text) == text and unpack_text(text) == text


@pytest.mark.parametrize("text", [ENGLISH, "z: a text that looks packed", "é✓😀 " * 2000, ""])
def test_a_packed_text_reads_back_as_itself(text: str) -> None:
    assert unpack_text(pack_text(text)) == text


def test_five_thousand_characters_of_english_fit_a_link() -> None:
    url = pack_text(ENGLISH)
    assert len(ENGLISH) == 5000 and url.startswith(PACKED) and len(url) < 0.7 * len(ENGLISH) < URL_LONGEST


BOMB = zlib.compress(b"\0" * 5_000_000, 9)  # 6,508 characters of URL that would unpack to 5 MB
HOSTILE = {
    "not base64": PACKED + "!!!!",
    "base64 of no zlib": packed(b"plain bytes, not a zlib stream"),
    "a cut stream": packed(zlib.compress(ENGLISH.encode())[:-10]),
    "a stream with more after it": packed(zlib.compress(b"hello") + b"more"),
    "not UTF-8": packed(zlib.compress(b"\xff\xfe\xfd")),
    "a bomb": packed(BOMB),
    "longer than a link": PACKED + "A" * (URL_LONGEST + 4),
}


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_bad_packed_text_is_refused_with_a_value_error(value: str) -> None:
    with pytest.raises(ValueError):
        unpack_text(value)


def test_a_bomb_is_unpacked_no_further_than_a_text_can_be() -> None:
    assert len(packed(BOMB)) < URL_LONGEST  # it reaches the decompressor, which stops at 4 bytes a character
    with pytest.raises(ValueError, match=f"{4 * MAX_CHARS:,} bytes"):
        unpack_text(packed(BOMB))


def test_a_long_text_opens_from_its_link_and_is_written_back_packed() -> None:
    at = opened(pack_text(ENGLISH))
    assert at.text[0].value == "5000 True" and at.query_params["t"] == pack_text(ENGLISH)


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_bad_link_opens_without_the_text_and_without_an_error(value: str) -> None:
    at = opened(value)
    assert at.text[0].value == "0 False" and "t" not in at.query_params


def test_a_text_too_long_even_packed_leaves_the_url_and_says_so() -> None:
    letters = random.Random(0).choices("abcdefghijklmnopqrstuvwxyz ", k=MAX_CHARS)  # compresses to ≈12,000
    at = opened(pack_text("".join(letters[:2000])))
    assert at.text[0].value == "2000 True"
    at.session_state["test_only_text"] = "".join(letters)
    at.run()
    assert at.text[0].value == f"{MAX_CHARS} False" and "t" not in at.query_params


def test_explore_says_when_the_link_does_not_keep_the_text(app) -> None:
    at = ok(app(model=LM, text=pack_text(ENGLISH)))
    assert at.text_area(key="text").value == ENGLISH
    assert any("keeps the model, text, layer and head" in c.value for c in at.caption)
    noise = "".join(random.Random(0).choices("abcdefghijklmnopqrstuvwxyz ", k=15_000))  # ≈9,000 packed
    at.text_area(key="text").input(noise).run()
    assert any("not this text: its 15,000 characters" in c.value for c in ok(at).caption)
    assert "text" not in at.query_params and at.query_params["model"] == LM


REFUSED = {  # a link's packed text that cannot be opened, and the reason the page gives
    "not base64": (HOSTILE["not base64"], "not URL-safe base64"),
    "base64 of no zlib": (HOSTILE["base64 of no zlib"], "zlib cannot unpack"),
    "a bomb": (HOSTILE["a bomb"], f"longer than {4 * MAX_CHARS:,} bytes"),
    "longer than a link": (HOSTILE["longer than a link"], f"longer than a link holds ({URL_LONGEST:,})"),
}


def warnings_of(at: AppTest) -> list[str]:
    return [w.value for w in at.sidebar.warning]


@pytest.mark.parametrize("case", REFUSED)
def test_a_refused_link_text_says_in_one_line_why_it_was_not_opened(app, case: str) -> None:
    value, reason = REFUSED[case]
    at = ok(app(model=LM, text=value))
    [warning] = warnings_of(at)
    assert warning.startswith("The link's text was not opened (") and reason in warning and "\n" not in warning
    assert warning.endswith("; this is the model's first preset sentence.")
    assert at.text_area(key="text").value == ok(app(model=LM)).text_area(key="text").value, "the first preset"


def test_the_refusal_is_said_until_the_person_gives_a_text_of_their_own(app) -> None:
    at = ok(app(model=LM, text=HOSTILE["not base64"]))
    assert len(warnings_of(at)) == 1
    at.text_area(key="text").input("The dog ran.").run()
    assert warnings_of(ok(at)) == []


def test_a_link_whose_text_opens_says_nothing_of_refusal(app) -> None:
    assert warnings_of(ok(app(model=LM, text=pack_text(ENGLISH)))) == []
