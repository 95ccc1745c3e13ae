"""What both trace readers (trace_json, trace_npz) hand on to analysis.imported.trace: the file's object, checked
to be a format-3 trace's; its attention sub-layers as `Entry`s, before their checks; and the memory bound both ask
before they parse."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis.export import FORMAT
from analysis.imported.checks import TraceError, size_text

REQUIRED = ("checkpoint", "kind", "positional", "kv_head_of_query_head", "predictions")


@dataclass
class Entry:
    """One attention sub-layer as a trace file gives it, before the checks."""

    name: Any
    weights: Any
    mask: Any
    scores: Any = None
    queries: Any = None
    keys: Any = None
    claims: dict[str, Any] | None = None  # JSON: the entry's own stack, layer and type


def check_meta(meta: Any, filename: str, more: tuple[str, ...]) -> None:
    """A trace's object: a JSON object of format 3 with every key format 3 writes (and the tokens its kind has)."""
    if not isinstance(meta, dict):
        raise TraceError(f"{filename}: not a trace: a JSON {type(meta).__name__}, where a trace is an object")
    if "format" not in meta:
        raise TraceError(f'{filename}: not a trace: it has no "format" key (the app\'s traces start with it)')
    found = meta["format"]
    if found != FORMAT or isinstance(found, bool):
        raise TraceError(
            f"{filename}: trace format {found!r}; this reader reads format {FORMAT} only "
            "(docs/trace-format.md says what changed; export the input again with this app)"
        )
    missing = [key for key in REQUIRED + more if key not in meta]
    if missing:
        raise TraceError(f"{filename}: not a trace: missing {', '.join(repr(k) for k in missing)}")


def fits(
    needed: int, max_bytes: int | None, filename: str, instead: str = "export a shorter text, or fewer layers"
) -> None:
    """Nothing if `needed` bytes (what the file's attention takes once read) fit `max_bytes` (None: no bound),
    else a TraceError saying what to do `instead`."""
    if max_bytes is not None and needed > max_bytes:
        raise TraceError(
            f"{filename}: its attention would take {size_text(needed)} in memory once read, more than this server "
            f"keeps for a trace ({size_text(max_bytes)} now): {instead}"
        )
