"""JSON files read defensively: a size cap and a nesting limit checked before Python's parser sees the text.

json.loads recurses once per nested array or object, so a file of a few thousand "[" raises RecursionError, an
error no caller expects from a config file; a huge file is read whole. Every JSON file the app or the command
line reads from a checkpoint folder (config.json, card.json, a snapshot index, a published model's config) goes
through `read_json`, which raises JsonFileError naming the file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from inference.files import SourceError, read_source

MAX_DEPTH = 64  # our cards nest 5 deep, Hugging Face configs 3
MAX_BYTES = 32 * 2**20  # a published tokenizer.json is the largest JSON read here, ~10 MB


class JsonFileError(ValueError):
    """A JSON file that cannot be read: missing, too large, too deeply nested, not UTF-8 or not JSON."""


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # a JSON string, escapes included
_STEP = np.zeros(256, dtype=np.int8)  # what each byte does to the depth: [ and { open, ] and } close
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1
_CHUNK = 2**14  # bytes summed at once: the scan's own arrays stay under 100 KB, whatever the file's size


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in a JSON text (brackets inside strings, and after a string left
    open, do not count). Read by the regular-expression engine and numpy, not character by character in Python:
    a file of millions of spaces or brackets costs milliseconds."""
    bare = _STRING.sub(b"", text.encode("utf-8", "surrogatepass"))  # one copy of the text, as bytes, then less
    open_quote = bare.find(b'"')  # a string never closed: what follows it is inside it
    codes = np.frombuffer(bare, np.uint8)[: open_quote if open_quote >= 0 else None]
    depth = deepest = 0
    for start in range(0, codes.size, _CHUNK):
        running = np.cumsum(_STEP[codes[start : start + _CHUNK]], dtype=np.int32)  # files are < 2 GB
        running += depth
        deepest, depth = max(deepest, int(running.max())), int(running[-1])
    return deepest


def lone_surrogate(text: str) -> str | None:
    """What makes `text` unwritable as UTF-8, said for a message ("holds \\ud800 at character 4, …"); None when
    it can be written. JSON's `\\ud800` escape (and Python's surrogateescape) give a str holding half of a UTF-16
    surrogate pair, which json.loads accepts and every later encode (a page, a download, a file) refuses."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start].encode("unicode_escape").decode("ascii")
        return f"holds {bad} at character {exc.start + 1:,}, half of a UTF-16 surrogate pair, which is not text"
    return None


def parse_json(text: str, source: str, max_depth: int = MAX_DEPTH) -> Any:
    """`text` parsed, once its nesting is known to be at most `max_depth`; else JsonFileError naming `source`.

    Python's own limits become the same error: an integer of more digits than int() converts (ValueError) and
    nesting deeper than the stack (RecursionError)."""
    depth = nesting_depth(text)
    if depth > max_depth:
        raise JsonFileError(f"{source}: nested {depth} levels deep, more than the {max_depth} any file here needs")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonFileError(f"{source}: not valid JSON ({exc})") from exc
    except (ValueError, RecursionError) as exc:
        digits = re.search(r"has (\d+) digits", str(exc))
        what = f"an integer of {digits[1]} digits" if digits else f"a value Python will not read ({exc})"
        raise JsonFileError(f"{source}: holds {what}; no setting here needs one") from exc


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of `path`, a regular file of at most `max_bytes`; anything else is a JsonFileError naming it.

    A FIFO, a device (a link to /dev/zero) or a socket would block the reader or never end: inference.files'
    read_source looks at the file before opening it, opens it without blocking, checks it again by its open
    descriptor and reads no further than one byte past the cap; its errors come back as JsonFileError."""
    try:
        return read_source(path, max_bytes, "file")
    except (FileNotFoundError, SourceError) as exc:
        raise JsonFileError(str(exc)) from exc


def read_json(path: Path, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in `path`; a missing, special, oversized, non-UTF-8, too deep or malformed file, or one holding
    a value Python will not convert, is a JsonFileError."""
    data = read_regular(path, max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonFileError(f"{path}: not UTF-8 text (byte offset {exc.start:,})") from exc
    return parse_json(text, str(path), max_depth)
