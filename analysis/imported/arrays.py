"""Attention given as plain arrays (numpy, torch, nested lists), as an Analysis: `from_arrays`, which the Hugging
Face and TransformerLens readers end in too."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from analysis.imported.checks import (
    DECODER_CAUSAL,
    MAX_LAYERS,
    TEXT_RULE,
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
    text_only,
    token_list,
)
from analysis.record import Analysis, Sublayer
from model.names import sublayer_name


def _layers(attentions: Any, what: str, label: Callable[[int], str]) -> list[np.ndarray]:
    """Per-layer [heads, queries, keys] arrays from a list of per-layer arrays or one array whose first axis is the
    layers; a leading batch axis of size 1 on each layer is dropped, a larger batch refused."""
    if isinstance(attentions, (list, tuple)):
        layers = list(attentions)
    elif hasattr(attentions, "shape") and len(attentions.shape) in (4, 5):
        if attentions.shape[0] > MAX_LAYERS:  # before converting: a bounded count of layers is read
            raise TraceError(f"{what} has {attentions.shape[0]} layers, more than the {MAX_LAYERS} allowed")
        layers = list(as_array(attentions, what))
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
        array = as_array(layer, f"{where}'s attention")
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

    decoder-only: `attentions` is the self-attention over `tokens` (queries = keys = tokens), sub-layers
    `decoder.layers.{i}.self_attn`, the mask causal (a query sees itself and the keys before it).
    encoder-only: the same over `tokens` with sub-layers `encoder.layers.{i}.self_attn` and every cell allowed.
    encoder-decoder: `attentions` is the decoder's self-attention over `tokens` (causal); `encoder` the encoder's
    over `source_tokens` and `cross` the decoder's cross-attention (queries `tokens`, keys `source_tokens`), both
    with every cell allowed; the decoder and the cross-attention have the same number of layers.

    The mask is derived from the kind, since arrays of weights carry none: where a causal model cannot attend,
    its weights must be ~0 (the message suggests the other kind otherwise). Every check is `check_weights`'s
    (analysis.imported.checks); the returned Analysis is described in analysis.imported's docstring.
    """
    kind = check_kind(kind)
    target = token_list(tokens, "tokens")
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
        return _one_stack(attentions, target, kind, name, came_in)
    if source_tokens is None or encoder is None or cross is None:
        needed = (("source_tokens", source_tokens), ("encoder", encoder), ("cross", cross))
        missing = [k for k, v in needed if v is None]
        raise TraceError(f"an encoder-decoder needs {', '.join(missing)} as well as the decoder's attentions")
    return _encoder_decoder(attentions, target, source_tokens, encoder, cross, name, came_in)


def _one_stack(attentions: Any, target: tuple[str, ...], kind: str, name: str, came_in: tuple[str, float]) -> Analysis:
    """from_arrays of a decoder-only (causal) or encoder-only (every cell allowed) model."""
    stack = first_stack(kind)
    layers = _layers(attentions, "attentions", lambda i: f"layer {i + 1}")
    side = Side(target, "tokens were given")
    n = len(target)
    mask = np.tril(np.ones((n, n), dtype=bool)) if kind == "decoder-only" else np.ones((n, n), dtype=bool)
    sublayers = {}
    for i, layer in enumerate(layers):
        sublayer = sublayer_name(stack, i, "self_attn")  # `name` is the model's
        weights = check_weights(place_of(kind, sublayer), layer, mask, side, side, given=came_in)
        sublayers[sublayer] = Sublayer(sublayer, target, target, None, mask, weights, None)
    source = target if kind == "encoder-only" else None
    return _imported(name, kind, source, () if kind == "encoder-only" else target, sublayers)


def _encoder_decoder(
    attentions: Any,
    target: tuple[str, ...],
    source_tokens: Sequence[str],
    encoder: Any,
    cross: Any,
    name: str,
    came_in: tuple[str, float],
) -> Analysis:
    """from_arrays of an encoder-decoder: the encoder's self-attention, then each decoder layer's self- and
    cross-attention."""
    kind = "encoder-decoder"
    source = token_list(source_tokens, "source_tokens")
    encoder_layers = _layers(encoder, "encoder", lambda i: f"encoder layer {i + 1}")
    decoder_layers = _layers(attentions, "attentions", lambda i: f"decoder layer {i + 1}")
    cross_layers = _layers(cross, "cross", lambda i: f"cross-attention layer {i + 1}")
    if len(cross_layers) != len(decoder_layers):
        raise TraceError(
            f"cross has {len(cross_layers)} layers but the decoder's attentions {len(decoder_layers)}: every decoder "
            "layer has one self-attention and one cross-attention"
        )
    src = Side(source, "source tokens were given")
    tgt = Side(target, "tokens were given")
    everywhere = np.ones((len(source), len(source)), dtype=bool)
    causal = np.tril(np.ones((len(target), len(target)), dtype=bool))
    across = np.ones((len(target), len(source)), dtype=bool)
    sublayers = {}
    for i, layer in enumerate(encoder_layers):
        sublayer = sublayer_name("encoder", i, "self_attn")
        weights = check_weights(place_of(kind, sublayer), layer, everywhere, src, src, given=came_in)
        sublayers[sublayer] = Sublayer(sublayer, source, source, None, everywhere, weights, None)
    for i, (self_layer, cross_layer) in enumerate(zip(decoder_layers, cross_layers)):  # model order: self, cross
        for type_, layer, mask, keys in (
            ("self_attn", self_layer, causal, tgt),
            ("cross_attn", cross_layer, across, src),
        ):
            sublayer = sublayer_name("decoder", i, type_)
            weights = check_weights(place_of(kind, sublayer), layer, mask, tgt, keys, DECODER_CAUSAL, came_in)
            sublayers[sublayer] = Sublayer(sublayer, target, keys.pieces, None, mask, weights, None)
    return _imported(name, kind, source, target, sublayers)


def _imported(
    name: str, kind: str, source: tuple[str, ...] | None, target: tuple[str, ...], sublayers: dict[str, Sublayer]
) -> Analysis:
    """The Analysis of imported weights: what the data does not carry is left empty (analysis.imported's
    docstring)."""
    n_heads = check_heads(sublayers, kind)
    first = source if kind != "decoder-only" else target
    return Analysis(
        checkpoint=text_only(str(name), "name"),
        kind=kind,
        text=joined_text(source, target, kind),
        source_pieces=source,
        target_pieces=target,
        target_ids=(),
        sublayers=sublayers,
        positional_encoding={first_stack(kind): np.zeros((len(first or ()), 0), dtype=np.float32)},
        predictions=(),
        output_text=TEXT_RULE.join(target) if kind == "encoder-decoder" else None,
        positional=UNKNOWN_POSITIONAL,
        kv_heads=n_heads,
    )
