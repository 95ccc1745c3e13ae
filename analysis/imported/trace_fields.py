"""The fields of a trace file, each checked on its own: its tokens, an entry's name, mask and scores, the key/value
grouping, the predictions and the texts. Each returns the field as the Analysis holds it, or raises a TraceError
that names the field (analysis.imported.trace adds the file's name)."""

from __future__ import annotations

from typing import Any

import numpy as np

from analysis.imported.checks import MAX_TEXT_CHARS, TraceError, first_cell, text_only, token_list
from inference.prediction import Prediction
from model.names import parse_sublayer_name, sublayer_name


def optional_text(meta: dict, key: str) -> str | None:
    """A trace's `text` or `output_text` (written since they were added to format 3; None in a file without it):
    a string of at most MAX_TEXT_CHARS characters, else a TraceError."""
    if key not in meta:
        return None
    value = meta[key]
    if not isinstance(value, str):
        raise TraceError(f'"{key}" is a {type(value).__name__}, not a string')
    if len(value) > MAX_TEXT_CHARS:
        raise TraceError(f'"{key}" has {len(value):,} characters, more than the {MAX_TEXT_CHARS:,} a trace may hold')
    return text_only(value, f'"{key}"')


def sentencepiece_text(target: tuple[str, ...]) -> str:
    """An encoder-decoder's output read from its pieces, for a trace that does not hold `output_text`: our
    tokenizer's pieces mark a word's start with '▁'; the markers <s>, </s> and <pad> are not text."""
    kept = [p for p in target if p not in ("<s>", "</s>", "<pad>")]
    return "".join(kept).replace("▁", " ").strip()


def trace_tokens(meta: dict, kind: str) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """source_tokens and target_tokens as the kind has them: a language model has no source, an encoder no
    target (the export writes neither)."""
    has_source, has_target = kind != "decoder-only", kind != "encoder-only"
    for key, wanted in (("source_tokens", has_source), ("target_tokens", has_target)):
        if wanted and key not in meta:
            raise TraceError(f"not a trace: a {kind} trace has {key!r}, this one has none")
        if not wanted and key in meta:
            raise TraceError(f"a {kind} trace has no {key!r}, this one has")
    source = token_list(meta["source_tokens"], "source_tokens") if has_source else None
    target = token_list(meta["target_tokens"], "target_tokens") if has_target else ()
    return source, target


def mask_of(value: Any, where: str, shape: tuple[int, int]) -> np.ndarray:
    """An entry's mask: booleans of `shape` (queries, keys), True where attention is allowed."""
    try:
        mask = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise TraceError(f"{where}'s mask is not a rectangular array ({exc})") from exc
    if mask.dtype != bool:
        raise TraceError(f"{where}'s mask holds {mask.dtype} values, not true/false")
    if mask.shape != shape:
        raise TraceError(f"{where}'s mask has shape {mask.shape}, not {shape} (one row per query, one column per key)")
    return mask


def scores_of(value: Any, where: str, mask: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """Scores as stored: finite where the mask allows, null (JSON) or NaN (npz) where it forbids; NaN there."""
    if value is None:
        return None
    try:
        raw = np.asarray(value)
        if raw.dtype == object:  # JSON nulls: None, numbers and nothing else become NaN and floats
            if any(v is not None and not isinstance(v, (int, float)) for v in raw.ravel()):
                raise TraceError(f"{where}'s scores hold values that are neither numbers nor null")
            raw = np.array(value, dtype=np.float64)
    except (ValueError, TypeError) as exc:
        raise TraceError(f"{where}'s scores are not a rectangular array of numbers ({exc})") from exc
    if raw.dtype.kind not in "fiu":
        raise TraceError(f"{where}'s scores hold {raw.dtype} values, not numbers")
    if raw.shape != shape:
        raise TraceError(f"{where}'s scores have shape {raw.shape}, not the weights' {shape}")
    bad = mask[None] & ~np.isfinite(raw)
    if bad.any():
        h, q, k = first_cell(bad)
        raise TraceError(
            f"{where}'s scores are missing or not finite where the mask allows attention: head {h + 1}, "
            f"query {q + 1}, key {k + 1}"
        )
    return np.where(mask[None], raw, np.nan).astype(np.float32)


def kv_heads_of(value: Any, n_heads: int) -> int:
    """The number of key/value heads `kv_head_of_query_head` describes: query head h reads h // (H // kv), as
    `Analysis.kv_head` computes it."""
    ok = isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if not ok or len(value) != n_heads or not all(0 <= v < n_heads for v in value):
        raise TraceError(
            f"kv_head_of_query_head must list one key/value head (an integer, 0 to {n_heads - 1} as the file counts) "
            f"for each of the {n_heads} heads"
        )
    kv = max(value) + 1
    if n_heads % kv or value != [h // (n_heads // kv) for h in range(n_heads)]:
        raise TraceError(
            f"kv_head_of_query_head {value} does not group the {n_heads} query heads in equal, consecutive groups "
            "(grouped-query attention shares one key/value head among each group)"
        )
    return kv


def predictions_of(value: Any, pieces: tuple[str, ...]) -> tuple[tuple[Prediction, ...], ...]:
    """`predictions`: per position i (0, 1, …, in order) its top tokens; none, one (a centre-word model) or one
    per token of the kind's prediction tokens."""
    if not isinstance(value, list):
        raise TraceError(f"predictions is a {type(value).__name__}, not a list")
    if len(value) not in (0, 1, len(pieces)):
        raise TraceError(f"predictions has {len(value)} positions but the trace {len(pieces)} tokens")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or item.get("position") != i or not isinstance(item.get("top"), list):
            raise TraceError(f'predictions\' entry {i + 1} is not {{"position": {i}, "top": [...]}}')
        out.append(tuple(_candidate(candidate, i) for candidate in item["top"]))
    return tuple(out)


def _candidate(candidate: Any, i: int) -> Prediction:
    """One of position `i`'s top tokens (0-based `i`): `{"token": str, "id": int, "prob": 0..1}`."""
    ok = isinstance(candidate, dict) and isinstance(candidate.get("token"), str)
    ok = ok and isinstance(candidate.get("id"), int) and not isinstance(candidate.get("id"), bool)
    prob = candidate.get("prob") if isinstance(candidate, dict) else None
    ok = ok and isinstance(prob, (int, float)) and not isinstance(prob, bool) and 0 <= prob <= 1
    if not ok:
        raise TraceError(
            f'predictions at position {i + 1}: {candidate!r} is not {{"token": str, "id": int, "prob": 0..1}}'
        )
    text_only(candidate["token"], f"predictions at position {i + 1}: a token")
    return Prediction(candidate["token"], candidate["id"], float(prob))


def entry_name(name: Any, i: int) -> tuple[str, int, str]:
    """Entry `i`'s sub-layer name parsed, as the app writes it and the pages look it up: `decoder.layers.1.self_attn`,
    the layer in ASCII digits without leading zeros (a "01" or an Arabic-Indic "١" would parse to a layer that no
    page finds under its own name)."""
    try:
        stack, layer, type_ = parse_sublayer_name(name)
        if name == sublayer_name(stack, layer, type_):
            return stack, layer, type_
    except (ValueError, AttributeError):  # AttributeError: a name that is no string
        pass
    raise TraceError(
        f"attention entry {i + 1}: {name!r} is not an attention sub-layer's name as the app writes it "
        f"({sublayer_name('decoder', 0, 'self_attn')}: encoder or decoder, layer from 0, self_attn or cross_attn)"
    )
