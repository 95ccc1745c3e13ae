"""A Hugging Face model's attention (`output_attentions=True`), as an Analysis: `from_huggingface`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from analysis.imported.arrays import from_arrays
from analysis.imported.checks import MASKED_TOLERANCE, TraceError, as_array, check_kind
from analysis.record import Analysis


def _field(outputs: Any, key: str) -> Any:
    """`outputs[key]` of a mapping (a ModelOutput is one and holds only what is not None), else the attribute."""
    if isinstance(outputs, Mapping):
        return outputs.get(key)
    return getattr(outputs, key, None)


def _looks_causal(attentions: Any) -> bool:
    """Whether the first layer's weights above the diagonal are all ~0: what a causal model's are. A causal model
    masks every layer alike, so the first decides; a later layer that disagrees fails `check_weights`'s mask
    check. One token has no cell above the diagonal: then causal (both kinds attend alike there)."""
    if isinstance(attentions, (list, tuple)):
        if not attentions:
            return True  # from_arrays names the problem
        first = attentions[0]
    else:
        first = attentions[0] if getattr(attentions, "shape", ()) else attentions
    try:
        array = as_array(first, "layer 1's attention")
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
        check_kind(kind)
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
