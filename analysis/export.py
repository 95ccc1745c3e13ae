"""An Analysis as JSON (the trace format, docs/trace-format.md) or as a NumPy .npz archive."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from analysis.record import Analysis
from inference.jsonfile import lone_surrogate
from model.names import parse_sublayer_name

FORMAT = 3  # the trace format's version: docs/trace-format.md says what each version changed


def _round(x: float, digits: int = 6) -> float:
    return round(float(x), digits)


def attention_entries(analysis: Analysis) -> list[dict[str, Any]]:
    """One JSON object per attention sub-layer: weights and scores [H][Tq][Tk] (scores null where masked)."""
    entries = []
    for name, sublayer in analysis.sublayers.items():
        stack, layer, type_ = parse_sublayer_name(name)
        scores = None  # attention imported from elsewhere (analysis.imported) comes without its scores
        if sublayer.scores is not None:
            scores = np.round(sublayer.scores.astype(np.float64), 6).tolist()
            for head in scores:
                for row, allowed in zip(head, sublayer.mask):
                    row[:] = [v if ok else None for v, ok in zip(row, allowed)]
        entries.append(
            {
                "name": name,
                "stack": stack,
                "layer": layer,
                "type": type_,
                "queries": list(sublayer.query_pieces),
                "keys": list(sublayer.key_pieces),
                "weights": np.round(sublayer.weights.astype(np.float64), 6).tolist(),
                "scores": scores,
                "mask": sublayer.mask.tolist(),
            }
        )
    return entries


def _texts(analysis: Analysis) -> Iterator[tuple[str, str]]:
    """Every string a trace file writes of `analysis`, with what a message calls it."""
    yield from (("checkpoint", analysis.checkpoint), ("kind", analysis.kind), ("text", analysis.text))
    yield from (("positional", analysis.positional), ("output_text", analysis.output_text or ""))
    for key, pieces in (("source_tokens", analysis.source_pieces or ()), ("target_tokens", analysis.target_pieces)):
        yield from ((f"{key}: token {i + 1}", piece) for i, piece in enumerate(pieces))
    for name, sublayer in analysis.sublayers.items():
        yield "a sub-layer's name", name
        for side, pieces in (("queries", sublayer.query_pieces), ("keys", sublayer.key_pieces)):
            yield from ((f"{name}'s {side}: token {i + 1}", piece) for i, piece in enumerate(pieces))
    for i, top in enumerate(analysis.predictions):
        yield from ((f"predictions at position {i + 1}: a token", p.piece) for p in top)


def _check_writable(analysis: Analysis) -> None:
    """ValueError naming the first string of `analysis` that UTF-8 cannot write (a lone surrogate), before a file
    is begun: an Analysis read or imported here never holds one (analysis.imported refuses it, inference.text
    replaces it), but one built by hand may, and the export would fail deep inside `encode`."""
    for what, text in _texts(analysis):
        fault = lone_surrogate(text) if isinstance(text, str) else None  # json.dumps names what is no string
        if fault is not None:
            raise ValueError(f"{what} {fault}; a trace file (UTF-8) cannot hold it")


def to_json_object(analysis: Analysis) -> dict[str, Any]:
    """The documented object for one analysed input. The file calls the Analysis's `source_pieces` (the encoder's
    input: encoder-decoder, encoder-only) and `target_pieces` (the decoder's: encoder-decoder, and a language
    model's text) `source_tokens` and `target_tokens`: the format's names since version 1, kept so that every
    trace file written still opens. A string UTF-8 cannot write (a lone surrogate) is a ValueError naming it."""
    _check_writable(analysis)
    obj: dict[str, Any] = {"format": FORMAT, "checkpoint": analysis.checkpoint, "kind": analysis.kind}
    obj["text"] = analysis.text
    if analysis.output_text is not None:
        obj["output_text"] = analysis.output_text
    if analysis.source_pieces is not None:
        obj["source_tokens"] = list(analysis.source_pieces)
    if analysis.has_decoder:
        obj["target_tokens"] = list(analysis.target_pieces)
    obj["positional"] = analysis.positional
    obj["positional_encoding"] = np.round(analysis.first_positional_encoding.astype(np.float64), 6).tolist()
    obj["kv_head_of_query_head"] = [analysis.kv_head(h) for h in range(analysis.n_heads)]
    obj["attention"] = attention_entries(analysis)
    obj["predictions"] = [
        {"position": i, "top": [{"token": t.piece, "id": t.id, "prob": _round(t.prob)} for t in top]}
        for i, top in enumerate(analysis.predictions)
    ]
    return obj


def to_json(analysis: Analysis) -> str:
    return json.dumps(to_json_object(analysis), ensure_ascii=False)


def to_npz_bytes(analysis: Analysis) -> bytes:
    """Every sub-layer's weights, scores (NaN where masked) and mask as arrays, plus the tokens and metadata."""
    arrays: dict[str, np.ndarray] = {}
    for name, sublayer in analysis.sublayers.items():
        arrays[f"{name}.weights"] = sublayer.weights.astype(np.float32)
        if sublayer.scores is not None:
            arrays[f"{name}.scores"] = np.where(sublayer.mask[None], sublayer.scores, np.nan).astype(np.float32)
        arrays[f"{name}.mask"] = sublayer.mask
    arrays["positional_encoding"] = analysis.first_positional_encoding.astype(np.float32)
    meta = {k: v for k, v in to_json_object(analysis).items() if k not in ("attention", "positional_encoding")}
    arrays["meta.json"] = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()
