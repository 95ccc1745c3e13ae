"""Task translate: English -> German sentence pairs from the Ding dictionary (Debian ``trans-de-en``)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from pathlib import Path

from training.data.common import (
    SPACE_BEFORE_PUNCT,
    SourceError,
    dpkg_version,
    license_field,
    normalize_text,
    train_tokenizer,
    write_lines,
    write_manifest,
)

DING_PATH = Path("/usr/share/trans/de-en")
DING_COPYRIGHT = Path("/usr/share/doc/trans-de-en/copyright")
TRANSLATE_HELDOUT = 1_000
TRANSLATE_VOCAB = 6_000


_DING_ANNOTATION = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>|\([^()]*\)")
_SLASH_VARIANTS = re.compile(r"(\w[\w'-]*)(?:/[\w'-]+)+")
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
    return SPACE_BEFORE_PUNCT.sub(r"\1", text)


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
