"""Attention computed elsewhere, as this project's `Analysis`: plain arrays, a Hugging Face model's outputs, a
TransformerLens cache, or a trace file this app exported.

Every way in ends in the same checks, made as carefully as a checkpoint's (inference/checkpoint.py): the shapes
against the tokens, finite weights within [0, 1], nothing where the mask forbids attention, every query's weights
summing to 1, bounded sizes, and every string (a token, a name, the text) one UTF-8 can write (a lone surrogate,
which a JSON `\\ud800` escape makes, would break every page and export of it). Each failure is one `TraceError`
whose message names what disagrees and where, counting from 1 as the pages do ("layer 2, head 1, query 3"); arrays
and files stay 0-based.

What imported attention cannot carry is left out rather than made up, and the Analysis says so in its own terms:

- `text` is the first stack's tokens joined by one space (`TEXT_RULE`): the input text itself is not in the data,
  and no join undoes every tokenizer's markers (`Ġ`, `▁`, `##`), so it is a label for the pages, not the input.
- `positional` is "unknown" (`UNKNOWN_POSITIONAL`): arrays of weights do not say how the model knew positions.
- `positional_encoding` holds the first stack's rows with zero columns, `(T, 0)`, not an empty dict:
  `Analysis.first_positional_encoding` reads the "encoder" or "decoder" entry and the export writes it, so an
  empty dict would raise KeyError there; zero columns say "no positional rows" and still have one row per token.
- `predictions` is empty (no logits), `target_ids` empty (no ids), `scores` and `values` None, `kv_heads` the
  number of heads (every head its own keys: nothing says otherwise).

This module imports neither torch nor the model (as analysis/record.py): a torch tensor is read through its
own `.detach().cpu().numpy()`.
"""

from __future__ import annotations

import io
import math
import re
import zipfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.export import FORMAT
from analysis.record import Analysis, Block, query_key_pieces
from inference.jsonfile import JsonFileError, lone_surrogate, parse_json
from inference.prediction import Prediction
from model.names import attention_type, block_name, parse_block_name

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
UNPACKED_PER_FILE_BYTE = 4  # an .npz's arrays may unpack to at most this many times MAX_FILE_BYTES
MAX_META_BYTES = 16 * 2**20  # an .npz trace's meta.json: its tokens and predictions, a few MB at MAX_TOKENS
MAX_HEADER_BYTES = 10_000  # an .npy header: numpy's own default cap

# Tolerances. Weights: float16 weights are exact to about 1e-3, and JSON traces are rounded to 6 decimals.
WEIGHT_TOLERANCE = 1e-3  # a weight within [0, 1] and an allowed row's sum within 1, both to this
# Attention that came in a coarser precision is checked to that precision: a softmax in bfloat16 (8 bits of
# mantissa, a GPU's usual) gives rows that sum to 1 within a few thousandths, one in float16 within about 1e-3.
PRECISION_TOLERANCE = {"bfloat16": 1e-2, "float16": 2e-3}
MASKED_TOLERANCE = 1e-6  # a forbidden cell: a -inf, finfo.min or -1e9 mask gives exactly 0 after the softmax

PATTERN_KEY = re.compile(r"blocks\.(\d+)\.attn\.hook_pattern")  # TransformerLens' name for a layer's weights


class TraceError(ValueError):
    """Attention that cannot be shown: the message names what disagrees (a shape, a value, a key) and where."""


# --- reading values ------------------------------------------------------------------------------------------------


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MB" if n >= 2**20 else f"{n:,} bytes"


def _text_only(value: str, what: str) -> str:
    """`value` if UTF-8 can write it, else a TraceError naming `what`: a lone surrogate read here would break every
    page that shows it and every export of it later, far from the file that held it."""
    fault = lone_surrogate(value)
    if fault is not None:
        raise TraceError(f"{what} {fault}")
    return value


def _as_array(value: Any, what: str) -> np.ndarray:
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


def _tokens(tokens: Any, what: str) -> tuple[str, ...]:
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
        _text_only(token, f"{what}: token {i + 1}")
    # A piece that says it is byte-level (inference.pretrained.tokenizer.BytePiece) keeps saying so: its pages show
    # the text it stands for, as the app's own analysis of the same model does.
    return tuple(t if getattr(t, "byte_level", False) else str(t) for t in tokens)


def _check_kind(kind: Any) -> str:
    if kind not in KINDS:
        raise TraceError(f"unknown kind {kind!r}: expected one of {', '.join(KINDS)}")
    return kind


def _where(kind: str, name: str) -> str:
    """How a message names a block: "layer 2", or in an encoder-decoder "encoder layer 2", "decoder layer 2",
    "cross-attention layer 2"."""
    stack, layer, type_ = parse_block_name(name)
    if kind != "encoder-decoder":
        return f"layer {layer + 1}"
    return f"{'cross-attention' if type_ == 'cross_attn' else stack} layer {layer + 1}"


def _first(cells: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(cells)[0])


# --- the checks every way in shares --------------------------------------------------------------------------------


DECODER_CAUSAL = "a decoder's causal mask forbids (a query sees itself and the keys before it)"
CAUSAL = DECODER_CAUSAL[:-1] + '; for a model that reads both ways pass kind="encoder-only")'


@dataclass(frozen=True)
class _Side:
    """One axis of a block: its tokens and what a message calls them ("tokens", "source tokens")."""

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


def _check_weights(
    where: str,
    weights: np.ndarray,
    mask: np.ndarray,
    queries: _Side,
    keys: _Side,
    why: str = CAUSAL,
    given: tuple[str, float] = ("float32", WEIGHT_TOLERANCE),
) -> np.ndarray:
    """`weights` [heads, queries, keys] checked against the tokens and `mask`; returned as float32 with forbidden
    cells exactly 0 (as the app's own blocks). Rules, in the order checked: 3 axes; 1 to MAX_HEADS heads; one query
    per query token and one key per key token; finite; within [0, 1]; ~0 where the mask forbids; each query that
    may attend anything sums to 1 (a query that may attend nothing, a padding row, is all 0)."""
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
    bad = ~np.isfinite(weights)
    if bad.any():
        h, q, k = _first(bad)
        raise TraceError(
            f"{where} holds {int(bad.sum()):,} NaN or infinite weights (the first: head {h + 1}, query {q + 1}, "
            f"key {k + 1})"
        )
    dtype, tolerance = given
    outside = (weights < -tolerance) | (weights > 1 + tolerance)
    if outside.any():
        h, q, k = _first(outside)
        raise TraceError(
            f"{where}, head {h + 1}, query {q + 1}, key {k + 1}: weight {float(weights[h, q, k]):.6g} is outside "
            "[0, 1]; attention weights are a softmax's output, not raw scores"
        )
    forbidden = ~mask[None] & (np.abs(weights) > MASKED_TOLERANCE)
    if forbidden.any():
        h, q, k = _first(forbidden)
        raise TraceError(
            f"{where}, head {h + 1}, query {q + 1} ({queries.pieces[q]!r}) gives weight "
            f"{float(weights[h, q, k]):.6g} to key {k + 1} ({keys.pieces[k]!r}), which {why}"
        )
    kept = np.where(mask[None], weights, 0).astype(np.float32)
    sums = kept.sum(axis=-1, dtype=np.float64)
    off = mask.any(axis=-1)[None] & (np.abs(sums - 1) > tolerance)
    if off.any():
        h, q = _first(off)
        raise TraceError(
            f"{where}, head {h + 1}, query {q + 1} ({queries.pieces[q]!r}): its weights sum to {sums[h, q]:.6g}, "
            f"not 1 (within {tolerance:g}, for attention given in {dtype}); each query's weights over the keys it "
            "may attend must sum to 1"
        )
    return kept


def _check_heads(blocks: Mapping[str, Block], kind: str) -> int:
    """Every block has the first block's number of heads (the pages draw one head count per model)."""
    first = next(iter(blocks.values()))
    for block in blocks.values():
        if block.n_heads != first.n_heads:
            raise TraceError(
                f"{_where(kind, block.name)} has {block.n_heads} heads but {_where(kind, first.name)} has "
                f"{first.n_heads}: every layer must have the same number of heads"
            )
    return first.n_heads


def _first_stack(kind: str) -> str:
    return "decoder" if kind == "decoder-only" else "encoder"


def _optional_text(meta: dict, key: str) -> str | None:
    """A trace's `text` or `output_text` (written since they were added to format 3; None in a file without it):
    a string of at most MAX_TEXT_CHARS characters, else a TraceError."""
    if key not in meta:
        return None
    value = meta[key]
    if not isinstance(value, str):
        raise TraceError(f'"{key}" is a {type(value).__name__}, not a string')
    if len(value) > MAX_TEXT_CHARS:
        raise TraceError(f'"{key}" has {len(value):,} characters, more than the {MAX_TEXT_CHARS:,} a trace may hold')
    return _text_only(value, f'"{key}"')


def _sentencepiece_text(target: tuple[str, ...]) -> str:
    """An encoder-decoder's output read from its pieces, for a trace that does not hold `output_text`: our
    tokenizer's pieces mark a word's start with '▁'; the markers <s>, </s> and <pad> are not text."""
    kept = [p for p in target if p not in ("<s>", "</s>", "<pad>")]
    return "".join(kept).replace("▁", " ").strip()


def _text(source: tuple[str, ...] | None, target: tuple[str, ...], kind: str) -> str:
    """The first stack's tokens joined by TEXT_RULE (the module's docstring says why not the input text)."""
    return TEXT_RULE.join(target if kind == "decoder-only" else (source or ()))


# --- plain arrays --------------------------------------------------------------------------------------------------


def _layers(attentions: Any, what: str, label: Callable[[int], str]) -> list[np.ndarray]:
    """Per-layer [heads, queries, keys] arrays from a list of per-layer arrays or one array whose first axis is the
    layers; a leading batch axis of size 1 on each layer is dropped, a larger batch refused."""
    if isinstance(attentions, (list, tuple)):
        layers = list(attentions)
    elif hasattr(attentions, "shape") and len(attentions.shape) in (4, 5):
        if attentions.shape[0] > MAX_LAYERS:  # before converting: a bounded count of layers is read
            raise TraceError(f"{what} has {attentions.shape[0]} layers, more than the {MAX_LAYERS} allowed")
        layers = list(_as_array(attentions, what))
    elif hasattr(attentions, "shape"):
        raise TraceError(
            f"{what} has shape {tuple(attentions.shape)}: expected [layers, heads, queries, keys] "
            "(or a list of per-layer [heads, queries, keys] arrays)"
        )
    else:
        raise TraceError(
            f"{what} must be a list of per-layer [heads, queries, keys] arrays or one [layers, heads, queries, keys] "
            f"array, not {type(attentions).__name__}"
        )
    if not layers:
        raise TraceError(f"{what} holds no layers")
    if len(layers) > MAX_LAYERS:
        raise TraceError(f"{what} has {len(layers)} layers, more than the {MAX_LAYERS} allowed")
    out = []
    for i, layer in enumerate(layers):
        where = label(i)
        array = _as_array(layer, f"{where}'s attention")
        if array.ndim == 4:
            if array.shape[0] != 1:
                raise TraceError(
                    f"{where}'s attention holds a batch of {array.shape[0]} inputs (shape {array.shape}); "
                    "pass one input: its attention as [heads, queries, keys], or with a batch axis of size 1"
                )
            array = array[0]
        out.append(array)
    return out


def from_arrays(
    attentions: Any,
    tokens: Sequence[str],
    *,
    kind: str = "decoder-only",
    name: str = "arrays",
    source_tokens: Sequence[str] | None = None,
    cross: Any = None,
    encoder: Any = None,
) -> Analysis:
    """An Analysis of attention weights given as arrays: `[layers][heads, queries, keys]`, a list of per-layer
    arrays or one 4-D array (numpy, torch, or nested lists); each layer may carry a leading batch axis of size 1,
    which is dropped (a larger batch is refused: pass one input).

    decoder-only: `attentions` is the self-attention over `tokens` (queries = keys = tokens), blocks
    `decoder.layers.{i}.self_attn`, the mask causal (a query sees itself and the keys before it).
    encoder-only: the same over `tokens` with blocks `encoder.layers.{i}.self_attn` and every cell allowed.
    encoder-decoder: `attentions` is the decoder's self-attention over `tokens` (causal); `encoder` the encoder's
    over `source_tokens` and `cross` the decoder's cross-attention (queries `tokens`, keys `source_tokens`), both
    with every cell allowed; the decoder and the cross-attention have the same number of layers.

    The mask is derived from the kind, since arrays of weights carry none: where a causal model cannot attend,
    its weights must be ~0 (the message suggests the other kind otherwise). Every check is `_check_weights`'s;
    the returned Analysis is described in the module's docstring.
    """
    kind = _check_kind(kind)
    target = _tokens(tokens, "tokens")
    came_in = precision(attentions, cross, encoder)
    if kind != "encoder-decoder":
        given = [
            k for k, v in (("source_tokens", source_tokens), ("cross", cross), ("encoder", encoder)) if v is not None
        ]
        if given:
            raise TraceError(
                f"{', '.join(given)} given for a {kind} model: only an encoder-decoder has a separate encoder input "
                "and cross-attention"
            )
        stack = _first_stack(kind)
        layers = _layers(attentions, "attentions", lambda i: f"layer {i + 1}")
        side = _Side(target, "tokens were given")
        n = len(target)
        mask = np.tril(np.ones((n, n), dtype=bool)) if kind == "decoder-only" else np.ones((n, n), dtype=bool)
        blocks = {}
        for i, layer in enumerate(layers):
            block = block_name(stack, i, "self_attn")  # `name` is the model's
            weights = _check_weights(_where(kind, block), layer, mask, side, side, given=came_in)
            blocks[block] = Block(block, target, target, None, mask, weights, None)
        source = target if kind == "encoder-only" else None
        return _imported(name, kind, source, () if kind == "encoder-only" else target, blocks)

    if source_tokens is None or encoder is None or cross is None:
        needed = (("source_tokens", source_tokens), ("encoder", encoder), ("cross", cross))
        missing = [k for k, v in needed if v is None]
        raise TraceError(f"an encoder-decoder needs {', '.join(missing)} as well as the decoder's attentions")
    source = _tokens(source_tokens, "source_tokens")
    encoder_layers = _layers(encoder, "encoder", lambda i: f"encoder layer {i + 1}")
    decoder_layers = _layers(attentions, "attentions", lambda i: f"decoder layer {i + 1}")
    cross_layers = _layers(cross, "cross", lambda i: f"cross-attention layer {i + 1}")
    if len(cross_layers) != len(decoder_layers):
        raise TraceError(
            f"cross has {len(cross_layers)} layers but the decoder's attentions {len(decoder_layers)}: every decoder "
            "layer has one self-attention and one cross-attention"
        )
    src = _Side(source, "source tokens were given")
    tgt = _Side(target, "tokens were given")
    everywhere = np.ones((len(source), len(source)), dtype=bool)
    causal = np.tril(np.ones((len(target), len(target)), dtype=bool))
    across = np.ones((len(target), len(source)), dtype=bool)
    blocks = {}
    for i, layer in enumerate(encoder_layers):
        block = block_name("encoder", i, "self_attn")
        weights = _check_weights(_where(kind, block), layer, everywhere, src, src, given=came_in)
        blocks[block] = Block(block, source, source, None, everywhere, weights, None)
    for i, (self_layer, cross_layer) in enumerate(zip(decoder_layers, cross_layers)):  # model order: self, cross
        for type_, layer, mask, keys in (
            ("self_attn", self_layer, causal, tgt),
            ("cross_attn", cross_layer, across, src),
        ):
            block = block_name("decoder", i, type_)
            weights = _check_weights(_where(kind, block), layer, mask, tgt, keys, DECODER_CAUSAL, came_in)
            blocks[block] = Block(block, target, keys.pieces, None, mask, weights, None)
    return _imported(name, kind, source, target, blocks)


def _imported(
    name: str, kind: str, source: tuple[str, ...] | None, target: tuple[str, ...], blocks: dict[str, Block]
) -> Analysis:
    """The Analysis of imported weights: what the data does not carry is left empty (module docstring)."""
    n_heads = _check_heads(blocks, kind)
    first = source if kind != "decoder-only" else target
    return Analysis(
        checkpoint=_text_only(str(name), "name"),
        kind=kind,
        text=_text(source, target, kind),
        source_pieces=source,
        target_pieces=target,
        target_ids=(),
        blocks=blocks,
        positional_encoding={_first_stack(kind): np.zeros((len(first or ()), 0), dtype=np.float32)},
        predictions=(),
        output_text=TEXT_RULE.join(target) if kind == "encoder-decoder" else None,
        positional=UNKNOWN_POSITIONAL,
        kv_heads=n_heads,
    )


# --- Hugging Face and TransformerLens ------------------------------------------------------------------------------


def _field(outputs: Any, key: str) -> Any:
    """`outputs[key]` of a mapping (a ModelOutput is one and holds only what is not None), else the attribute."""
    if isinstance(outputs, Mapping):
        return outputs.get(key)
    return getattr(outputs, key, None)


def _looks_causal(attentions: Any) -> bool:
    """Whether the first layer's weights above the diagonal are all ~0: what a causal model's are. A causal model
    masks every layer alike, so the first decides; a later layer that disagrees fails `_check_weights`'s mask
    check. One token has no cell above the diagonal: then causal (both kinds attend alike there)."""
    if isinstance(attentions, (list, tuple)):
        if not attentions:
            return True  # from_arrays names the problem
        first = attentions[0]
    else:
        first = attentions[0] if getattr(attentions, "shape", ()) else attentions
    try:
        array = _as_array(first, "layer 1's attention")
    except TraceError:
        return True  # from_arrays names the problem
    if array.ndim not in (3, 4) or array.shape[-1] != array.shape[-2]:
        return True
    above = np.triu(np.ones(array.shape[-2:], dtype=bool), k=1)
    return bool(np.all(np.abs(array[..., above]) <= MASKED_TOLERANCE))


def from_huggingface(
    outputs: Any,
    tokens: Sequence[str],
    *,
    source_tokens: Sequence[str] | None = None,
    name: str = "huggingface",
    kind: str | None = None,
) -> Analysis:
    """An Analysis of a Hugging Face model's output, computed with `output_attentions=True` (and, for the weights
    to be returned, `attn_implementation="eager"`); torch tensors or numpy arrays, batch of one.

    An encoder-decoder's output (it has `encoder_attentions`) gives its `encoder_attentions` over `source_tokens`,
    `decoder_attentions` over `tokens` and `cross_attentions`. Any other gives `attentions` over `tokens`, as
    `kind`: "decoder-only" (GPT-2-like, causal) or "encoder-only" (BERT-like, bidirectional); `kind=None` infers it
    from the weights: the first layer all ~0 above the diagonal is a causal model, anything else is not. Pass
    `kind` where the inference could be wrong: a one-token input, or a BERT whose padding hides every later key.
    """
    if kind is not None:
        _check_kind(kind)
    encoder = _field(outputs, "encoder_attentions")
    if encoder is not None or kind == "encoder-decoder":
        if kind not in (None, "encoder-decoder"):
            raise TraceError(f"the outputs hold encoder_attentions (an encoder-decoder's), not a {kind} model's")
        decoder, cross = _field(outputs, "decoder_attentions"), _field(outputs, "cross_attentions")
        missing = [k for k, v in (("encoder", encoder), ("decoder", decoder), ("cross", cross)) if v is None]
        if missing:
            raise TraceError(
                f"the encoder-decoder's outputs lack {', '.join(f'{m}_attentions' for m in missing)}: call the "
                "model with output_attentions=True"
            )
        return from_arrays(
            decoder,
            tokens,
            kind="encoder-decoder",
            name=name,
            source_tokens=source_tokens,
            encoder=encoder,
            cross=cross,
        )
    attentions = _field(outputs, "attentions")
    # sdpa (transformers' default) returns a None for each layer, or nothing at all, however it was asked
    if attentions is None or (isinstance(attentions, (list, tuple)) and all(a is None for a in attentions)):
        raise TraceError(
            "the outputs hold no attentions: call the model with output_attentions=True and return_dict=True "
            '(loaded with attn_implementation="eager": sdpa and flash attention do not return their weights)'
        )
    if kind is None:
        kind = "decoder-only" if _looks_causal(attentions) else "encoder-only"
    return from_arrays(attentions, tokens, kind=kind, name=name, source_tokens=source_tokens)


def from_transformer_lens(cache: Any, tokens: Sequence[str], name: str = "transformer_lens") -> Analysis:
    """An Analysis of a TransformerLens `ActivationCache` (`model.run_with_cache(...)`), or any mapping with keys
    `blocks.{l}.attn.hook_pattern`, each `[batch, heads, queries, keys]` with a batch of one (or without the batch
    axis: `remove_batch_dim=True`). TransformerLens models are causal language models: decoder-only. `tokens` are
    `model.to_str_tokens(...)` of the same input; the layers must be 0 to L-1, none missing."""
    if not hasattr(cache, "keys") or not hasattr(cache, "__getitem__"):
        raise TraceError(f"a TransformerLens cache is a mapping of hook names to arrays, not {type(cache).__name__}")
    found: dict[int, Any] = {}
    for key in cache.keys():  # noqa: SIM118 - an ActivationCache has keys(), and iterating it may not give them
        match = PATTERN_KEY.fullmatch(str(key))
        if match:
            found[int(match[1])] = key
    if not found:
        raise TraceError(
            "the cache holds no blocks.{l}.attn.hook_pattern: run model.run_with_cache(...) without a names_filter "
            "that drops the attention patterns"
        )
    if len(found) > MAX_LAYERS:
        raise TraceError(f"the cache has {len(found)} layers, more than the {MAX_LAYERS} allowed")
    gap = next(i for i in range(len(found) + 1) if i not in found)
    if gap < len(found):
        raise TraceError(
            f"the cache has attention patterns for {len(found)} layers but none for layer {gap + 1} "
            f"(blocks.{gap}.attn.hook_pattern): layers must be 1 to {len(found)}, none missing"
        )
    return from_arrays([cache[found[i]] for i in range(len(found))], tokens, kind="decoder-only", name=name)


# --- trace files ---------------------------------------------------------------------------------------------------


@dataclass
class _Entry:
    """One attention block as a trace file gives it, before the checks."""

    name: Any
    weights: Any
    mask: Any
    scores: Any = None
    queries: Any = None
    keys: Any = None
    claims: dict[str, Any] | None = None  # JSON: the entry's own stack, layer and type


def read_trace(data: bytes, filename: str, max_bytes: int | None = None) -> Analysis:
    """The Analysis in a trace file this app exported: `.json` (analysis.export.to_json) or `.npz`
    (analysis.export.to_npz_bytes), format 3 only. Its blocks' weights, masks and scores, its tokens, kind,
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
        raise TraceError(f"{filename}: {_size(size)}, more than the {_size(MAX_FILE_BYTES)} a trace file may be")
    suffix = filename.lower().rpartition(".")[2] if "." in filename else ""
    if suffix == "json":
        _fits(JSON_PARSED_PER_BYTE * size, max_bytes, filename, JSON_INSTEAD)
        meta, entries, positional = _read_json(bytes(data), filename)
    elif suffix == "npz":
        meta, entries, positional = _read_npz(bytes(data), filename, max_bytes)
    else:
        raise TraceError(
            f"{filename}: a trace is a .json or .npz file (as the app's downloads and `python -m atlas trace -o` "
            f"write){'; a .jsonl holds many: save one line as .json' if suffix == 'jsonl' else ''}"
        )
    try:
        return _from_trace(meta, entries, positional)
    except TraceError as exc:
        raise TraceError(f"{filename}: {exc}") from exc


REQUIRED = ("checkpoint", "kind", "positional", "kv_head_of_query_head", "predictions")


def _check_meta(meta: Any, filename: str, more: tuple[str, ...]) -> None:
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


def _json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words: "null", "a number", …"""
    kinds = {bool: "true or false", int: "a number", float: "a number", str: "a string", dict: "an object"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _read_json(data: bytes, filename: str) -> tuple[dict, list[_Entry], Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{filename}: not UTF-8 text (byte offset {exc.start:,}), so not a JSON trace") from exc
    try:
        obj = parse_json(text, filename)
    except JsonFileError as exc:
        raise TraceError(str(exc)) from exc
    _check_meta(obj, filename, ("attention", "positional_encoding"))
    attention = obj["attention"]
    if not isinstance(attention, list):
        raise TraceError(f'{filename}: "attention" is a {type(attention).__name__}, not a list of blocks')
    entries = []
    for i, entry in enumerate(attention):
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
        entries.append(
            _Entry(
                entry["name"],
                entry["weights"],
                entry["mask"],
                entry.get("scores"),
                entry["queries"],
                entry["keys"],
                claims,
            )
        )
    return obj, entries, obj["positional_encoding"]


NPZ_PARTS = ("weights", "scores", "mask")
# What a damaged zip or .npy raises while read: a CRC or header fault, a cut member, a corrupt deflate stream.
ZIP_FAULTS = (ValueError, OSError, EOFError, RuntimeError, zipfile.BadZipFile, zlib.error)
# A JSON trace's parsed objects (Python lists of floats) per byte of its text, measured on the app's own exports
# (tests/test_trace_bounds.py): a bound on what parsing one costs, asked before it starts.
JSON_PARSED_PER_BYTE = 6


JSON_INSTEAD = (
    "save it as .npz instead (Explore's “Whole analysis as NPZ”, `python -m atlas trace … -o OUT.npz`, "
    "`atlas.save(analysis, 'OUT.npz')`): read without parsing, it takes a fraction of that"
)


def _fits(
    needed: int, max_bytes: int | None, filename: str, instead: str = "export a shorter text, or fewer layers"
) -> None:
    if max_bytes is not None and needed > max_bytes:
        raise TraceError(
            f"{filename}: its attention would take {_size(needed)} in memory once read, more than this server keeps "
            f"for a trace ({_size(max_bytes)} now): {instead}"
        )


def _role(key: str) -> tuple[str, str]:
    """What an .npz member holds and the dtype kinds it may have ("f" floats, "b" booleans, "u" bytes)."""
    if key == "meta.json":
        return "its JSON object", "u"
    if key == "positional_encoding":
        return "positional-encoding rows", "f"
    part = key.rpartition(".")[2]
    return {"weights": ("attention weights", "f"), "scores": ("scores", "f"), "mask": ("a mask", "b")}.get(
        part, ("?", "")
    )


def _npz_members(data: bytes, filename: str) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """Every member of an .npz, measured without building an array: from the zip's directory and each .npy header,
    its dtype and shape, checked to be what its role stores and to fit the bytes the member holds (a header may
    claim (10**10,) in a file of a few bytes)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except ZIP_FAULTS as exc:
        raise TraceError(f"{filename}: not a readable .npz archive ({exc})") from exc
    if len(infos) > 3 * MAX_LAYERS * 3 + 2:
        raise TraceError(f"{filename}: {len(infos):,} members, more than a trace of {MAX_LAYERS} layers holds")
    unpacked = sum(info.file_size for info in infos)
    limit = UNPACKED_PER_FILE_BYTE * MAX_FILE_BYTES
    if unpacked > limit:
        raise TraceError(f"{filename}: its arrays unpack to {_size(unpacked)}, more than the {_size(limit)} allowed")
    members = {}
    for info in infos:
        if not info.filename.endswith(".npy"):
            raise TraceError(f"{filename}: member {info.filename!r} is not an .npy array; a trace holds arrays only")
        key = info.filename.removesuffix(".npy")
        try:
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
                if version not in read:
                    raise ValueError(f".npy format {version[0]}.{version[1]}; 1.0 and 2.0 are read")
                shape, _, dtype = read[version](member, max_header_size=MAX_HEADER_BYTES)
        except (*ZIP_FAULTS, SyntaxError) as exc:
            raise TraceError(f"{filename}: array {key!r} has no readable .npy header ({exc})") from exc
        what, kinds = _role(key)
        if dtype.hasobject or dtype.kind not in kinds or (kinds == "u" and dtype.itemsize != 1):
            wanted = {"f": "floats", "b": "true/false values", "u": "bytes (uint8)"}.get(kinds, "?")
            held = "objects, which only a pickle holds (never read here)" if dtype.hasobject else f"{dtype} values"
            raise TraceError(f"{filename}: array {key!r} holds {held}, where a trace stores {what} as {wanted}")
        claimed = math.prod(shape) * dtype.itemsize
        if claimed > info.file_size:
            raise TraceError(
                f"{filename}: array {key!r} claims shape {shape} of {dtype} ({_size(claimed)}) but holds "
                f"{_size(info.file_size)}"
            )
        if key == "meta.json" and claimed > MAX_META_BYTES:
            raise TraceError(
                f"{filename}: meta.json is {_size(claimed)}, more than the {_size(MAX_META_BYTES)} allowed"
            )
        members[key] = (dtype, shape)
    return members


def _read_npz(data: bytes, filename: str, max_bytes: int | None = None) -> tuple[dict, list[_Entry], Any]:
    if not data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        raise TraceError(f"{filename}: not an .npz archive (a zip of .npy arrays): it does not start as a zip file")
    members = _npz_members(data, filename)
    parsed = sum(  # what the Analysis keeps: float32 weights and scores, boolean masks
        math.prod(shape) * (1 if key.endswith(".mask") else 4) for key, (_, shape) in members.items()
    )
    _fits(parsed, max_bytes, filename)
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
    except ZIP_FAULTS as exc:
        raise TraceError(f"{filename}: not a readable .npz archive ({exc})") from exc
    with archive:

        def read(key: str) -> np.ndarray:
            try:
                return archive[key]
            except ZIP_FAULTS as exc:  # damage the headers could not show
                raise TraceError(f"{filename}: array {key!r} cannot be read ({exc})") from exc

        if "meta.json" not in archive.files:
            raise TraceError(f"{filename}: not a trace: no meta.json array (the app's .npz traces carry one)")
        raw = read("meta.json")
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise TraceError(f"{filename}: meta.json is {raw.dtype} {raw.shape}, not the UTF-8 bytes of a JSON object")
        try:
            meta = parse_json(raw.tobytes().decode("utf-8"), f"{filename}: meta.json")
        except (UnicodeDecodeError, JsonFileError) as exc:
            raise TraceError(f"{filename}: meta.json is not UTF-8 JSON ({exc})") from exc
        _check_meta(meta, filename, ())
        if "positional_encoding" not in archive.files:
            raise TraceError(f"{filename}: not a trace: no positional_encoding array")
        parts: dict[str, dict[str, np.ndarray]] = {}
        for key in archive.files:
            if key in ("meta.json", "positional_encoding"):
                continue
            name, _, part = key.rpartition(".")
            if part not in NPZ_PARTS or not name:
                raise TraceError(
                    f"{filename}: unexpected array {key!r}: a trace holds NAME.weights, NAME.scores, NAME.mask"
                )
            if len(parts) >= 3 * MAX_LAYERS and name not in parts:
                raise TraceError(f"{filename}: more than {3 * MAX_LAYERS} attention blocks")
            parts.setdefault(name, {})[part] = read(key)
        entries = []
        for name, arrays in parts.items():
            missing = [p for p in ("weights", "mask") if p not in arrays]
            if missing:
                raise TraceError(f"{filename}: block {name} has no {' or '.join(f'{name}.{p}' for p in missing)} array")
            entries.append(_Entry(name, arrays["weights"], arrays["mask"], arrays.get("scores")))
        return meta, entries, read("positional_encoding")


ATTENTIONS_OF_KIND = {
    "decoder-only": ("decoder.self_attn",),
    "encoder-only": ("encoder.self_attn",),
    "encoder-decoder": ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"),
}


def _trace_tokens(meta: dict, kind: str) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """source_tokens and target_tokens as the kind has them: a language model has no source, an encoder no
    target (the export writes neither)."""
    has_source, has_target = kind != "decoder-only", kind != "encoder-only"
    for key, wanted in (("source_tokens", has_source), ("target_tokens", has_target)):
        if wanted and key not in meta:
            raise TraceError(f"not a trace: a {kind} trace has {key!r}, this one has none")
        if not wanted and key in meta:
            raise TraceError(f"a {kind} trace has no {key!r}, this one has")
    source = _tokens(meta["source_tokens"], "source_tokens") if has_source else None
    target = _tokens(meta["target_tokens"], "target_tokens") if has_target else ()
    return source, target


def _mask(value: Any, where: str, shape: tuple[int, int]) -> np.ndarray:
    try:
        mask = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise TraceError(f"{where}'s mask is not a rectangular array ({exc})") from exc
    if mask.dtype != bool:
        raise TraceError(f"{where}'s mask holds {mask.dtype} values, not true/false")
    if mask.shape != shape:
        raise TraceError(f"{where}'s mask has shape {mask.shape}, not {shape} (one row per query, one column per key)")
    return mask


def _scores(value: Any, where: str, mask: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
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
        h, q, k = _first(bad)
        raise TraceError(
            f"{where}'s scores are missing or not finite where the mask allows attention: head {h + 1}, "
            f"query {q + 1}, key {k + 1}"
        )
    return np.where(mask[None], raw, np.nan).astype(np.float32)


def _kv_heads(value: Any, n_heads: int) -> int:
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


def _predictions(value: Any, pieces: tuple[str, ...]) -> tuple[tuple[Prediction, ...], ...]:
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
        top = []
        for candidate in item["top"]:
            ok = isinstance(candidate, dict) and isinstance(candidate.get("token"), str)
            ok = ok and isinstance(candidate.get("id"), int) and not isinstance(candidate.get("id"), bool)
            prob = candidate.get("prob") if isinstance(candidate, dict) else None
            ok = ok and isinstance(prob, (int, float)) and not isinstance(prob, bool) and 0 <= prob <= 1
            if not ok:
                raise TraceError(
                    f'predictions at position {i + 1}: {candidate!r} is not {{"token": str, "id": int, "prob": 0..1}}'
                )
            _text_only(candidate["token"], f"predictions at position {i + 1}: a token")
            top.append(Prediction(candidate["token"], candidate["id"], float(prob)))
        out.append(tuple(top))
    return tuple(out)


def _entry_name(name: Any, i: int) -> tuple[str, int, str]:
    """Entry `i`'s block name parsed, as the app writes it and the pages look it up: `decoder.layers.1.self_attn`,
    the layer in ASCII digits without leading zeros (a "01" or an Arabic-Indic "١" would parse to a layer that no
    page finds under its own name)."""
    try:
        stack, layer, type_ = parse_block_name(name)
        if name == block_name(stack, layer, type_):
            return stack, layer, type_
    except (ValueError, AttributeError):  # AttributeError: a name that is no string
        pass
    raise TraceError(
        f"attention entry {i + 1}: {name!r} is not an attention block's name as the app writes it "
        f"({block_name('decoder', 0, 'self_attn')}: encoder or decoder, layer from 0, self_attn or cross_attn)"
    )


def _from_trace(meta: dict, entries: list[_Entry], positional_rows: Any) -> Analysis:
    kind = _check_kind(meta["kind"])
    checkpoint, positional = meta["checkpoint"], meta["positional"]
    if not isinstance(checkpoint, str):
        raise TraceError(f"checkpoint is {checkpoint!r}, not a name")
    _text_only(checkpoint, "checkpoint")
    if positional not in POSITIONAL_KINDS + (UNKNOWN_POSITIONAL,):
        raise TraceError(f"positional {positional!r} is none of {', '.join(POSITIONAL_KINDS + (UNKNOWN_POSITIONAL,))}")
    source, target = _trace_tokens(meta, kind)
    if not entries:
        raise TraceError("it holds no attention blocks")
    allowed = ATTENTIONS_OF_KIND[kind]
    blocks: dict[str, Block] = {}
    layers: dict[str, list[int]] = {}
    for i, entry in enumerate(entries):
        stack, layer, type_ = _entry_name(entry.name, i)
        name = entry.name
        claims = entry.claims or {}
        said = {"stack": stack, "layer": layer, "type": type_}
        for key, claim in claims.items():
            if claim != said[key] or isinstance(claim, bool):
                raise TraceError(f"{name}: its {key} is {claim!r} but its name says {said[key]!r}")
        if attention_type(name) not in allowed:
            raise TraceError(f"a {kind} model has no {stack}.{type_} blocks, yet it holds {name}")
        if name in blocks:
            raise TraceError(f"{name} appears twice")
        queries, keys = query_key_pieces(name, source, target)
        for side, given, pieces in (("queries", entry.queries, queries), ("keys", entry.keys, keys)):
            if given is not None and tuple(given) != pieces:
                own = "source_tokens" if pieces is source else "target_tokens"
                raise TraceError(f"{name}'s {side} differ from the trace's {own}")
        where = f"{_where(kind, name)} ({name})"
        weights = _as_array(entry.weights, f"{where}'s weights")
        mask = _mask(entry.mask, where, (len(queries), len(keys)))
        q_side = _Side(queries, "source tokens" if queries is source else "target tokens")
        k_side = _Side(keys, "source tokens" if keys is source else "target tokens")
        came_in = precision(entry.weights)  # a trace file may keep float16 weights
        checked = _check_weights(where, weights, mask, q_side, k_side, "the trace's mask forbids", came_in)
        scores = _scores(entry.scores, where, mask, checked.shape)
        blocks[name] = Block(name, queries, keys, scores, mask, checked, None)
        layers.setdefault(attention_type(name), []).append(layer)
    for attention, found in layers.items():
        if len(found) > MAX_LAYERS:
            raise TraceError(f"{attention} has {len(found)} layers, more than the {MAX_LAYERS} allowed")
        if sorted(found) != list(range(len(found))):
            raise TraceError(f"{attention}'s layers are {sorted(f + 1 for f in found)}, not 1 to {len(found)}")
    n_heads = _check_heads(blocks, kind)
    first = target if kind == "decoder-only" else source
    rows = _as_array(positional_rows, "positional_encoding")
    if rows.ndim != 2 or rows.shape[0] != len(first or ()):
        raise TraceError(
            f"positional_encoding has shape {rows.shape}, not one row per token of the first stack ({len(first or ())})"
        )
    if not np.isfinite(rows).all():
        raise TraceError("positional_encoding holds NaN or infinite values")
    pieces = (source or ()) if kind == "encoder-only" else target
    predictions = _predictions(meta["predictions"], pieces)
    text = _optional_text(meta, "text")
    output = _optional_text(meta, "output_text") if kind == "encoder-decoder" else None
    if output is None and kind == "encoder-decoder":
        output = _sentencepiece_text(target)
    return Analysis(
        checkpoint=checkpoint,
        kind=kind,
        text=_text(source, target, kind) if text is None else text,
        source_pieces=source,
        target_pieces=target,
        target_ids=(),
        blocks=blocks,
        positional_encoding={_first_stack(kind): rows.astype(np.float32)},
        predictions=predictions,
        output_text=output,
        positional=positional,
        kv_heads=_kv_heads(meta["kv_head_of_query_head"], n_heads),
        blank=len(predictions) == 1 and len(pieces) > 1,
    )
