"""The trace as JSON (format 1, see docs/trace-format.md) or as a NumPy .npz archive."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import numpy as np

from inference.analyze import Analysis
from inference.checkpoint import Checkpoint
from model.trace import BlockName

FORMAT = 1


def _round(x: float, digits: int = 6) -> float:
    return round(float(x), digits)


def _queries_keys(analysis: Analysis, name: BlockName) -> tuple[list[str], list[str]]:
    target, source = analysis.target_pieces, analysis.source_pieces or []
    if name.stack == "encoder":
        return source, source
    return target, (source if name.type == "cross" else target)


def attention_entries(analysis: Analysis) -> list[dict[str, Any]]:
    """One JSON object per attention block: weights and scores [H][Tq][Tk] (scores null where masked)."""
    entries = []
    for name, rec in analysis.trace.attention.items():
        block = BlockName.parse(name)
        queries, keys = _queries_keys(analysis, block)
        mask = rec.mask[0].numpy()  # (Tq, Tk)
        scores = np.where(mask[None], rec.scores[0].numpy(), np.nan)
        entries.append(
            {
                "name": name,
                "stack": block.stack,
                "layer": block.layer,
                "type": block.type,
                "queries": queries,
                "keys": keys,
                "weights": np.round(rec.weights[0].numpy().astype(np.float64), 6).tolist(),
                "scores": [[[None if math.isnan(v) else _round(v) for v in row] for row in head] for head in scores],
                "mask": mask.tolist(),
            }
        )
    return entries


def positional_rows(analysis: Analysis) -> list[list[float]]:
    """The positional-encoding rows used: the encoder's for an encoder-decoder, else the decoder's."""
    pe = analysis.trace.positional.get("encoder", analysis.trace.positional["decoder"])
    return np.round(pe.numpy().astype(np.float64), 6).tolist()


def to_json_object(ckpt: Checkpoint, analysis: Analysis) -> dict[str, Any]:
    """The documented format-1 object for one analysed input."""
    pieces = ckpt.tokenizer.pieces
    obj: dict[str, Any] = {"format": FORMAT, "checkpoint": ckpt.name, "kind": analysis.kind}
    if analysis.source_pieces is not None:
        obj["source_tokens"] = analysis.source_pieces
        obj["target_tokens"] = analysis.target_pieces
    else:
        obj["source_tokens"] = analysis.target_pieces
    obj["positional_encoding"] = positional_rows(analysis)
    obj["attention"] = attention_entries(analysis)
    obj["predictions"] = [
        {"position": i, "top": [{"token": pieces([t.id])[0], "id": t.id, "prob": _round(t.prob)} for t in top]}
        for i, top in enumerate(analysis.predictions)
    ]
    return obj


def to_json(ckpt: Checkpoint, analysis: Analysis) -> str:
    return json.dumps(to_json_object(ckpt, analysis), ensure_ascii=False)


def to_npz_bytes(ckpt: Checkpoint, analysis: Analysis) -> bytes:
    """Every block's weights, scores (NaN where masked) and mask as arrays, plus the tokens and metadata."""
    arrays: dict[str, np.ndarray] = {}
    for name, rec in analysis.trace.attention.items():
        mask = rec.mask[0].numpy()
        arrays[f"{name}.weights"] = rec.weights[0].numpy().astype(np.float32)
        arrays[f"{name}.scores"] = np.where(mask[None], rec.scores[0].numpy(), np.nan).astype(np.float32)
        arrays[f"{name}.mask"] = mask
    arrays["positional_encoding"] = np.asarray(positional_rows(analysis), dtype=np.float32)
    meta = {k: v for k, v in to_json_object(ckpt, analysis).items() if k not in ("attention", "positional_encoding")}
    arrays["meta.json"] = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()
