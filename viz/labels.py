"""Token pieces as safe, readable labels: HTML-escaped for Plotly, invisible characters made visible."""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Sequence

# Characters that would be invisible, reorder the text around them (bidi controls) or break a label.
_INVISIBLE = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def display_piece(piece: str) -> str:
    """A piece as the reader should see it: '▁' word starts and byte pieces like <0xF0> as they are,
    control, format (zero-width, bidi) and odd space characters as `\\uXXXX`, an empty piece as '∅'."""
    if piece == "":
        return "∅"
    out = []
    for ch in piece:
        cat = unicodedata.category(ch)
        if cat in _INVISIBLE or (cat == "Zs" and ch != " "):
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        elif ch == " ":
            out.append("␣")
        else:
            out.append(ch)
    return "".join(out)


def escape(text: str) -> str:
    """Escape `<`, `>`, `&` and quotes: Plotly renders tags such as <b> or <a> in labels and hover text."""
    return html.escape(text, quote=True)


_MARKDOWN = set("\\`*_~[]<>$&|")  # links and images ([…](…), <…>), emphasis, code, math, entities, tables
# headings, quotes and lists where a line begins ("# h", "> q", "- l", "12. n": the number's delimiter escaped)
_LINE_START = re.compile(r"^(\s*|\s*\d+)([#>+-]|(?<=\d)[.)])", re.MULTILINE)


def markdown_literal(text: str) -> str:
    """`text` as Streamlit's Markdown shows it letter for letter: every character Markdown (or Streamlit's own
    colours and math) would read as syntax is backslash-escaped, so a token such as `![x](http://host/)` from a
    shared file is shown, never fetched as an image, and a file name never styles or links the text around it."""
    escaped = "".join(f"\\{ch}" if ch in _MARKDOWN else ch for ch in text)
    return _LINE_START.sub(lambda m: f"{m[1]}\\{m[2]}", escaped)


def plotly_labels(pieces: Sequence[str]) -> list[str]:
    """Pieces for Plotly tick labels and hover text: readable, then HTML-escaped."""
    return [escape(display_piece(p)) for p in pieces]


def numbered(labels: Sequence[str]) -> list[str]:
    """`3:▁on`: Plotly labels (already escaped) with their position from 1, for hover text that tells two equal
    pieces apart."""
    return [f"{i + 1}:{label}" for i, label in enumerate(labels)]


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
