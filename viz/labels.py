"""Token pieces as safe, readable labels: HTML-escaped for Plotly, invisible characters made visible.

One convention for every model: `▁` is a space (SentencePiece writes a word's leading space so, and a byte-level
BPE's `Ġ` is shown so too), `↵` a new line, `⇥` a tab; a byte that is not a whole character is `<0xE2>`, as
SentencePiece's byte pieces are written."""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Sequence

# Characters that would be invisible, reorder the text around them (bidi controls) or break a label.
_INVISIBLE = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
_SHOWN = {" ": "▁", "\n": "↵", "\t": "⇥"}  # whitespace a label would lose, as the module docstring says


def _byte_table() -> dict[str, int]:
    """GPT-2's `bytes_to_unicode`, inverted: the printable character a byte-level BPE writes → the byte it stands
    for. Printable Latin-1 bytes stand for themselves; the other 68 (space, controls, …) are shifted to U+0100 on,
    in byte order: space is `Ġ` (U+0120), a new line `Ċ` (U+010A), a tab `ĉ` (U+0109)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in kept]
    return {chr(b): b for b in kept} | {chr(256 + i): b for i, b in enumerate(shifted)}


_BYTES = _byte_table()


def from_bytes(piece: str) -> str:
    """The text a byte-level BPE piece stands for (`Ġrights` → " rights", `Ċ` → a new line); bytes that are not a whole
    UTF-8 character as `<0xNN>`. A piece with a character outside the table (an added token) is its own text."""
    if any(ch not in _BYTES for ch in piece):
        return piece
    text = bytes(_BYTES[ch] for ch in piece).decode("utf-8", "surrogateescape")  # a stray byte b → U+DC00 + b
    return "".join(f"<0x{ord(ch) - 0xDC00:02X}>" if "\udc80" <= ch <= "\udcff" else ch for ch in text)


def display_piece(piece: str) -> str:
    """A piece as the reader should see it (the convention of the module docstring): a byte-level BPE's piece
    decoded first, only when it says it is one (a `byte_level` attribute, inference.pretrained.tokenizer.BytePiece:
    the table maps letters such as "ü" too, so a guess would garble a SentencePiece model's German); '▁' word starts
    and byte pieces like <0xF0> as they are; spaces, new lines and tabs as marks; control, format (zero-width, bidi)
    and odd space characters as `\\uXXXX`; an empty piece as '∅'."""
    if piece == "":
        return "∅"
    text = from_bytes(piece) if getattr(piece, "byte_level", False) else piece
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in _SHOWN:
            out.append(_SHOWN[ch])
        elif cat in _INVISIBLE or cat == "Zs":
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    return "".join(out)


def escape(text: str) -> str:
    """Escape `<`, `>`, `&` and quotes: Plotly renders tags such as <b> or <a> in labels and hover text."""
    return html.escape(text, quote=True)


def plotly_labels(pieces: Sequence[str]) -> list[str]:
    """Pieces for Plotly tick labels and hover text: readable, then HTML-escaped."""
    return [escape(display_piece(p)) for p in pieces]


def token_labels(pieces: Sequence[str]) -> list[str]:
    """`12:▁cat`: each piece's position from 1 and the piece as `display_piece` shows it, HTML-escaped: the one label
    of a token on a chart's axis and in its hover text. The position tells two equal pieces apart."""
    return [f"{i + 1}:{label}" for i, label in enumerate(plotly_labels(pieces))]


def indexed_labels(pieces: Sequence[str]) -> list[str]:
    """`1:<s>`, `2:▁The`, … plain text for select boxes, tables and CSV (not Plotly); positions from 1.

    The index keeps repeated pieces apart, and a digit first means no spreadsheet reads a label as a formula.
    """
    return [f"{i + 1}:{display_piece(p)}" for i, p in enumerate(pieces)]


def safe_filename(*parts: object) -> str:
    """A file name made of letters, digits, '-' and '_' only, e.g. `attention-lm-english-L1-H2`."""
    raw = "-".join(str(p) for p in parts)
    cleaned = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "-_") else "_" for ch in raw)
    return cleaned.strip("_-")[:120] or "attention-atlas"


BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")
SPECIAL = re.compile(r"<[^<>]*>")  # <s>, </s>, <pad>, a byte: no example of a word


def reading_note(pieces: Sequence[str]) -> str:
    """How to read the token labels of a figure over `pieces`, with one of its own tokens as the example
    (position:piece, from 1), and a line for each mark the pieces use: ▁ a space before a word, ↵ a new line,
    <0xC8> one byte of a character the vocabulary has no piece for."""
    labels = indexed_labels(pieces)
    if not labels:
        return ""
    words = [label for label, p in zip(labels, pieces, strict=True) if not SPECIAL.fullmatch(display_piece(p))]
    example = next((label for label in words if "▁" in label), (words or labels)[0])
    said = [f"Tokens read position:piece, from 1 ({example})", *_marks(pieces)]
    return "; ".join(said) + "."


def marks_note(pieces: Sequence[str]) -> str:
    """A line for each mark `pieces` use as display_piece shows them (▁ a space before a word, ↵ a new line, <0xC8>
    one byte of a character), to print beside a figure that names tokens; "" when they use none."""
    said = _marks(pieces)
    return "; ".join(said) + "." if said else ""


def _marks(pieces: Sequence[str]) -> list[str]:
    said = []
    shown = "".join(display_piece(p) for p in pieces)
    if "▁" in shown:
        said.append("▁ is a space before a word")
    if "↵" in shown:
        said.append("↵ is a new line")
    if byte := BYTE_PIECE.search(shown):
        said.append(f"{byte.group()} is one byte of a character the vocabulary has no piece for")
    return said
