"""The names of a model's parts, built and read in one place.

An attention sub-layer is `{stack}.layers.{layer}.{type}`: `encoder.layers.0.self_attn`, `decoder.layers.1.cross_attn`
(layers counted from 0, as the modules are; pages label them from 1). A layer's other recorded points add one more
part (`decoder.layers.0.resid_post`, model/trace.py). An attention type is `{stack}.{type}` (`decoder.cross_attn`):
one kind of sub-layer in every layer. Nothing else builds or splits these strings.

A model's kind names the attention types it has (ATTENTIONS); what it can do is asked of those (Capabilities: has it
an encoder, a decoder, cross-attention?), so that the kind is read in one place, here.
"""

from __future__ import annotations

STACKS = ("encoder", "decoder")
TYPES = ("self_attn", "cross_attn")
# The attention types each kind of model has, in the order computed.
ATTENTIONS: dict[str, tuple[str, ...]] = {
    "encoder-decoder": ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"),
    "decoder-only": ("decoder.self_attn",),
    "encoder-only": ("encoder.self_attn",),
}


class Capabilities:
    """What a model can do, read from the attention types its `kind` has (ATTENTIONS): shared by the config
    (model.config) and the Analysis of a text (analysis.record), so that a page, a chart or an analysis asks "has it
    cross-attention?", never which kind it is. One question tells each kind apart: a language model is the one
    without an encoder, an encoder alone the one without a decoder, an encoder-decoder the one with cross-attention."""

    kind: str

    @property
    def has_encoder(self) -> bool:
        """An encoder reads the input, every token seeing every other (encoder-decoder, encoder-only)."""
        return "encoder.self_attn" in ATTENTIONS[self.kind]

    @property
    def has_decoder(self) -> bool:
        """A decoder writes tokens, each seeing only those before it (encoder-decoder, decoder-only): the model
        predicts the next token; without one it writes nothing."""
        return "decoder.self_attn" in ATTENTIONS[self.kind]

    @property
    def has_cross_attention(self) -> bool:
        """The decoder reads an encoder's output (section 3.2.3's encoder-decoder attention): the model writes an
        output of its own from a source text (a translator), instead of continuing its input (a language model)."""
        return "decoder.cross_attn" in ATTENTIONS[self.kind]

    @property
    def first_stack(self) -> str:
        """The stack that reads the input: the encoder, or the decoder of a model without one (a language model)."""
        return "encoder" if self.has_encoder else "decoder"


def layer_name(stack: str, layer: int) -> str:
    """`decoder`, 1 → `decoder.layers.1`: a layer's module path, the prefix of its sub-layers and recorded points."""
    return f"{stack}.layers.{layer}"


def sublayer_name(stack: str, layer: int, type_: str) -> str:
    """`decoder`, 1, `cross_attn` → `decoder.layers.1.cross_attn`."""
    return f"{layer_name(stack, layer)}.{type_}"


def parse_sublayer_name(name: str) -> tuple[str, int, str]:
    """`decoder.layers.1.cross_attn` → ("decoder", 1, "cross_attn"); ValueError for anything else."""
    parts = name.split(".")
    if len(parts) != 4 or parts[0] not in STACKS or parts[1] != "layers" or not parts[2].isdigit():
        raise ValueError(f"not an attention sub-layer name: {name!r}")
    if parts[3] not in TYPES:
        raise ValueError(f"not an attention sub-layer name: {name!r}")
    return parts[0], int(parts[2]), parts[3]


def sublayer_layer(name: str) -> int:
    """The layer (from 0) of a sub-layer name."""
    return parse_sublayer_name(name)[1]


def attention_type(name: str) -> str:
    """`decoder.layers.1.cross_attn` → `decoder.cross_attn`: the sub-layer's kind, in every layer."""
    stack, _, type_ = parse_sublayer_name(name)
    return f"{stack}.{type_}"


def parse_attention_type(attention: str) -> tuple[str, str]:
    """`decoder.cross_attn` → ("decoder", "cross_attn"); ValueError for anything else."""
    parts = attention.split(".")
    if len(parts) != 2 or parts[0] not in STACKS or parts[1] not in TYPES:
        raise ValueError(f"not an attention type: {attention!r}")
    return parts[0], parts[1]
