"""training.data.everyday: Tux Paint's captions and GCompris's words, read as the packages ship them (a Qt resource
file built here the way Qt lays one out)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest

from training.data import everyday as ev
from training.data.common import SourceError
from training.data.pairs import load_word_list


def qt_resource(files: dict[str, bytes], compress: bool = True, version: int = 3) -> bytes:
    """A Qt .rcc holding `files` (paths of one folder level below the root): header, tree, data, names."""
    folders: dict[str, dict[str, bytes]] = {}
    for path, data in files.items():
        folder, name = path.split("/")
        folders.setdefault(folder, {})[name] = data
    names, data_table, nodes = b"", b"", []

    def name_offset(name: str) -> int:
        nonlocal names
        offset = len(names)
        names += struct.pack(">HI", len(name), 0) + name.encode("utf-16-be")
        return offset

    def node(name: int, flags: int, a: int, b: int) -> bytes:
        body = struct.pack(">IHII", name, flags, a, b) if flags & 2 else struct.pack(">IHHHI", name, flags, 0, 0, b)
        return body + (b"\0" * 8 if version > 1 else b"")

    nodes.append(node(0, 2, len(folders), 1))  # the root: its folders are nodes 1..n
    first_file = 1 + len(folders)
    for folder, contents in folders.items():
        nodes.append(node(name_offset(folder), 2, len(contents), first_file))
        first_file += len(contents)
    for contents in folders.values():
        for name, raw in contents.items():
            payload = struct.pack(">I", len(raw)) + zlib.compress(raw) if compress else raw
            nodes.append(node(name_offset(name), 1 if compress else 0, 0, len(data_table)))
            data_table += struct.pack(">I", len(payload)) + payload
    header_size = 24 if version == 3 else 20
    tree = b"".join(nodes)
    tree_at, data_at = header_size, header_size + len(tree)
    names_at = data_at + len(data_table)
    header = b"qres" + struct.pack(">IIII", version, tree_at, data_at, names_at) + (b"\0" * 4 if version == 3 else b"")
    return header + tree + data_table + names


def test_a_stamp_caption_is_its_first_line_and_its_german_line(tmp_path: Path) -> None:
    assert ev.stamp_caption("A cup of coffee.\nfr.utf8=Une tasse.\nde.utf8=Eine  Tasse Kaffee.\n") == (
        "A cup of coffee.",
        "Eine Tasse Kaffee.",
    )
    assert ev.stamp_caption("A frog.\nfr.utf8=Une grenouille.\n") is None
    assert ev.stamp_caption("") is None
    stamps = tmp_path / ev.STAMPS
    (stamps / "food").mkdir(parents=True)
    (stamps / "food" / "b.txt").write_text("Some bread.\nde.utf8=Etwas Brot.\n", encoding="utf-8")
    (stamps / "food" / "a.txt").write_text("A red umbrella.\nde.utf8=Ein roter Schirm.\n", encoding="utf-8")
    (stamps / "food" / "c.txt").write_text("No German here.\n", encoding="utf-8")
    assert ev.stamp_captions(tmp_path) == [("A red umbrella.", "Ein roter Schirm."), ("Some bread.", "Etwas Brot.")]


@pytest.mark.parametrize(("compress", "version"), [(True, 3), (False, 2), (True, 1)])
def test_a_qt_resource_gives_back_each_file(compress: bool, version: int) -> None:
    files = {"words/content-en.json": b'{"a.ogg": "umbrella"}', "words/notes.txt": b"x" * 300, "other/y": b""}
    assert ev.qt_resources(qt_resource(files, compress, version)) == files


def test_a_damaged_qt_resource_is_refused_with_a_reason() -> None:
    good = qt_resource({"words/a": b"abc"})
    with pytest.raises(SourceError, match="no 'qres' header"):
        ev.qt_resources(b"PK" + good[2:])
    with pytest.raises(SourceError, match="format 9"):
        ev.qt_resources(good[:4] + struct.pack(">I", 9) + good[8:])
    with pytest.raises(SourceError, match="past the file's end"):
        ev.qt_resources(good[:40])


def test_the_lang_words_are_joined_on_their_keys() -> None:
    english = {"umbrella.ogg": "umbrella", "chair.ogg": "chair", "mat.ogg": "mat", "blank.ogg": " "}
    german = {"chair.ogg": "der Stuhl", "umbrella.ogg": "der Regenschirm", "blank.ogg": "leer"}
    files = {
        ev.LANG_CONTENT.format(code): json.dumps(words).encode() for code, words in (("en", english), ("de", german))
    }
    assert ev.lang_words(files) == [("umbrella", "der Regenschirm"), ("chair", "der Stuhl")]
    with pytest.raises(SourceError, match="no readable"):
        ev.lang_words({})


def test_word_pairs_keep_short_translated_inoffensive_ones_once() -> None:
    pairs = [
        ("umbrella", "der Regenschirm"),
        ("Umbrella", "der Schirm"),
        ("radio", "Radio"),
        ("a very long phrase of words", "eine Phrase"),
        ("chair", "der Stuhl"),
    ]
    kept, counts = ev.clean_words(pairs, load_word_list())
    assert kept == [("umbrella", "der Regenschirm"), ("chair", "der Stuhl")]
    assert counts["removed"] == {
        "not_plain_text": 0,
        "more_than_4_words": 1,
        "untranslated": 1,
        "offensive": 0,
        "duplicate": 1,
    }
