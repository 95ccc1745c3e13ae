"""What switching heads off does to the model's predictions: before/after, and which heads matter most.

Every function runs the model with `ablate=` (model.attention.Ablation; the ranking puts many heads side by side,
one batch row each, with a model.attention.Patch): the model itself is never changed.
Language model: the next-token distribution after the text, before and after (top-k, KL divergence).
Encoder-decoder: the greedy output before and after, and the log-probability of each token of the original
output under both (teacher forcing on the original output), with the KL divergence averaged over its steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from inference.checkpoint import Checkpoint
from inference.decoding import generate, top_k
from inference.prediction import Prediction
from inference.text import clean_text, encode_first_stack, encode_prefix, encode_source
from model.attention import Ablation, Patch
from model.forward import decoder_layers, decoder_logits, forward
from model.names import layer_name, sublayer_name
from model.trace import Trace
from model.transformer import Ablations


@dataclass(frozen=True)
class Effect:
    """The predictions before and after an ablation."""

    ablated: tuple[tuple[str, tuple[int, ...]], ...]  # (sub-layer name, heads), what was switched off
    mode: str
    kl: float  # KL(before ‖ after) in nats: at the last position (LM), the mean over output steps (encoder-decoder)
    # or over the input's positions (encoder-only)
    before_top: tuple[Prediction, ...]  # LM: next token after the text; encoder-decoder: the first output token
    after_top: tuple[Prediction, ...]
    before_output: str | None = None  # encoder-decoder: greedy outputs
    after_output: str | None = None
    steps: tuple[tuple[str, float, float], ...] = ()  # encoder-decoder: (token, log p before, log p after)


def _logits(ckpt: Checkpoint, source: Tensor | None, target: Tensor, ablate: Ablations) -> Tensor:
    """(T, vocab) logits of one sequence (teacher forcing)."""
    return forward(ckpt.model, target, source, record=False, ablate=ablate)[0][0].float()


def _kl(before: Tensor, after: Tensor) -> Tensor:
    """KL(p ‖ q) per row of (T, vocab) logits, in nats."""
    p, q = torch.log_softmax(before, dim=-1), torch.log_softmax(after, dim=-1)
    return (p.exp() * (p - q)).sum(dim=-1)


def _top(ckpt: Checkpoint, logits: Tensor, k: int) -> tuple[Prediction, ...]:
    return tuple(top_k(logits[None], k, ckpt.tokenizer.pieces, ckpt.tokenizer.never_written)[0])


def ablations(heads: dict[str, tuple[int, ...]], mode: str) -> dict[str, Ablation]:
    """{sub-layer name: heads} → the forward pass's `ablate` argument."""
    return {name: Ablation(tuple(sorted(set(hs))), mode) for name, hs in heads.items() if hs}


@torch.inference_mode()
def ablation_effect(
    ckpt: Checkpoint,
    text: str,
    heads: dict[str, tuple[int, ...]],
    mode: str = "zero",
    k: int = 5,
    output_ids: tuple[int, ...] | None = None,
) -> Effect:
    """The predictions for `text` with every head in `heads` ({sub-layer name: heads}) switched off, beside the
    intact model's. `output_ids`: an encoder-decoder's intact greedy output (64 tokens at most, without <s>) as an
    analysis of `text` decoded it: used as it is, so only the ablated model decodes."""
    cfg, cut = ckpt.config, ablations(heads, mode)
    cleaned = clean_text(text).text
    chosen = tuple((name, a.heads) for name, a in cut.items())
    if not cfg.has_decoder:  # every position's output; the top-k shown are the first position's ([CLS])
        ids = torch.tensor([encode_first_stack(ckpt, cleaned, [])])
        before = _logits(ckpt, None, ids, {})
        after = _logits(ckpt, None, ids, cut) if cut else before  # nothing switched off: run once
        kl = float(_kl(before, after).mean())
        return Effect(chosen, mode, kl, _top(ckpt, before[0], k), _top(ckpt, after[0], k))
    if not cfg.has_cross_attention:  # a language model: the next token after its text
        ids = torch.tensor([encode_prefix(ckpt, cleaned, [])])
        before = _logits(ckpt, None, ids, {})[-1]
        after = _logits(ckpt, None, ids, cut)[-1] if cut else before
        kl = float(_kl(before[None], after[None])[0])
        return Effect(chosen, mode, kl, _top(ckpt, before, k), _top(ckpt, after, k))
    source = torch.tensor([encode_source(ckpt, cleaned, [])])
    out_ids = list(output_ids) if output_ids is not None else generate(ckpt.model, [cfg.bos_id], source, 64).ids
    # nothing switched off: the ablated model is the intact one, run once (the page opens so)
    changed_ids = generate(ckpt.model, [cfg.bos_id], source, max_tokens=64, ablate=cut).ids if cut else out_ids
    target = torch.tensor([[cfg.bos_id, *out_ids]])
    before = _logits(ckpt, source, target, {})
    after = _logits(ckpt, source, target, cut) if cut else before
    gold = [*out_ids, cfg.eos_id][: before.shape[0]]
    lp_before = torch.log_softmax(before, dim=-1)[torch.arange(len(gold)), gold]
    lp_after = torch.log_softmax(after, dim=-1)[torch.arange(len(gold)), gold]
    pieces = ckpt.tokenizer.pieces(gold)
    steps = tuple((p, float(b), float(a)) for p, b, a in zip(pieces, lp_before, lp_after))
    kl = float(_kl(before, after).mean())
    decode = ckpt.tokenizer.decode
    return Effect(
        chosen, mode, kl, _top(ckpt, before[0], k), _top(ckpt, after[0], k), decode(out_ids), decode(changed_ids), steps
    )


@dataclass(frozen=True)
class RankingSetup:
    """What ranking the heads of one text needs once: the input, the intact logits at the scored rows, and every
    attention sub-layer with its number of heads (the order of the model's trace)."""

    source: Tensor | None  # encoder-decoder: the source ids; else None
    target: Tensor  # the ids fed to the (first) stack under teacher forcing
    rows: slice  # the positions whose distribution is scored
    before: Tensor  # (rows, vocab) intact logits
    sublayers: tuple[tuple[str, int], ...]  # (sub-layer name, heads)


@torch.inference_mode()
def ranking_setup(ckpt: Checkpoint, text: str) -> RankingSetup:
    """One traced pass (after the greedy output, for a translator): the scored positions and the sub-layers."""
    cfg = ckpt.config
    cleaned = clean_text(text).text
    if cfg.has_cross_attention:
        source = torch.tensor([encode_source(ckpt, cleaned, [])])
        out = generate(ckpt.model, [cfg.bos_id], source, max_tokens=64)
        target, rows = torch.tensor([[cfg.bos_id, *out.ids]]), slice(None)
    elif not cfg.has_decoder:  # the mean over every position of its input, as ablation_effect
        source, target, rows = None, torch.tensor([encode_first_stack(ckpt, cleaned, [])]), slice(None)
    else:
        source, target, rows = None, torch.tensor([encode_prefix(ckpt, cleaned, [])]), slice(-1, None)
    logits, trace = forward(ckpt.model, target, source)
    sublayers = tuple((name, rec.keys.shape[1]) for name, rec in trace.attention.items())  # keys: (B, H, Tk, d_head)
    return RankingSetup(source, target, rows, logits[0].float()[rows], sublayers)


@torch.inference_mode()
def rank_sublayer(
    ckpt: Checkpoint, setup: RankingSetup, name: str, mode: str = "zero", heads: Sequence[int] | None = None
) -> list[tuple[str, int, float]]:
    """Each head of sub-layer `name` (or those of `heads`) switched off alone: (sub-layer name, head,
    KL(before ‖ after)), in head order, side by side in batches (rank_heads)."""
    chosen = range(dict(setup.sublayers)[name]) if heads is None else heads
    return rank_heads(ckpt, setup, [(name, head) for head in chosen], mode)


@torch.inference_mode()
def rank_one_at_a_time(
    ckpt: Checkpoint, setup: RankingSetup, heads: Sequence[tuple[str, int]], mode: str = "zero"
) -> list[tuple[str, int, float]]:
    """`rank_heads` by its definition: one forward pass per (sub-layer, head), switched off by the model's own
    Ablation. What the batched path is proven equal to (tests/test_ablation.py) and timed against
    (bench/rank_heads.py)."""
    table = []
    for name, head in heads:
        after = _logits(ckpt, setup.source, setup.target, {name: Ablation((head,), mode)})[setup.rows]
        table.append((name, head, float(_kl(setup.before, after).mean())))
    return table


MAX_BATCH = 64  # heads switched off side by side in one pass, a batch row each
# The float32 tensors of a batch (row_bytes a row) stay within 512 MiB: SmolLM2 (49,152 tokens) at 256 tokens
# takes 49 rows a pass resumed (its logits only at the scored position), 10 on a whole pass.
BATCH_BYTES = 2**29


def resumes(ckpt: Checkpoint) -> bool:
    """Whether `rank_heads` starts each row at its head's layer (model.forward.decoder_layers): a decoder-only
    model, whose layers before the head's are the intact pass's."""
    return ckpt.config.has_decoder and not ckpt.config.has_encoder


def row_bytes(ckpt: Checkpoint, setup: RankingSetup) -> int:
    """About the bytes one batch row holds at once: a layer's streams and hidden layer, a head's weights
    (queries × keys) for each head, and the logits (the scored positions when resumed, else every position)."""
    cfg, t = ckpt.config, setup.target.shape[1]
    keys = max(t, 0 if setup.source is None else setup.source.shape[1])
    logits = len(range(t)[setup.rows]) if resumes(ckpt) else t
    return 4 * (t * (6 * cfg.d_model + 3 * cfg.d_ff) + cfg.n_heads * t * keys + logits * cfg.vocab_size)


def batch_rows(ckpt: Checkpoint, setup: RankingSetup) -> int:
    """How many heads `rank_heads` switches off a pass by default: MAX_BATCH, fewer where row_bytes of each
    would pass BATCH_BYTES (one at least)."""
    return max(1, min(MAX_BATCH, BATCH_BYTES // row_bytes(ckpt, setup)))


def _head_means(trace: Trace) -> dict[str, Tensor]:
    """Every sub-layer's heads' outputs averaged over the real query positions of the intact pass `trace` (recorded),
    (1, H, 1, d_head): what Ablation's mode "mean" writes. A head switched off alone is the only change in its
    row, so the output it would have had there is the intact pass's."""
    means = {}
    for name, rec in trace.attention.items():
        heads = rec.weights @ rec.values  # (1, H, Tq, d_head)
        w = rec.mask.any(dim=-1)[:, None, :, None].to(heads.dtype)  # (1, 1, Tq, 1): real queries, as Ablation's
        means[name] = (heads * w).sum(dim=2, keepdim=True) / w.sum(dim=2, keepdim=True).clamp(min=1.0)
    return means


@torch.inference_mode()
def rank_heads(
    ckpt: Checkpoint,
    setup: RankingSetup,
    heads: Sequence[tuple[str, int]],
    mode: str = "zero",
    batch: int | None = None,
    *,
    resume: bool = True,
) -> list[tuple[str, int, float]]:
    """Each (sub-layer name, head) of `heads` switched off alone: (sub-layer name, head, KL(before ‖ after)), in the
    order given. `batch` heads a forward pass (None: batch_rows): the text repeated once a head, row i switching off
    head i only (a model.attention.Patch true at that row and head: zeros, or with mode "mean" the intact pass's
    mean of that head, _head_means). `resume` (a decoder-only model, `resumes`): each row joins the batch at its
    head's layer from the intact pass's stream there, and the logits are projected at the scored positions only.
    Equal to one pass a head (rank_one_at_a_time) within float rounding; `resume=False` runs whole passes."""
    if mode not in ("zero", "mean"):
        raise ValueError(f"ablation mode must be 'zero' or 'mean', got {mode!r}")
    counts = dict(setup.sublayers)
    for name, head in heads:
        if name not in counts or not 0 <= head < counts[name]:
            raise ValueError(f"no head {head} in sub-layer {name!r}")
    if not heads:
        return []
    batch = batch or batch_rows(ckpt, setup)
    if resume and resumes(ckpt):
        kls = _resumed(ckpt, setup, heads, mode, batch)
    else:
        kls = _whole_passes(ckpt, setup, heads, mode, batch)
    return [(name, head, kl) for (name, head), kl in zip(heads, kls, strict=True)]


def _patches(
    chunk: Sequence[tuple[str, int]], counts: dict[str, int], means: dict[str, Tensor], device: torch.device
) -> dict[str, Patch]:
    """Row i of a batch switches off head i of `chunk` only: a Patch a sub-layer, true at (row, head)."""
    where = {name: torch.zeros(len(chunk), counts[name], dtype=torch.bool, device=device) for name, _ in chunk}
    for row, (name, head) in enumerate(chunk):
        where[name][row, head] = True
    zero = torch.zeros((), device=device)
    return {name: Patch(means.get(name, zero), w) for name, w in where.items()}


def _whole_passes(
    ckpt: Checkpoint, setup: RankingSetup, heads: Sequence[tuple[str, int]], mode: str, batch: int
) -> list[float]:
    """KL a head, every layer of every row run (any kind of model)."""
    device, counts = setup.before.device, dict(setup.sublayers)
    means = _head_means(forward(ckpt.model, setup.target, setup.source, record=True)[1]) if mode == "mean" else {}
    kls: list[float] = []
    for first in range(0, len(heads), batch):
        chunk = heads[first : first + batch]
        rows = len(chunk)
        source = None if setup.source is None else setup.source.expand(rows, -1)
        cut = _patches(chunk, counts, means, device)
        logits, _ = forward(ckpt.model, setup.target.expand(rows, -1), source, record=False, ablate=cut)
        after = logits[:, setup.rows].float()  # (rows, scored rows, vocab)
        kls += _kl(setup.before.expand(rows, -1, -1), after).mean(dim=-1).tolist()  # (rows,)
    return kls


def _resumed(
    ckpt: Checkpoint, setup: RankingSetup, heads: Sequence[tuple[str, int]], mode: str, batch: int
) -> list[float]:
    """KL a head of a decoder-only model: the heads sorted by layer, `batch` a batch; a row joins at its head's
    layer with the intact stream there (the layers before are the intact pass's), so a pass through layer l runs
    only the rows whose head lies at or before l; the logits at the scored positions only."""
    model, device, counts = ckpt.model, setup.before.device, dict(setup.sublayers)
    _, trace = forward(model, setup.target, None, record=mode == "mean", activations=True)
    means = _head_means(trace) if mode == "mean" else {}
    n_layers = ckpt.config.n_decoder_layers
    layer_of = {sublayer_name("decoder", i, "self_attn"): i for i in range(n_layers)}
    order = sorted(range(len(heads)), key=lambda i: layer_of[heads[i][0]])
    kls = [0.0] * len(heads)
    for first in range(0, len(order), batch):
        chunk = order[first : first + batch]
        x = torch.empty(0, *setup.target.shape[1:], ckpt.config.d_model, device=device)
        for layer in range(layer_of[heads[chunk[0]][0]], n_layers):
            joining = [heads[i] for i in chunk if layer_of[heads[i][0]] == layer]
            cut = {}
            if joining:  # the rows of this layer's heads come last, in chunk order
                stream = trace.activations[f"{layer_name('decoder', layer)}.resid_pre"]  # (1, T, d_model)
                x = torch.cat([x, stream.expand(len(joining), -1, -1)])
                name = joining[0][0]
                patch = _patches(joining, counts, means, device)[name]
                earlier = torch.zeros(len(x) - len(joining), counts[name], dtype=torch.bool, device=device)
                cut = {name: Patch(patch.values, torch.cat([earlier, patch.where]))}
            x = decoder_layers(model, setup.target.expand(len(x), -1), x, layer, layer + 1, ablate=cut)
        after = decoder_logits(model, x[:, setup.rows]).float()  # (rows, scored rows, vocab)
        kl = _kl(setup.before.expand(len(chunk), -1, -1), after).mean(dim=-1)  # (rows,)
        for i, value in zip(chunk, kl.tolist(), strict=True):
            kls[i] = value
    return kls


def rank_by_attribution(ckpt: Checkpoint, setup: RankingSetup, mode: str = "zero") -> list[tuple[str, int, float]]:
    """Every head switched off, approximated with one forward and one backward pass (attribution patching, Nanda
    2023): (sub-layer name, head, the drop in the mean log-probability of the intact model's top prediction at the
    scored rows, to first order), the largest drop first. The drop is (ablated − intact head output) · ∂ log p /
    ∂(head output): exact for small changes, a guide for a head switched off; the exact ranking (`rank_sublayer`)
    measures the KL divergence instead, which has no first-order term."""
    if mode not in ("zero", "mean"):
        raise ValueError(f"ablation mode must be 'zero' or 'mean', got {mode!r}")
    model = ckpt.model
    with torch.inference_mode():
        _, trace = forward(model, setup.target, setup.source, record=True)
        outputs = {name: (rec.weights @ rec.values).clone() for name, rec in trace.attention.items()}
    top = setup.before.argmax(dim=-1)  # (rows,) the intact top prediction at each scored row
    nudges = {name: torch.zeros(out.shape, requires_grad=True) for name, out in outputs.items()}
    every = {name: torch.ones(1, out.shape[1], dtype=torch.bool) for name, out in outputs.items()}
    ablate = {name: Patch(nudge, every[name], added=True) for name, nudge in nudges.items()}
    names = list(nudges)
    with torch.enable_grad():
        logits, _ = forward(model, setup.target, setup.source, record=False, ablate=ablate)
        log_p = torch.log_softmax(logits[0, setup.rows].float(), dim=-1)
        metric = log_p.gather(-1, top[:, None]).mean()
        grads = dict(zip(names, torch.autograd.grad(metric, [nudges[n] for n in names])))  # the model gathers none
    table = []
    for name in names:
        out = outputs[name].double()
        ablated = torch.zeros_like(out) if mode == "zero" else out.mean(dim=2, keepdim=True).expand_as(out)
        change = ((ablated - out) * grads[name].double()).sum(dim=(0, 2, 3))  # (H,): Δ mean log p, first order
        table += [(name, head, float(-change[head])) for head in range(out.shape[1])]
    return most_important_first(table)


def head_importance(ckpt: Checkpoint, text: str, mode: str = "zero") -> list[tuple[str, int, float]]:
    """Each head switched off alone: (sub-layer name, head, KL(before ‖ after)), the most important first. The KL is
    at the last position (LM), averaged over the greedy output's steps (encoder-decoder) or over the input's
    positions (encoder-only). The app runs the same steps a sub-layer at a time (ui.head_ranking), with progress."""
    setup = ranking_setup(ckpt, text)
    every = [(name, head) for name, n_heads in setup.sublayers for head in range(n_heads)]
    return most_important_first(rank_heads(ckpt, setup, every, mode))


def most_important_first(table: list[tuple[str, int, float]]) -> list[tuple[str, int, float]]:
    return sorted(table, key=lambda row: -row[2])
