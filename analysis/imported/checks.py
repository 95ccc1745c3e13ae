"""What every way into analysis.imported shares: the kinds, bounds and tolerances, `TraceError`, reading a value
as an array or a list of tokens, and the checks every sub-layer's weights pass (the package's docstring lists them).

Numpy only, as the rest of the package: a torch tensor is read through its own `.detach().cpu().numpy()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.record import Sublayer
from inference.jsonfile import lone_surrogate
from model.names import parse_sublayer_name

KINDS = ("decoder-only", "encoder-only", "encoder-decoder")
POSITIONAL_KINDS = ("sinusoidal", "learned", "rotary")  # what the app's own models use (model/config.py)
UNKNOWN_POSITIONAL = "unknown"  # imported attention: how the model knew positions is not in the data
TEXT_RULE = " "  # `text` of imported attention: the first stack's tokens joined by this

# Bounds, as the published models' configs are bounded (model/config.py): far above any model the pages can draw
# (GPT-2 XL has 48 layers of 25 heads and reads at most 1024 tokens), far below what exhausts memory.
MAX_LAYERS = 256  # per stack
MAX_HEADS = 256
MAX_TOKENS = 4096
MAX_TEXT_CHARS = 20 * MAX_TOKENS  # a trace's text or output: far more than MAX_TOKENS pieces ever spell
MAX_FILE_BYTES = 200 * 2**20  # a trace file, checked before it is parsed

# Tolerances. Weights: float16 weights are exact to about 1e-3, and JSON traces are rounded to 6 decimals.
WEIGHT_TOLERANCE = 1e-3  # a weight within [0, 1] and an allowed row's sum within 1, both to this
# Attention that came in a coarser precision is checked to that precision: a softmax in bfloat16 (8 bits of
# mantissa, a GPU's usual) gives rows that sum to 1 within a few thousandths, one in float16 within about 1e-3.
PRECISION_TOLERANCE = {"bfloat16": 1e-2, "float16": 2e-3}
MASKED_TOLERANCE = 1e-6  # a forbidden cell: a -inf, finfo.min or -1e9 mask gives exactly 0 after the softmax


class TraceError(ValueError):
    """Attention that cannot be shown: the message names what disagrees (a shape, a value, a key) and where."""


# --- reading values ------------------------------------------------------------------------------------------------


def size_text(n: int) -> str:
    """A byte count as a message says it: "3 MB", or "1,024 bytes" under a megabyte."""
    return f"{n / 2**20:.0f} MB" if n >= 2**20 else f"{n:,} bytes"


def text_only(value: str, what: str) -> str:
    """`value` if UTF-8 can write it, else a TraceError naming `what`: a lone surrogate read here would break every
    page that shows it and every export of it later, far from the file that held it."""
    fault = lone_surrogate(value)
    if fault is not None:
        raise TraceError(f"{what} {fault}")
    return value


def as_array(value: Any, what: str) -> np.ndarray:
    """`value` as a numpy array of numbers. A torch tensor converts through its own methods (torch itself is not
    imported here); bfloat16, which numpy lacks, becomes float32 first."""
    if hasattr(value, "detach") and hasattr(value, "cpu") and hasattr(value, "numpy"):
        value = value.detach().cpu()
        if getattr(value, "is_floating_point", lambda: False)():
            value = value.float()
        value = value.numpy()
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise TraceError(f"{what} is not a rectangular array of numbers ({exc})") from exc
    if array.dtype.kind not in "fiu":
        raise TraceError(f"{what} holds {array.dtype} values, not numbers")
    return array


def token_list(tokens: Any, what: str) -> tuple[str, ...]:
    """A sequence of strings, one per position, 1 to MAX_TOKENS of them."""
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, (Sequence, np.ndarray)):
        raise TraceError(f"{what} must be a list of strings, one per position, not {type(tokens).__name__}")
    if not len(tokens):
        raise TraceError(f"{what} is empty: attention needs at least one token")
    if len(tokens) > MAX_TOKENS:
        raise TraceError(f"{what} has {len(tokens):,} tokens, more than the {MAX_TOKENS:,} allowed")
    for i, token in enumerate(tokens):
        if not isinstance(token, str):
            raise TraceError(f"{what}: token {i + 1} is {type(token).__name__} {token!r}, not a string")
        text_only(token, f"{what}: token {i + 1}")
    # A piece that says it is byte-level (inference.pretrained.tokenizer.BytePiece) keeps saying so: its pages show
    # the text it stands for, as the app's own analysis of the same model does.
    return tuple(t if getattr(t, "byte_level", False) else str(t) for t in tokens)


def check_kind(kind: Any) -> str:
    """`kind` if it is one of KINDS, else a TraceError listing them."""
    if kind not in KINDS:
        raise TraceError(f"unknown kind {kind!r}: expected one of {', '.join(KINDS)}")
    return kind


def place_of(kind: str, name: str) -> str:
    """How a message names a sub-layer: "layer 2", or in an encoder-decoder "encoder layer 2", "decoder layer 2",
    "cross-attention layer 2"."""
    stack, layer, type_ = parse_sublayer_name(name)
    if kind != "encoder-decoder":
        return f"layer {layer + 1}"
    return f"{'cross-attention' if type_ == 'cross_attn' else stack} layer {layer + 1}"


def first_cell(cells: np.ndarray) -> tuple[int, ...]:
    """The index of the first True cell of `cells` (a message names where a fault begins)."""
    return tuple(int(i) for i in np.argwhere(cells)[0])


# --- the checks every way in shares --------------------------------------------------------------------------------


DECODER_CAUSAL = "a decoder's causal mask forbids (a query sees itself and the keys before it)"
CAUSAL = DECODER_CAUSAL[:-1] + '; for a model that reads both ways pass kind="encoder-only")'


@dataclass(frozen=True)
class Side:
    """One axis of a sub-layer: its tokens and what a message calls them ("tokens", "source tokens")."""

    pieces: tuple[str, ...]
    called: str


def precision(*values: Any) -> tuple[str, float]:
    """The coarsest precision among attention given as arrays (each a per-layer list or one array: a torch tensor's
    or numpy array's dtype) and the tolerance its weights are checked to."""
    found = "float32"
    for value in values:
        first = value[0] if isinstance(value, (list, tuple)) and value else value
        name = str(getattr(first, "dtype", "")).removeprefix("torch.")
        if PRECISION_TOLERANCE.get(name, 0) > PRECISION_TOLERANCE.get(found, 0):
            found = name
    return found, PRECISION_TOLERANCE.get(found, WEIGHT_TOLERANCE)


def check_weights(
    where: str,
    weights: np.ndarray,
    mask: np.ndarray,
    queries: Side,
    keys: Side,
    why: str = CAUSAL,
    given: tuple[str, float] = ("float32", WEIGHT_TOLERANCE),
) -> np.ndarray:
    """`weights` [heads, queries, keys] checked against the tokens and `mask`; returned as float32 with forbidden
    cells exactly 0 (as the app's own sub-layers). Rules, in the order checked: 3 axes; 1 to MAX_HEADS heads; one query
    per query token and one key per key token; finite; within [0, 1]; ~0 where the mask forbids; each query that
    may attend anything sums to 1 (a query that may attend nothing, a padding row, is all 0)."""
    _check_shape(where, weights, queries, keys)
    bad = ~np.isfinite(weights)
    if bad.any():
        h, q, k = first_cell(bad)
        raise TraceError(
            f"{where} holds {int(bad.sum()):,} NaN or infinite weights (the first: head {h + 1}, query {q + 1}, "
            f"key {k + 1})"
        )
    dtype, tolerance = given
    outside = (weights < -tolerance) | (weights > 1 + tolerance)
    if outside.any():
        h, q, k = first_cell(outside)
        raise TraceError(
            f"{where}, head {h + 1}, query {q + 1}, key {k + 1}: weight {float(weights[h, q, k]):.6g} is outside "
            "[0, 1]; attention weights are a softmax's output, not raw scores"
        )
    forbidden = ~mask[None] & (np.abs(weights) > MASKED_TOLERANCE)
    if forbidden.any():
        h, q, k = first_cell(forbidden)
        raise TraceError(
            f"{where}, head {h + 1}, query {q + 1} ({queries.pieces[q]!r}) gives weight "
            f"{float(weights[h, q, k]):.6g} to key {k + 1} ({keys.pieces[k]!r}), which {why}"
        )
    kept = np.where(mask[None], weights, 0).astype(np.float32)
    sums = kept.sum(axis=-1, dtype=np.float64)
    off = mask.any(axis=-1)[None] & (np.abs(sums - 1) > tolerance)
    if off.any():
        h, q = first_cell(off)
        raise TraceError(
            f"{where}, head {h + 1}, query {q + 1} ({queries.pieces[q]!r}): its weights sum to {sums[h, q]:.6g}, "
            f"not 1 (within {tolerance:g}, for attention given in {dtype}); each query's weights over the keys it "
            "may attend must sum to 1"
        )
    return kept


def _check_shape(where: str, weights: np.ndarray, queries: Side, keys: Side) -> None:
    """check_weights' first rules: 3 axes, 1 to MAX_HEADS heads, one query and one key per token."""
    if weights.ndim != 3:
        raise TraceError(
            f"{where}'s attention has shape {weights.shape}: expected 3 axes, [heads, queries, keys] "
            "(or 4 with a batch of one first)"
        )
    heads, tq, tk = weights.shape
    if not 1 <= heads <= MAX_HEADS:
        raise TraceError(f"{where} has {heads} heads: expected 1 to {MAX_HEADS}")
    if tq != len(queries.pieces):
        raise TraceError(f"{where}'s attention has {tq} query positions but {len(queries.pieces)} {queries.called}")
    if tk != len(keys.pieces):
        raise TraceError(f"{where}'s attention has {tk} key positions but {len(keys.pieces)} {keys.called}")


def check_heads(sublayers: Mapping[str, Sublayer], kind: str) -> int:
    """Every sub-layer has the first sub-layer's number of heads (the pages draw one head count per model)."""
    first = next(iter(sublayers.values()))
    for sublayer in sublayers.values():
        if sublayer.n_heads != first.n_heads:
            raise TraceError(
                f"{place_of(kind, sublayer.name)} has {sublayer.n_heads} heads but {place_of(kind, first.name)} has "
                f"{first.n_heads}: every layer must have the same number of heads"
            )
    return first.n_heads


def first_stack(kind: str) -> str:
    """The stack a kind reads its input with: "decoder" for a language model, else "encoder"."""
    return "decoder" if kind == "decoder-only" else "encoder"


def joined_text(source: tuple[str, ...] | None, target: tuple[str, ...], kind: str) -> str:
    """The first stack's tokens joined by TEXT_RULE (the package's docstring says why not the input text)."""
    return TEXT_RULE.join(target if kind == "decoder-only" else (source or ()))
