"""One way to run any model of ours: `forward(model, ids, source_ids=None, past=None, …)` → (logits, trace).

The paper's three classes keep the forward each one's reading asks for (model/transformer.py: an encoder-decoder
reads a source and a target, a language model one text it may continue, an encoder alone one text with nothing to
continue). Everything outside model/ runs a model through `forward`, so the branch on the model's kind is written once,
here (tests/test_forward.py checks that no other call exists).
"""

from __future__ import annotations

from torch import Tensor, nn

from model.attention import attention_mask, padding_mask
from model.names import layer_name
from model.trace import Trace
from model.transformer import NONE, Ablations


def forward(
    model: nn.Module,
    ids: Tensor,
    source_ids: Tensor | None = None,
    past: Trace | None = None,
    *,
    record: bool = True,
    ablate: Ablations = NONE,
    activations: bool = False,
) -> tuple[Tensor, Trace]:
    """Logits (B, T, vocab) at every position of `ids` (B, T), and the trace of the pass.

    ids:         the tokens the model predicts from: the text of a decoder-only or encoder-only model, the
                 decoder's input (the target so far) of an encoder-decoder.
    source_ids:  (B, S) the encoder's input: an encoder-decoder needs them (with `past` they are still given,
                 their padding masks the cross-attention); the other two kinds have no source.
    past:        the trace of the previous call: the pass continues after its tokens, reusing its keys and
                 values (incremental decoding). An encoder-only model has nothing to continue.
    record:      keep every head's scores and weights (False: the fused kernel, the weights never exist).
    ablate:      heads switched off, by sub-layer name (model.attention.Ablation).
    activations: also record the residual stream and the feed-forward layers (Trace.activations).
    """
    # ids made on the CPU follow a model moved to a GPU; a model without parameters (a test's stand-in) keeps them
    device = next((p.device for p in model.parameters()), ids.device)
    ids = ids.to(device)
    source_ids = None if source_ids is None else source_ids.to(device)
    kind = model.config.kind
    options = {"record": record, "ablate": ablate, "activations": activations}
    if kind == "encoder-decoder":
        if source_ids is None:
            raise ValueError("an encoder-decoder reads a source: give source_ids (B, S) beside the target's ids")
        return model(source_ids, ids, past=past, **options)
    if source_ids is not None:
        raise ValueError(f"a {kind} model reads one text and has no source: give its ids only")
    if kind == "encoder-only":
        if past is not None:
            raise ValueError("an encoder-only model has no decoder and nothing to continue: no past")
        return model(ids, **options)
    return model(ids, past=past, **options)


def decoder_layers(
    model: nn.Module, ids: Tensor, x: Tensor, first: int, last: int, *, ablate: Ablations = NONE
) -> Tensor:
    """A decoder-only model's residual stream (B, T, d_model) after its decoder layers first … last − 1, run from
    `x` (B, T, d_model), the input of layer `first` (a trace's `decoder.layers.{first}.resid_pre`), over `ids`
    (B, T) (their padding and the no-peek rule make the mask, as `forward` makes it). `ablate` as `forward`'s.

    The speed path of a ranking that switches off a head of a later layer: the layers before it are the intact
    pass's, so they are not run again. The same layer modules as `forward`, so the same stream
    (tests/test_forward.py)."""
    if model.config.kind != "decoder-only":
        raise ValueError(f"decoder_layers runs a decoder-only model's layers, not an {model.config.kind} model's")
    device = next((p.device for p in model.parameters()), ids.device)
    ids, x = ids.to(device), x.to(device)
    valid = padding_mask(ids, model.config.pad_id)  # (B, T)
    mask = attention_mask(valid, valid, causal=True)  # (B, T, T)
    for i in range(first, last):
        name = layer_name("decoder", i)
        cut = {k.removeprefix(f"{name}."): a for k, a in ablate.items() if k.startswith(f"{name}.")}
        x, _, _ = model.decoder.layers[i](x, mask, None, None, {}, False, cut, False)
    return x


def decoder_logits(model: nn.Module, x: Tensor) -> Tensor:
    """A decoder-only model's logits (B, T', vocab) from its last layer's output `x` (B, T', d_model), any of its
    positions (the final norm and the output projection act on each position alone)."""
    return model.logits(model.decoder.norm(x))
