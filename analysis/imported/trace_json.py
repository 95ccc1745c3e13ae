"""A `.json` trace (analysis.export.to_json) parsed: its object, its attention entries and its positional rows,
for analysis.imported.trace to check."""

from __future__ import annotations

from typing import Any

from analysis.imported.checks import TraceError
from analysis.imported.trace_parsed import Entry, check_meta, fits
from inference.jsonfile import JsonFileError, parse_json

# A JSON trace's parsed objects (Python lists of floats) per byte of its text, measured on the app's own exports
# (tests/test_trace_bounds.py): a bound on what parsing one costs, asked before it starts.
JSON_PARSED_PER_BYTE = 6

JSON_INSTEAD = (
    "save it as .npz instead (Explore's “Whole analysis as NPZ”, `python -m atlas trace … -o OUT.npz`, "
    "`atlas.save(analysis, 'OUT.npz')`): read without parsing, it takes a fraction of that"
)


def _json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words: "null", "a number", …"""
    kinds = {bool: "true or false", int: "a number", float: "a number", str: "a string", dict: "an object"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def read_json(
    data: bytes | bytearray | memoryview, filename: str, max_bytes: int | None
) -> tuple[dict, list[Entry], Any]:
    """The trace's object, entries and positional rows; refused before parsing when what parsing it takes
    (JSON_PARSED_PER_BYTE per byte) is more than `max_bytes`."""
    fits(JSON_PARSED_PER_BYTE * len(data), max_bytes, filename, JSON_INSTEAD)
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{filename}: not UTF-8 text (byte offset {exc.start:,}), so not a JSON trace") from exc
    try:
        obj = parse_json(text, filename)
    except JsonFileError as exc:
        raise TraceError(str(exc)) from exc
    check_meta(obj, filename, ("attention", "positional_encoding"))
    attention = obj["attention"]
    if not isinstance(attention, list):
        raise TraceError(f'{filename}: "attention" is a {type(attention).__name__}, not a list of sub-layers')
    return obj, [_entry(entry, i, filename) for i, entry in enumerate(attention)], obj["positional_encoding"]


def _entry(entry: Any, i: int, filename: str) -> Entry:
    """Attention entry `i` (0-based) as an Entry: an object with every key the export writes, its tokens lists."""
    if not isinstance(entry, dict):
        raise TraceError(f"{filename}: attention entry {i + 1} is a {type(entry).__name__}, not an object")
    missing = [k for k in ("name", "queries", "keys", "weights", "mask") if k not in entry]
    if missing:
        raise TraceError(f"{filename}: attention entry {i + 1} lacks {', '.join(repr(k) for k in missing)}")
    for key in ("queries", "keys"):
        if not isinstance(entry[key], list):
            raise TraceError(
                f"{filename}: attention entry {i + 1}'s {key!r} is {_json_kind(entry[key])}, not a list of tokens"
            )
    claims = {k: entry[k] for k in ("stack", "layer", "type") if k in entry}
    return Entry(
        entry["name"],
        entry["weights"],
        entry["mask"],
        entry.get("scores"),
        entry["queries"],
        entry["keys"],
        claims,
    )
