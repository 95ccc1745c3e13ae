"""One way to run any model of ours: `forward(model, ids, source_ids=None, past=None, …)` → (logits, trace).

The paper's three classes keep the forward each one's reading asks for (model/transformer.py: an encoder-decoder
reads a source and a target, a language model one text it may continue, an encoder alone one text with nothing to
continue). Everything outside model/ runs a model through `forward`, so the branch on the model's kind is written once,
here (tests/test_forward.py checks that no other call exists).
"""

from __future__ import annotations

from torch import Tensor, nn

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
    ablate:      heads switched off, by block name (model.attention.Ablation).
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
