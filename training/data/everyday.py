"""Two small Debian sources of everyday English with its German, for the translator's training split only.

* Tux Paint's stamps (``tuxpaint-stamps-default``, GPL-2): each picture's caption, in English on its text file's
  first line and in German on its ``de.utf8=`` line ("A cup of coffee." / "Eine Tasse Kaffee."), translated by
  Tux Paint's translators;
* GCompris's vocabulary (``gcompris-qt-data``, GPL-3+; the word and picture set from Art4Apps, CC-BY-SA-3.0): the
  ``lang`` activity's words, English and German joined on their sound file ("umbrella" / "der Regenschirm"),
  read from the Qt resource file the package ships (``qt_resources``: no Qt needed).

Both are tiny beside the other sources (about 300 sentence pairs and 1,000 words) but name the things a class
types and the small model got wrong; training.data.translate repeats them as it does the course's pairs.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

from training.data.common import SourceError, apt_deb, normalize_text
from training.data.pairs import clean_pairs, is_offensive, is_plain_text, n_words, pair_key

Pair = tuple[str, str]
TUXPAINT_DEB = "tuxpaint-stamps-default"
STAMPS = Path("usr/share/tuxpaint/stamps")
GCOMPRIS_DEB = "gcompris-qt-data"
GCOMPRIS_LANG = Path("usr/share/gcompris-qt/rcc/lang.rcc")
LANG_CONTENT = "gcompris/src/activities/lang/resource/content-{}.json"
_GERMAN = "de.utf8="
_MAX_RESOURCE = 64 << 20  # bytes one resource may unpack to: the package's own are far smaller


def stamp_caption(text: str) -> Pair | None:
    """(English, German) of one stamp's text file: its first line and its ``de.utf8=`` line; None without German."""
    lines = text.splitlines()
    german = [line[len(_GERMAN) :] for line in lines[1:] if line.startswith(_GERMAN)]
    if not lines or not german:
        return None
    en, de = normalize_text(lines[0]), normalize_text(german[0])
    return (en, de) if en and de else None


def stamp_captions(root: Path) -> list[Pair]:
    """Every stamp's caption pair under ``root``'s stamps folder, files in path order."""
    files = sorted((root / STAMPS).rglob("*.txt"))
    pairs = [stamp_caption(path.read_text(encoding="utf-8", errors="replace")) for path in files]
    return [pair for pair in pairs if pair is not None]


def qt_resources(data: bytes) -> dict[str, bytes]:
    """The files of a Qt binary resource (.rcc, format 1-3), by path: Qt's own layout (a "qres" header, then a tree
    of nodes, a name table and a data table; a file's bytes zlib-compressed when its node says so)."""

    def unpack(fmt: str, at: int) -> tuple:
        if at < 0 or at + struct.calcsize(fmt) > len(data):
            raise SourceError("Qt resource: an offset points past the file's end")
        return struct.unpack_from(fmt, data, at)

    if data[:4] != b"qres":
        raise SourceError("not a Qt resource file (no 'qres' header)")
    version, tree, table, names = unpack(">IIII", 4)
    if not 1 <= version <= 3:
        raise SourceError(f"Qt resource format {version}: only 1 to 3 are read")
    node_size = 14 if version == 1 else 22

    def name(offset: int) -> str:
        (length,) = unpack(">H", names + offset)
        start = names + offset + 6
        return data[start : start + 2 * length].decode("utf-16-be")

    files: dict[str, bytes] = {}
    stack, seen = [(0, "")], set()
    while stack:
        index, prefix = stack.pop()
        if index in seen or len(seen) > 1_000_000:
            raise SourceError("Qt resource: its tree loops")
        seen.add(index)
        at = tree + index * node_size
        name_offset, flags = unpack(">IH", at)
        path = f"{prefix}/{name(name_offset)}" if index else ""
        if flags & 2:  # a directory: its children are consecutive nodes
            count, first = unpack(">II", at + 6)
            stack += [(first + k, path) for k in range(count)]
            continue
        (offset,) = unpack(">I", at + 10)
        (size,) = unpack(">I", table + offset)
        raw = data[table + offset + 4 : table + offset + 4 + size]
        if flags & 4:
            raise SourceError(f"Qt resource {path}: zstd-compressed, which this reader does not unpack")
        if flags & 1:  # qCompress: the unpacked size, then a zlib stream
            unpacker = zlib.decompressobj()
            raw = unpacker.decompress(raw[4:], _MAX_RESOURCE)
            if unpacker.unconsumed_tail:
                raise SourceError(f"Qt resource {path}: unpacks to more than {_MAX_RESOURCE} bytes")
        files[path.lstrip("/")] = raw
    return files


def vocabulary_pairs(english: dict[str, str], german: dict[str, str]) -> list[Pair]:
    """(English, German) of each key both word lists have, in the English list's order; blank ones left out."""
    pairs = [(normalize_text(en), normalize_text(german.get(key) or "")) for key, en in english.items()]
    return [(en, de) for en, de in pairs if en and de]


def lang_words(resources: dict[str, bytes]) -> list[Pair]:
    """The lang activity's English and German word lists, joined on their keys."""
    try:
        english, german = (json.loads(resources[LANG_CONTENT.format(code)]) for code in ("en", "de"))
    except (KeyError, ValueError) as exc:
        raise SourceError(f"GCompris lang resource: no readable {LANG_CONTENT.format('en|de')}") from exc
    if not (isinstance(english, dict) and isinstance(german, dict)):
        raise SourceError("GCompris lang resource: its word lists are not JSON objects")
    return vocabulary_pairs(english, german)


def fetch_tuxpaint(tmp: Path) -> tuple[list[Pair], dict]:
    root, version, deb_sha = apt_deb(TUXPAINT_DEB, tmp)
    pairs = stamp_captions(root)
    if not pairs:
        raise SourceError(f"Debian {TUXPAINT_DEB}: no stamp caption with German under {STAMPS}")
    return pairs, {
        "name": "Tux Paint's stamps: each picture's caption in English and German (everyday things)",
        "package": f"Debian {TUXPAINT_DEB} {version}",
        "obtained_from": f"apt-get download {TUXPAINT_DEB}; {STAMPS}/**/*.txt (first line, de.utf8= line)",
        "deb_sha256": deb_sha,
        "license": "GPL-2",
        "license_file": f"/usr/share/doc/{TUXPAINT_DEB}/copyright",
        "translation": "human (Tux Paint's translators)",
        "pairs_extracted": len(pairs),
    }


def fetch_gcompris(tmp: Path) -> tuple[list[Pair], dict]:
    root, version, deb_sha = apt_deb(GCOMPRIS_DEB, tmp)
    path = root / GCOMPRIS_LANG
    if not path.is_file():
        raise SourceError(f"Debian {GCOMPRIS_DEB}: no {GCOMPRIS_LANG}")
    pairs = lang_words(qt_resources(path.read_bytes()))
    return pairs, {
        "name": "GCompris's vocabulary: the lang activity's words in English and German (single words, nouns with "
        "their article)",
        "package": f"Debian {GCOMPRIS_DEB} {version}",
        "obtained_from": f"apt-get download {GCOMPRIS_DEB}; {GCOMPRIS_LANG}: {LANG_CONTENT.format('en')} joined "
        f"with {LANG_CONTENT.format('de')} on their keys",
        "deb_sha256": deb_sha,
        "license": "GPL-3+; the word and picture set CC-BY-SA-3.0 (Art4Apps), as the copyright file says",
        "license_file": f"/usr/share/doc/{GCOMPRIS_DEB}/copyright",
        "translation": "human (GCompris's German translators)",
        "pairs_extracted": len(pairs),
    }


def clean_words(pairs: list[Pair], offensive: tuple) -> tuple[list[Pair], dict]:
    """A word list's own filters (a sentence source's length rules would drop every word): plain text, at most
    four words a side, translated, nothing offensive; then one pair per English word. Counts as clean_source's."""
    checks = [
        ("not_plain_text", lambda p: is_plain_text(p[0]) and is_plain_text(p[1])),
        ("more_than_4_words", lambda p: n_words(p[0]) <= 4 and n_words(p[1]) <= 4),
        ("untranslated", lambda p: pair_key(p[0]) != pair_key(p[1])),
        ("offensive", lambda p: not (is_offensive(p[0], *offensive) or is_offensive(p[1], *offensive))),
    ]
    return clean_pairs(pairs, checks)
