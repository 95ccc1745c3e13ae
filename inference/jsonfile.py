"""JSON files read defensively: a size cap and a nesting limit checked before Python's parser sees the text.

json.loads recurses once per nested array or object, so a file of a few thousand "[" raises RecursionError, an
error no caller expects from a config file; a huge file is read whole. Every JSON file the app or the command
line reads from a checkpoint folder (config.json, card.json, a snapshot index, a published model's config) goes
through `read_json`, which raises JsonFileError naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_DEPTH = 64  # our cards nest 5 deep, Hugging Face configs 3
MAX_BYTES = 32 * 2**20  # a published tokenizer.json is the largest JSON read here, ~10 MB


class JsonFileError(ValueError):
    """A JSON file that cannot be read: missing, too large, too deeply nested, not UTF-8 or not JSON."""


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in a JSON text (brackets inside strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_json(text: str, source: str, max_depth: int = MAX_DEPTH) -> Any:
    """`text` parsed, once its nesting is known to be at most `max_depth`; else JsonFileError naming `source`."""
    depth = nesting_depth(text)
    if depth > max_depth:
        raise JsonFileError(f"{source}: nested {depth} levels deep, more than the {max_depth} any file here needs")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonFileError(f"{source}: not valid JSON ({exc})") from exc


def read_json(path: Path, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in `path`; a missing, oversized, non-UTF-8, too deep or malformed file is a JsonFileError."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise JsonFileError(f"{path}: {size / 2**20:.0f} MB, more than the {max_bytes / 2**20:.0f} MB allowed")
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError as exc:
        raise JsonFileError(f"{path}: file not found") from exc
    except OSError as exc:
        raise JsonFileError(f"{path}: cannot read it ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise JsonFileError(f"{path}: not UTF-8 text (byte offset {exc.start:,})") from exc
    return parse_json(text, str(path), max_depth)
