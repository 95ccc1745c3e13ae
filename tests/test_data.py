"""Tests for the pure parsing/cleaning helpers in ``training.data`` (no network, no apt)."""

from __future__ import annotations

import gzip
import struct
import zlib

import pytest

from training.data import lm, rds, reverse, translate


def test_clean_ding_text_strips_annotations_and_slash_variants() -> None:
    raw = "Ich mache mir Sorge/Besorgnis {f} [ugs.] (um jdn.) <Sorgen> um ihn."
    assert translate.clean_ding_text(raw) == "Ich mache mir Sorge um ihn."
    assert translate.clean_ding_text("That\u2019s  beneath him .") == "That's beneath him."


def test_parse_ding_line_aligns_subentries_and_filters_sentences() -> None:
    line = (
        "Stolz {m} | verletzter Stolz | Ich bin stolz auf meine Arbeit.; Ich bin stolz. | Mach das/dies! "
        ":: pride | wounded pride | I am proud of my work.; I'm proud. | Do this/that!\n"
    )
    assert translate.parse_ding_line(line) == [("I am proud of my work.", "Ich bin stolz auf meine Arbeit.")]


@pytest.mark.parametrize(
    "line",
    [
        "# Version :: devel 2023-01-30",
        "Abfluss {m} :: outflow",
        "a | b :: only one side",
        "Es war von Anfang an / von vornherein klar. :: It was clear from the start / beginning.",
        "Er hat es etw. gegeben. :: He gave sth. to him.",
        "Und so weiter ... :: And so on and so forth...",
    ],
)
def test_parse_ding_line_rejects(line: str) -> None:
    assert translate.parse_ding_line(line) == []


def test_extract_ding_pairs_dedupes_by_english() -> None:
    lines = [
        "Das ist gut. :: That is good.",
        "Das ist fein. :: That is good.",
        "Er lacht laut. :: He laughs loudly.",
    ]
    assert translate.extract_ding_pairs(lines) == [
        ("That is good.", "Das ist gut."),
        ("He laughs loudly.", "Er lacht laut."),
    ]


def test_brown_line_to_text() -> None:
    line = (
        "\t``/`` Only/rb a/at handful/nn ''/'' ,/, the/at jury/nn said/vbd ,/, ``/`` considering/in "
        "(/( the/at size/nn )/) ''/'' ./."
    )
    assert lm.brown_line_to_text(line) == '"Only a handful", the jury said, "considering (the size)".'


def test_austen_paragraphs_joins_lines_and_drops_front_matter() -> None:
    lines = [
        "EMMA",
        "",
        "By Jane Austen",
        "",
        "CHAPTER I",
        "",
        "Emma Woodhouse, handsome,",
        "clever.",
        "",
        None,
        "",
        "Chapter 2",
        "",
        '"Yes."',
        "",
        "Finis",
        "",
    ]
    assert lm.austen_paragraphs(lines) == ["Emma Woodhouse, handsome, clever.", '"Yes."']


def test_wordnet_examples() -> None:
    line = (
        '00003993 03 n 01 congener 0 001 @ 00003553 n 0000 | a whole of the same kind; "lard was used , '
        'though butter was more frequent"; "the shopkeeper differs from his congener"  \n'
    )
    assert lm.wordnet_examples(line) == [
        "lard was used, though butter was more frequent",
        "the shopkeeper differs from his congener",
    ]
    assert lm.wordnet_examples('  1 This software and "database" is provided') == []


def test_clean_lm_lines() -> None:
    lines = ["  a\u00a0b  ", "", "a b", "bad\x07line", "caf\u0065\u0301"]
    assert list(lm.clean_lm_lines(lines)) == ["a b", "caf\u00e9"]


def test_split_of_is_deterministic_and_roughly_proportional() -> None:
    lines = [f"line {i}" for i in range(5000)]
    first = [lm.split_of(line, 0, 0.1) for line in lines]
    assert first == [lm.split_of(line, 0, 0.1) for line in lines]
    assert 350 < first.count("test") < 650 and 350 < first.count("valid") < 650


def test_make_reverse_splits_disjoint_and_deterministic() -> None:
    sizes = {"train": 500, "valid": 50, "test": 50}
    splits = reverse.make_reverse_splits(3, sizes)
    assert splits == reverse.make_reverse_splits(3, sizes)
    assert {k: len(v) for k, v in splits.items()} == sizes
    assert not set(splits["train"]) & (set(splits["valid"]) | set(splits["test"]))
    assert not set(splits["valid"]) & set(splits["test"])
    assert all(set(s) <= set(reverse.REVERSE_ALPHABET) and 1 <= len(s) <= 24 for v in splits.values() for s in v)


def _xdr_int(value: int) -> bytes:
    return struct.pack(">i", value)


def _strsxp(items: list[str]) -> bytes:
    out = _xdr_int(16) + _xdr_int(len(items))
    for item in items:
        raw = item.encode()
        out += _xdr_int(9 | (1 << 15)) + _xdr_int(len(raw)) + raw
    return out


def _named_list(names: list[str], values: list[bytes]) -> bytes:
    """VECSXP with a ``names`` attribute (pairlist with tag symbol)."""
    body = _xdr_int(19 | 0x200) + _xdr_int(len(values)) + b"".join(values)
    attr = _xdr_int(2 | 0x400) + _xdr_int(1) + _xdr_int(9) + _xdr_int(5) + b"names" + _strsxp(names)
    return body + attr + _xdr_int(254)


def _header() -> bytes:
    return b"X\n" + _xdr_int(3) + _xdr_int(0x40201) + _xdr_int(0x30500) + _xdr_int(5) + b"UTF-8"


def test_r_unserialize_vectors_and_names() -> None:
    blob = _header() + _named_list(
        ["txt", "ints", "seq"],
        [
            _strsxp(["a", "b"]),
            _xdr_int(13) + _xdr_int(2) + _xdr_int(7) + _xdr_int(-8),
            _xdr_int(238)
            + _xdr_int(2)
            + _xdr_int(1)
            + _xdr_int(9)
            + _xdr_int(14)
            + b"compact_intseq"
            + _xdr_int(254)
            + _xdr_int(14)
            + _xdr_int(3)
            + struct.pack(">3d", 3, 5, 1)
            + _xdr_int(254),
        ],
    )
    assert rds.r_named(rds.r_unserialize(gzip.compress(blob))) == {
        "txt": ["a", "b"],
        "ints": [7, -8],
        "seq": [5, 6, 7],
    }


def test_lazyload_blob_zlib() -> None:
    payload = _header() + _strsxp(["x"])
    blob = struct.pack(">I", len(payload)) + zlib.compress(payload)
    assert rds.r_unserialize(rds._lazyload_blob(blob, 1)) == ["x"]
