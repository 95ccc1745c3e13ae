"""Text that UTF-8 cannot write (a lone surrogate: "\\ud800" in JSON, surrogateescape'd bytes in Python) never
reaches a page or a file: the text the analysis reads is repaired visibly, `atlas.save` and the exports refuse an
Analysis holding one with a line naming the field, and a link's text holding one is refused. (read_trace's own
refusals: tests/test_imported.py, CRAFTED.)"""

from __future__ import annotations

import base64
import dataclasses
import zlib

import pytest
from streamlit.runtime.state.query_params import _parse_query_string

import atlas
from analysis.export import to_json, to_npz_bytes
from analysis.record import Analysis
from inference.prediction import Prediction
from ui.state import PACKED, linked_text, pack_text

SURROGATE = "\ud800"


@pytest.fixture(scope="module")
def tiny_analysis(tiny_checkpoints) -> Analysis:
    return atlas.analyze(atlas.load(tiny_checkpoints["decoder-only"]), "abcab")


# --- the text the analysis reads, and the files it is saved to ------------------------------------------------------


@pytest.mark.parametrize("suffix", ["json", "npz"])
def test_a_lone_surrogate_in_the_text_is_replaced_said_and_saved(tiny_checkpoints, tmp_path, suffix) -> None:
    analysis = atlas.analyze(atlas.load(tiny_checkpoints["decoder-only"]), f"ab{SURROGATE}c")
    assert analysis.text == "ab\ufffdc" and any("surrogates" in note for note in analysis.notes)
    back = atlas.read_trace(atlas.save(analysis, tmp_path / f"t.{suffix}"))
    assert back.text == "ab\ufffdc"


ODD_BUT_TEXT = "tiny 😀 \ufffd \u202eevil\u202c 注意 \x00 \u200d"  # every one of these UTF-8 writes


@pytest.mark.parametrize("suffix", ["json", "npz"])
def test_any_text_utf8_writes_goes_through_save_and_read_trace_unchanged(tiny_analysis, tmp_path, suffix) -> None:
    odd = dataclasses.replace(tiny_analysis, checkpoint=ODD_BUT_TEXT, text=ODD_BUT_TEXT)
    back = atlas.read_trace(atlas.save(odd, tmp_path / f"odd.{suffix}"))
    assert (back.checkpoint, back.text, back.target_pieces) == (ODD_BUT_TEXT, ODD_BUT_TEXT, odd.target_pieces)


def with_surrogate(analysis: Analysis, field: str) -> Analysis:
    """`analysis` with a lone surrogate in `field`, as an Analysis built by hand may hold one."""
    if field == "target_tokens":
        pieces = (*analysis.target_pieces[:2], SURROGATE, *analysis.target_pieces[3:])
        return dataclasses.replace(analysis, target_pieces=pieces)
    if field == "predictions":
        first = (Prediction(SURROGATE, 1, 0.5), *analysis.predictions[0][1:])
        return dataclasses.replace(analysis, predictions=(first, *analysis.predictions[1:]))
    return dataclasses.replace(analysis, **{field: f"ab{SURROGATE}"})


NAMED = {
    "checkpoint": r"^checkpoint holds \\ud800 at character 3",
    "text": r"^text holds \\ud800 at character 3",
    "target_tokens": r"^target_tokens: token 3 holds \\ud800 at character 1",
    "predictions": r"^predictions at position 1: a token holds \\ud800",
}


@pytest.mark.parametrize("suffix", ["json", "npz"])
@pytest.mark.parametrize("field", NAMED)
def test_save_refuses_a_lone_surrogate_naming_the_field_and_writes_nothing(tiny_analysis, tmp_path, field, suffix):
    path = tmp_path / f"bad.{suffix}"
    with pytest.raises(ValueError, match=NAMED[field] + r".*a trace file \(UTF-8\) cannot hold it$") as caught:
        atlas.save(with_surrogate(tiny_analysis, field), path)
    assert not isinstance(caught.value, UnicodeError) and str(caught.value).encode("utf-8")
    assert not path.exists()


@pytest.mark.parametrize("export", [to_json, to_npz_bytes], ids=["json", "npz"])
def test_the_pages_downloads_refuse_it_in_the_same_words(tiny_analysis, export) -> None:
    """The Explore page's download buttons call these two (ui.cache)."""
    with pytest.raises(ValueError, match=r"^text holds \\ud800") as caught:
        export(with_surrogate(tiny_analysis, "text"))
    assert not isinstance(caught.value, UnicodeError)


# --- links -----------------------------------------------------------------------------------------------------------


def test_a_browsers_link_cannot_spell_a_lone_surrogate() -> None:
    """What the link parser is given: Streamlit reads the percent-escaped UTF-8 of U+D800 as three U+FFFD (the text
    box shows them), and a packed text's bytes are decoded strictly."""
    assert _parse_query_string("text=%ED%A0%80") == {"text": ["\ufffd" * 3]}
    assert linked_text("\ufffd" * 3) == "\ufffd" * 3
    cesu = PACKED + base64.urlsafe_b64encode(zlib.compress(b"ab\xed\xa0\x80")).decode().rstrip("=")
    with pytest.raises(ValueError):
        linked_text(cesu)


@pytest.mark.parametrize("value", [f"ab{SURROGATE}", b"ca\xe9".decode("utf-8", "surrogateescape")])
def test_a_linked_text_holding_a_lone_surrogate_is_refused_naming_it(value: str) -> None:
    with pytest.raises(ValueError, match=r"^a linked text that holds \\ud\w{3} at character 3, half of"):
        linked_text(value)


def test_a_linked_text_reads_back_as_itself_plain_or_packed() -> None:
    for text in (ODD_BUT_TEXT, ODD_BUT_TEXT * 200):
        assert linked_text(pack_text(text)) == text
