"""A trace file this app exported, read back as the Analysis it was: `read_trace`. The file is parsed by its
format's reader (trace_json, trace_npz); each field is checked by trace_fields; this module checks the sub-layers
against each other and the kind, and builds the Analysis."""

from __future__ import annotations

from typing import Any

import numpy as np

from analysis.imported.checks import (
    MAX_FILE_BYTES,
    MAX_LAYERS,
    POSITIONAL_KINDS,
    UNKNOWN_POSITIONAL,
    Side,
    TraceError,
    as_array,
    check_heads,
    check_kind,
    check_weights,
    first_stack,
    joined_text,
    place_of,
    precision,
    size_text,
    text_only,
)
from analysis.imported.trace_fields import (
    entry_name,
    kv_heads_of,
    mask_of,
    optional_text,
    predictions_of,
    scores_of,
    sentencepiece_text,
    trace_tokens,
)
from analysis.imported.trace_json import read_json
from analysis.imported.trace_npz import read_npz
from analysis.imported.trace_parsed import Entry
from analysis.record import Analysis, Sublayer, query_key_pieces
from model.names import attention_type

ATTENTIONS_OF_KIND = {
    "decoder-only": ("decoder.self_attn",),
    "encoder-only": ("encoder.self_attn",),
    "encoder-decoder": ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"),
}


def read_trace(data: bytes, filename: str, max_bytes: int | None = None) -> Analysis:
    """The Analysis in a trace file this app exported: `.json` (analysis.export.to_json) or `.npz`
    (analysis.export.to_npz_bytes), format 3 only. Its sub-layers' weights, masks and scores, its tokens, kind,
    positional kind and rows, key/value grouping and predictions are the file's (JSON's are rounded to 6
    decimals), and so are its input `text` and an encoder-decoder's `output_text` where it holds them (files
    written before they were added: the first stack's tokens joined, as imported arrays, and the output read from
    its pieces). The file does not hold the token ids, values or a second stack's positional rows: `target_ids`
    empty, `values` None, and an
    encoder-only trace with one prediction for several tokens is a centre-word model's (`blank`).

    The size is checked against MAX_FILE_BYTES before anything is parsed. An .npz is measured before any array is
    built: from its zip directory and each .npy header, every member must be an array of the dtype its role has
    (weights and scores floats, masks booleans, meta.json at most MAX_META_BYTES of bytes) that fits the bytes it
    holds, the whole unpacking to at most UNPACKED_PER_FILE_BYTE times MAX_FILE_BYTES; it is read with
    allow_pickle=False. `max_bytes`: what the server may keep of it; a trace whose arrays would take more once read
    (measured from the headers, or for JSON from its size) is refused before it is parsed. Every problem is a
    TraceError naming the file."""
    if not isinstance(filename, str):
        raise TraceError(f"a trace's file name is a string ending .json or .npz, not {type(filename).__name__}")
    # A file's name may hold what UTF-8 cannot write (a surrogateescape'd byte of a Linux name): shown escaped.
    filename = filename.encode("utf-8", "backslashreplace").decode("utf-8")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TraceError(f"{filename}: a trace is read from bytes, not {type(data).__name__}")
    size = len(data)
    if size > MAX_FILE_BYTES:
        raise TraceError(
            f"{filename}: {size_text(size)}, more than the {size_text(MAX_FILE_BYTES)} a trace file may be"
        )
    suffix = filename.lower().rpartition(".")[2] if "." in filename else ""
    if suffix == "json":
        meta, entries, positional = read_json(data, filename, max_bytes)
    elif suffix == "npz":
        meta, entries, positional = read_npz(bytes(data), filename, max_bytes)
    else:
        raise TraceError(
            f"{filename}: a trace is a .json or .npz file (as the app's downloads and `python -m atlas trace -o` "
            f"write){'; a .jsonl holds many: save one line as .json' if suffix == 'jsonl' else ''}"
        )
    try:
        return from_trace(meta, entries, positional)
    except TraceError as exc:
        raise TraceError(f"{filename}: {exc}") from exc


def from_trace(meta: dict, entries: list[Entry], positional_rows: Any) -> Analysis:
    """The Analysis a parsed trace describes, every field checked (trace_fields) and the sub-layers against each other:
    the kind's attentions only, each sub-layer once, layers 1 to L with none missing, one head count."""
    kind = check_kind(meta["kind"])
    checkpoint, positional = _model(meta)
    source, target = trace_tokens(meta, kind)
    sublayers = _sublayers(entries, kind, source, target)
    n_heads = check_heads(sublayers, kind)
    rows = _positional_rows(positional_rows, target if kind == "decoder-only" else source)
    pieces = (source or ()) if kind == "encoder-only" else target
    predictions = predictions_of(meta["predictions"], pieces)
    text = optional_text(meta, "text")
    output = _output_text(meta, kind, target)
    kv_heads = kv_heads_of(meta["kv_head_of_query_head"], n_heads)
    return Analysis(
        checkpoint=checkpoint,
        kind=kind,
        text=joined_text(source, target, kind) if text is None else text,
        source_pieces=source,
        target_pieces=target,
        target_ids=(),
        sublayers=sublayers,
        positional_encoding={first_stack(kind): rows.astype(np.float32)},
        predictions=predictions,
        output_text=output,
        positional=positional,
        kv_heads=kv_heads,
        blank=len(predictions) == 1 and len(pieces) > 1,
    )


def _model(meta: dict) -> tuple[str, str]:
    """The trace's `checkpoint` (a name UTF-8 can write) and `positional` (one of the app's kinds, or unknown)."""
    checkpoint, positional = meta["checkpoint"], meta["positional"]
    if not isinstance(checkpoint, str):
        raise TraceError(f"checkpoint is {checkpoint!r}, not a name")
    text_only(checkpoint, "checkpoint")
    if positional not in POSITIONAL_KINDS + (UNKNOWN_POSITIONAL,):
        raise TraceError(f"positional {positional!r} is none of {', '.join(POSITIONAL_KINDS + (UNKNOWN_POSITIONAL,))}")
    return checkpoint, positional


def _sublayers(
    entries: list[Entry], kind: str, source: tuple[str, ...] | None, target: tuple[str, ...]
) -> dict[str, Sublayer]:
    """Every entry as a checked Sublayer, in the file's order; each attention's layers 1 to L, none missing."""
    if not entries:
        raise TraceError("it holds no attention sub-layers")
    sublayers: dict[str, Sublayer] = {}
    layers: dict[str, list[int]] = {}
    for i, entry in enumerate(entries):
        layer = _entry_layer(entry, i, kind)
        if entry.name in sublayers:
            raise TraceError(f"{entry.name} appears twice")
        sublayers[entry.name] = _sublayer(entry, kind, source, target)
        layers.setdefault(attention_type(entry.name), []).append(layer)
    for attention, found in layers.items():
        if len(found) > MAX_LAYERS:
            raise TraceError(f"{attention} has {len(found)} layers, more than the {MAX_LAYERS} allowed")
        if sorted(found) != list(range(len(found))):
            raise TraceError(f"{attention}'s layers are {sorted(f + 1 for f in found)}, not 1 to {len(found)}")
    return sublayers


def _entry_layer(entry: Entry, i: int, kind: str) -> int:
    """The layer entry `i` names (0-based), once its name is a sub-layer's as the app writes it, agrees with what the
    entry says of itself (a JSON entry's stack, layer and type) and names an attention the kind has."""
    stack, layer, type_ = entry_name(entry.name, i)
    said = {"stack": stack, "layer": layer, "type": type_}
    for key, claim in (entry.claims or {}).items():
        if claim != said[key] or isinstance(claim, bool):
            raise TraceError(f"{entry.name}: its {key} is {claim!r} but its name says {said[key]!r}")
    if attention_type(entry.name) not in ATTENTIONS_OF_KIND[kind]:
        raise TraceError(f"a {kind} model has no {stack}.{type_} sub-layers, yet it holds {entry.name}")
    return layer


def _sublayer(entry: Entry, kind: str, source: tuple[str, ...] | None, target: tuple[str, ...]) -> Sublayer:
    """An entry as a Sublayer: its tokens the trace's, its mask, weights (checked to the precision they came in: a
    trace file may keep float16 weights) and scores."""
    name = entry.name
    queries, keys = query_key_pieces(name, source, target)
    for side, given, pieces in (("queries", entry.queries, queries), ("keys", entry.keys, keys)):
        if given is not None and tuple(given) != pieces:
            own = "source_tokens" if pieces is source else "target_tokens"
            raise TraceError(f"{name}'s {side} differ from the trace's {own}")
    where = f"{place_of(kind, name)} ({name})"
    weights = as_array(entry.weights, f"{where}'s weights")
    mask = mask_of(entry.mask, where, (len(queries), len(keys)))
    q_side = Side(queries, "source tokens" if queries is source else "target tokens")
    k_side = Side(keys, "source tokens" if keys is source else "target tokens")
    checked = check_weights(where, weights, mask, q_side, k_side, "the trace's mask forbids", precision(entry.weights))
    scores = scores_of(entry.scores, where, mask, checked.shape)
    return Sublayer(name, queries, keys, scores, mask, checked, None)


def _positional_rows(value: Any, first: tuple[str, ...] | None) -> np.ndarray:
    """The first stack's positional rows: 2 axes, one row per token of `first`, finite."""
    rows = as_array(value, "positional_encoding")
    if rows.ndim != 2 or rows.shape[0] != len(first or ()):
        raise TraceError(
            f"positional_encoding has shape {rows.shape}, not one row per token of the first stack ({len(first or ())})"
        )
    if not np.isfinite(rows).all():
        raise TraceError("positional_encoding holds NaN or infinite values")
    return rows


def _output_text(meta: dict, kind: str, target: tuple[str, ...]) -> str | None:
    """An encoder-decoder's output: the trace's `output_text`, or in a file without it, read from its pieces."""
    if kind != "encoder-decoder":
        return None
    output = optional_text(meta, "output_text")
    return sentencepiece_text(target) if output is None else output
