"""Tests for the LM corpus readers and filters in ``training.data.lm`` (tiny in-memory inputs, no network)."""

from __future__ import annotations

import bz2
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from rdata.conversion import convert_python_to_r_data
from rdata.unparser import unparse_data

from training.data import lm


def _rds(value: object) -> bytes:
    return unparse_data(convert_python_to_r_data(value))


def _write_lazyload_db(folder: Path, variables: dict[str, object], compression: int) -> Path:
    """A lazy-load database as R writes one: each object length-prefixed and compressed, an index beside."""
    rdb, offsets = b"", {}
    for name, value in variables.items():
        data = _rds(value)
        packed = zlib.compress(data) if compression == 1 else b"2" + bz2.compress(data)
        offsets[name] = np.array([len(rdb), 4 + len(packed)], dtype=np.int32)
        rdb += struct.pack(">I", len(data)) + packed
    (folder / "Rdata.rdb").write_bytes(rdb)
    index = {"variables": offsets, "references": {}, "compressed": np.array([compression], dtype=np.int32)}
    (folder / "Rdata.rdx").write_bytes(_rds(index))
    return folder / "Rdata.rdx"


@pytest.mark.parametrize("compression", [1, 3])
def test_read_lazyload_db_returns_every_variable(tmp_path: Path, compression: int) -> None:
    books = {"emma": np.array(["EMMA", "", "Emma Woodhouse, handsome"]), "ints": np.array([7, -8], dtype=np.int32)}
    variables = lm.read_lazyload_db(_write_lazyload_db(tmp_path, books, compression))
    assert sorted(variables) == ["emma", "ints"]
    assert variables["emma"].tolist() == ["EMMA", "", "Emma Woodhouse, handsome"]
    assert variables["ints"].tolist() == [7, -8]


def test_lazyload_entry_refuses_a_wrong_length() -> None:
    blob = struct.pack(">I", 99) + zlib.compress(b"abc")
    with pytest.raises(ValueError, match="holds 3 bytes, its header says 99"):
        lm.lazyload_entry(blob, 1)


def _ztext_module(entries_by_block: list[list[str]]) -> tuple[bytes, bytes, bytes]:
    """A SWORD zText testament: one zlib block per inner list, one index slot per entry, empty slot first."""
    bzs, bzv, bzz = b"", struct.pack("<IIH", 0, 0, 0), b""
    for number, entries in enumerate(entries_by_block):
        text = b"".join(e.encode() for e in entries)
        packed = zlib.compress(text)
        bzs += struct.pack("<III", len(bzz), len(packed), len(text))
        bzz += packed
        start = 0
        for entry in entries:
            bzv += struct.pack("<IIH", number, start, len(entry.encode()))
            start += len(entry.encode())
    return bzs, bzv, bzz


def test_ztext_entries_reads_every_verse_across_blocks_in_order() -> None:
    module = _ztext_module([["In the beginning", "God’s Spirit"], ["Jesus wept."]])
    assert list(lm.ztext_entries(*module)) == ["In the beginning", "God’s Spirit", "Jesus wept."]


def test_osis_text_keeps_the_verse_and_drops_markup_notes_and_headings() -> None:
    entry = (
        '<title type="main">Matthew</title><chapter n="1" sID="Matt.1"/>'
        '<w lemma="strong:G2424">Jesus</w> <w lemma="strong:G5547">Christ</w>,'
        '<note placement="foot"><reference>1:1 </reference>Messiah (Hebrew)</note>'
        '<w>the</w> <w>son</w> of <w>David</w><note n="b">or, seed</note>. <l level="1"/>Amen&amp;amen'
    )
    assert lm.osis_text(entry) == ["Jesus Christ, the son of David. Amen&amen"]


def test_osis_text_splits_paragraphs_and_drops_editorial_matter_and_cut_tags() -> None:
    entry = (
        '<div sID="g2" type="front"/>Preface to the reader.<div eID="g2" type="front"/>'
        'First part.<div sID="g3" type="x-p"/>Second part. ———— <div eID="g3" type="x-p"/><div sID="g4" type="x-p"/>'
        "——<d"
    )
    assert lm.osis_text(entry) == ["First part.", "Second part. ————"]


def test_gutenberg_body_is_the_text_between_the_markers() -> None:
    text = (
        "Licence\r\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\r\nCall me Ishmael.\r\nEnd of Project Gutenberg's X"
    )
    assert lm.gutenberg_body(text).split() == ["Call", "me", "Ishmael."]
    with pytest.raises(ValueError, match="START OF"):
        lm.gutenberg_body("no markers here")


def test_moby_dick_paragraphs_drop_front_matter_headings_and_epilogue_title() -> None:
    body = "ETYMOLOGY.\n\nThe pale Usher.\n\nCHAPTER 1. Loomings.\n\nCall me\nIshmael.\n\nEpilogue\n\nThe drama's done."
    assert lm.austen_paragraphs(body.splitlines()) == ["Call me Ishmael.", "The drama's done."]


def _blocklist(tmp_path: Path) -> lm.Blocklist:
    path = tmp_path / "list.txt"
    path.write_text("# comment\n[profanity]\ndamn\nfrick*  # prefix\n[slurs]\nslurword\n", encoding="utf-8")
    return lm.load_blocklist(path)


def test_blocklist_matches_whole_words_and_prefixes(tmp_path: Path) -> None:
    blocklist = _blocklist(tmp_path)
    assert blocklist == lm.Blocklist(frozenset({"damn", "slurword"}), ("frick",))
    assert lm.blocklist_match("Damn, it rained.", blocklist) == "damn"
    assert lm.blocklist_match("Those FRICKING geese", blocklist) == "frick*"
    assert lm.blocklist_match("The dam held; a damnation sermon", blocklist) is None


def test_blocklist_reads_only_the_sections_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "list.txt"
    path.write_text("[profanity]\ndamn\n[slurs]\nslurword\nslur*\n", encoding="utf-8")
    assert lm.load_blocklist(path, sections=["slurs"]) == lm.Blocklist(frozenset({"slurword"}), ("slur",))


def test_shipped_blocklist_is_its_four_sections_and_has_no_blank_prefix() -> None:
    everything = lm.load_blocklist()
    names = ("profanity", "slurs", "slurs with innocent senses", "sexual")
    sections = [lm.load_blocklist(sections=[name]) for name in names]
    assert all(section.words or section.prefixes for section in sections)
    assert everything.words == frozenset().union(*(s.words for s in sections))
    assert sorted(everything.prefixes) == sorted(p for s in sections for p in s.prefixes)
    assert "" not in everything.prefixes


def test_nlp_corpus_filter_says_why_each_line_goes(tmp_path: Path) -> None:
    blocklist = _blocklist(tmp_path)
    lines = [
        "The committee adopted the resolution.",
        "Damn, that film was long.",
        "Didn\ufffdt I mention that?",
        "Sons of God (\u05d1\u05e0\u05d9) is a phrase.",
        "Best pizza ever \U0001f355 in town",
        "See https://example.org for more.",
        "Woof!",
        "IT HAS VERY GOOD PRICES.",
    ]
    kept, removed = lm.sift(lines, lambda line: lm.nlp_corpus_rejection(line, blocklist))
    assert kept == ["The committee adopted the resolution."]
    assert removed == {
        "offensive: damn": 1,
        "broken encoding (U+FFFD or control characters)": 1,
        "letters of a non-Latin script": 1,
        "emoji or other symbols": 1,
        "URL or e-mail address": 1,
        "fewer than 3 words": 1,
        "no lower-case letter": 1,
    }


def test_latin_letters_with_accents_are_kept(tmp_path: Path) -> None:
    assert lm.nlp_corpus_rejection("Jürgen ate crème brûlée in Zürich.", _blocklist(tmp_path)) is None


def test_sifting_by_blocklist_counts_lines_per_entry(tmp_path: Path) -> None:
    blocklist = _blocklist(tmp_path)
    lines = ["a slurword here", "fine line", "frickin slurword"]
    kept, removed = lm.sift(lines, lambda line: lm.blocklist_match(line, blocklist))
    assert kept == ["fine line"]
    assert removed == {"slurword": 1, "frick*": 1}


def test_clean_lm_lines_drops_lines_seen_in_an_earlier_source() -> None:
    seen: set[str] = set()
    assert list(lm.clean_lm_lines(["Amen.", "Peace be with you."], seen)) == ["Amen.", "Peace be with you."]
    assert list(lm.clean_lm_lines(["Amen.", "New line."], seen)) == ["New line."]


def test_heldout_lines_that_repeat_train_up_to_case_and_punctuation_go() -> None:
    splits = {
        "train": ["And God said, let there be light.", "Amen."],
        "valid": ["and god said let there be light", "A new sentence.", "Fresh words!"],
        "test": ["AMEN!", "a new sentence", "Only in test."],
    }
    kept, removed = lm.drop_heldout_overlap(splits)
    assert kept == {
        "train": ["And God said, let there be light.", "Amen."],
        "valid": ["A new sentence.", "Fresh words!"],
        "test": ["Only in test."],
    }
    assert removed == {"valid": 1, "test": 2}


def test_novel_chapters_split_at_headings_and_drop_front_matter() -> None:
    lines = ["EMMA", "", "By Jane Austen", "", "CHAPTER I", "", "Emma Woodhouse,", "handsome.", "", "Yes.", ""]
    lines += ["CHAPTER II", "", "Mr. Weston was a native of Highbury.", "", "THE END"]
    assert lm.novel_chapters(lines) == [["Emma Woodhouse, handsome.", "Yes."], ["Mr. Weston was a native of Highbury."]]


def test_bible_chapters_start_at_each_chapter_milestone_even_inside_an_entry() -> None:
    entries = [
        '<chapter n="1" osisID="Gen.1" sID="Gen.1"/>',
        "In the beginning.",
        'The end of one.<chapter eID="Gen.1"/><chapter n="2" osisID="Gen.2" sID="Gen.2"/>',
        "The heavens were finished.",
    ]
    assert lm.bible_chapters(entries) == [["In the beginning.", "The end of one."], ["The heavens were finished."]]


def test_clean_documents_join_paragraphs_and_drop_repeats_and_slur_paragraphs(tmp_path: Path) -> None:
    slurs = _blocklist(tmp_path)
    seen: set[str] = set()
    documents = [["One  paragraph.", "A slurword here.", "Two."], ["Alone."], ["One paragraph.", "Two."]]
    kept, removed = lm.clean_documents(documents, slurs, seen)
    assert kept == [["One paragraph.", "Two."], ["Alone."]]
    assert removed == {"slurword": 1}
    assert lm.clean_documents([["Alone."]], slurs, seen)[0] == []


def test_shuffled_sentences_are_grouped_in_order_into_documents() -> None:
    sentences = [[f"Sentence {i}."] for i in range(35)]
    documents = lm.group_sentences(sentences, 16)
    assert [len(d) for d in documents] == [16, 16, 3]
    assert [s for d in documents for s in d] == [s[0] for s in sentences]
