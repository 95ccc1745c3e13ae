"""Which input tokens one prediction rests on: five per-token attributions of one output token's logit.

A decoder's prediction after position p is the logit f = u_t · stream_p of a token t (the model's top guess, or
one asked for). Each method gives every input token one number, the tokens of the decoder's input (its text, or a
translator's output so far) and, for a translator, of its source:

- **integrated gradients** (Sundararajan et al. 2017): the token embeddings e (before the positions are added)
  scaled from a baseline of zeros to themselves, α from 0 to 1, the gradient of f averaged along the way (the
  midpoints of `steps` equal parts) and multiplied by e − 0, summed over the embedding's dimensions. The numbers add
  up to f(e) − f(0), the logit with every token's embedding against it with none (the positions kept): `gap` says how
  far the sum is from it (a smaller gap with more steps).
- **gradient × input** (Shrikumar et al. 2016): e · ∂f/∂e at the embeddings themselves, summed over dimensions.
- **saliency** (Simonyan et al. 2014): the length ‖∂f/∂e‖ of that gradient: how much f moves for a small change of
  the token's embedding, whichever way; never negative.
- **rollout** (Abnar & Zuidema 2020, analysis.rollout): position p's row of the attention rollout, head-averaged
  attention with the residual's 0.5·I, multiplied through the layers; for a translator the source tokens' share by
  `cross_rollout` and the decoder's input tokens' by the decoder's own rollout, each row summing to 1.
- **attention flow** (the same paper): the attention graph of the same matrices as a flow network — a node per
  position and layer, an edge from each position to each it attends to with that weight as its capacity — and a
  token's number the maximum flow from position p at the top to that token at the bottom. Exact max-flow
  (networkx's preflow-push) per token: texts up to FLOW_TOKENS tokens a stack; longer ones get no flow column and a
  note saying so.

The gradients come from batched passes of at most ALPHA_TOKENS tokens, the embeddings replaced through the
forward pass's own `Patch` at `encoder.embed` / `decoder.embed` (nothing is set on the model, so one cached model
serves every session); eval mode, deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import torch
from torch import Tensor

from analysis.attribution import decoder_inputs
from analysis.record import Analysis
from analysis.rollout import RESIDUAL, cross_rollout, head_mean, rollout, with_residual
from inference.checkpoint import Checkpoint
from model.attention import Patch
from model.forward import forward

METHODS = ("integrated gradients", "gradient × input", "saliency", "rollout", "attention flow")
STEPS = 32  # integrated gradients' equal parts of the path from the baseline
MAX_STEPS = 512
ALPHA_TOKENS = 2048  # tokens (rows × a row's source and decoder tokens) of one batched pass of the gradient methods
STACKS = ("encoder", "decoder")  # a translator's source tokens first, then the decoder's input
FLOW_TOKENS = 64  # attention flow's exact max-flow is computed for stacks up to this many tokens


@dataclass(frozen=True)
class TokenAttribution:
    """Each input token's number under each method, toward one logit.

    stacks: per token, "encoder" (a translator's source) or "decoder" (the decoder's input up to `position`, the
    tokens the prediction can read); pieces: the tokens;
    scores: method → (n_tokens,) float array (no "attention flow" when a stack is longer than FLOW_TOKENS);
    position: the decoder position (0-based) whose next-token logit is attributed; token: that token's id;
    logit: f at the embeddings; baseline: f with every token embedding zero (the positions kept);
    gap: |Σ integrated gradients − (logit − baseline)|; notes: what was left out and why."""

    stacks: tuple[str, ...]
    pieces: tuple[str, ...]
    scores: dict[str, np.ndarray]
    position: int
    token: int
    logit: float
    baseline: float
    gap: float
    notes: tuple[str, ...] = ()


def _embedded(ckpt: Checkpoint, source: Tensor | None, target: Tensor) -> dict[str, Tensor]:
    """The token embeddings (n, d_model) of each stack the pass reads, by the patch's key."""
    embed = ckpt.model.embed
    found = {"decoder.embed": embed(target.to(_device(ckpt)))[0]}
    if source is not None:
        found["encoder.embed"] = embed(source.to(_device(ckpt)))[0]
    return found


def _device(ckpt: Checkpoint) -> torch.device:
    return next(ckpt.model.parameters()).device


def gradients(
    ckpt: Checkpoint, source: Tensor | None, target: Tensor, position: int, token: int, alphas: Tensor
) -> tuple[dict[str, Tensor], Tensor, dict[str, Tensor]]:
    """∂f/∂(α·e) for each α of `alphas` (A,): per stack key (A, n, d_model); f at each α (A,); and the embeddings e
    (n, d_model) per stack key. f is the logit of `token` after decoder position `position` with every token
    embedding scaled by α (the positions kept)."""
    with torch.inference_mode(False), torch.enable_grad():
        embedded = {k: e.detach() for k, e in _embedded(ckpt, source, target).items()}
        grads: dict[str, list[Tensor]] = {k: [] for k in embedded}
        logits: list[Tensor] = []
        per_row = target.shape[1] + (0 if source is None else source.shape[1])
        for chunk in alphas.split(max(1, ALPHA_TOKENS // per_row)):
            rows = len(chunk)
            scaled = {
                k: (chunk.to(e)[:, None, None] * e[None]).requires_grad_(True) for k, e in embedded.items()
            }  # (A, n, d_model)
            patches = {
                k: Patch(v, torch.ones(v.shape[:2], dtype=torch.bool, device=v.device)) for k, v in scaled.items()
            }
            src = None if source is None else source.expand(rows, -1)
            out, _ = forward(ckpt.model, target.expand(rows, -1), src, record=False, ablate=patches)
            f = out[:, position, token].float()  # (rows,)
            found = torch.autograd.grad(f.sum(), list(scaled.values()))
            for k, g in zip(scaled, found, strict=True):
                grads[k].append(g.detach())
            logits.append(f.detach())
    return {k: torch.cat(g) for k, g in grads.items()}, torch.cat(logits), embedded


def _flow(graph: nx.DiGraph, top: tuple, bottoms: list[tuple]) -> np.ndarray:
    """The maximum flow from `top` to each of `bottoms` in `graph` (capacities on its edges)."""
    out = np.zeros(len(bottoms))
    for i, bottom in enumerate(bottoms):
        if bottom in graph and top in graph and nx.has_path(graph, top, bottom):
            out[i] = nx.maximum_flow_value(graph, top, bottom)
    return out


def _self_graph(graph: nx.DiGraph, stack: str, layers: np.ndarray, top_layer: int) -> None:
    """Edges of a stack's layers 1..top_layer: (stack, l, i) → (stack, l − 1, j) with capacity Ā_l[i, j]."""
    for layer in range(top_layer):
        a = layers[layer]
        for i, j in zip(*np.nonzero(a > 0), strict=True):
            graph.add_edge((stack, layer + 1, int(i)), (stack, layer, int(j)), capacity=float(a[i, j]))


def attention_flow(analysis: Analysis, position: int) -> tuple[dict[str, np.ndarray], tuple[str, ...]]:
    """Each input token's maximum flow from decoder position `position` at the top of the attention graph (the
    module's docstring), per stack; notes for a stack too long to compute."""
    decoder = with_residual(head_mean(analysis.stacked("decoder.self_attn")), RESIDUAL)
    too_long = [
        name
        for name, n in (("decoder", decoder.shape[-1]), ("encoder", len(analysis.source_pieces or ())))
        if n > FLOW_TOKENS
    ]
    if too_long:
        return {}, (
            f"Attention flow is computed exactly for texts of up to {FLOW_TOKENS} tokens; this one's "
            f"{' and '.join(too_long)} is longer, so it has no flow column.",
        )
    graph = nx.DiGraph()
    n_layers, n_target = decoder.shape[0], decoder.shape[-1]
    top = ("decoder", n_layers, position)
    if "decoder.cross_attn" not in analysis.attentions:
        _self_graph(graph, "decoder", decoder, n_layers)
        return {"decoder": _flow(graph, top, [("decoder", 0, j) for j in range(n_target)])}, ()
    # a translator's decoder layer l: r of each position's state from the self-attention's mixture, 1 − r from the
    # cross-attention's read of the encoder's output, which the encoder's layers carry down to the source tokens
    encoder = with_residual(head_mean(analysis.stacked("encoder.self_attn")), RESIDUAL)
    cross = head_mean(analysis.stacked("decoder.cross_attn"))
    _self_graph(graph, "encoder", encoder, encoder.shape[0])
    for layer in range(n_layers):
        for i, j in zip(*np.nonzero(decoder[layer] > 0), strict=True):
            graph.add_edge(
                ("decoder", layer + 1, int(i)),
                ("decoder", layer, int(j)),
                capacity=RESIDUAL * float(decoder[layer, i, j]),
            )
        for i, k in zip(*np.nonzero(cross[layer] > 0), strict=True):
            graph.add_edge(
                ("decoder", layer + 1, int(i)),
                ("encoder", encoder.shape[0], int(k)),
                capacity=(1 - RESIDUAL) * float(cross[layer, i, k]),
            )
    n_source = encoder.shape[-1]
    return {
        "encoder": _flow(graph, top, [("encoder", 0, j) for j in range(n_source)]),
        "decoder": _flow(graph, top, [("decoder", 0, j) for j in range(n_target)]),
    }, ()


def _rollout_rows(analysis: Analysis, position: int) -> dict[str, np.ndarray]:
    """Position `position`'s row of the rollout, per stack (the module's docstring)."""
    decoder = head_mean(analysis.stacked("decoder.self_attn"))
    found = {"decoder": rollout(decoder)[-1][position]}
    if "decoder.cross_attn" in analysis.attentions:
        encoder = rollout(head_mean(analysis.stacked("encoder.self_attn")))[-1]
        cross = head_mean(analysis.stacked("decoder.cross_attn"))
        found["encoder"] = cross_rollout(decoder, cross, encoder)[-1][position]
    return found


def token_attribution(
    ckpt: Checkpoint, analysis: Analysis, position: int, token: int | None = None, steps: int = STEPS
) -> TokenAttribution:
    """Every input token's number under each of METHODS toward the logit of `token` (default: the model's top guess)
    after decoder position `position` (0-based) of `analysis`, the pass `ckpt` made over its text."""
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"steps is a whole number from 1 to {MAX_STEPS}, not {steps!r}")
    source, target = decoder_inputs(ckpt, analysis.text, analysis.target_ids)
    if not 0 <= position < target.shape[1]:
        raise ValueError(f"position {position + 1} is outside 1..{target.shape[1]}")
    # the decoder's tokens after the position cannot reach its prediction (the causal mask): they are left out of
    # the passes and of the answer
    target = target[:, : position + 1]
    n_target = position + 1
    model = ckpt.model
    if model.training:
        raise ValueError("the model is in training mode; attributions are read in eval mode (model.eval())")
    alphas = torch.cat([(torch.arange(steps, dtype=torch.float64) + 0.5) / steps, torch.tensor([0.0, 1.0])])
    if token is None:
        with torch.inference_mode():
            logits, _ = forward(model, target, source, record=False)
        token = int(logits[0, position].argmax())
    grads, f, embedded = gradients(ckpt, source, target, position, token, alphas.float())
    stacks = ("encoder",) * (0 if source is None else source.shape[1]) + ("decoder",) * n_target
    pieces = (tuple(analysis.source_pieces or ()) if source is not None else ()) + tuple(analysis.target_pieces)[
        :n_target
    ]
    if len(pieces) != len(stacks):
        raise ValueError(f"the analysis reads {len(pieces)} tokens where its pass has {len(stacks)}: analyse again")
    order = [k for k in ("encoder.embed", "decoder.embed") if k in grads]
    per: dict[str, list[np.ndarray]] = {m: [] for m in METHODS[:3]}
    for key in order:
        g, e = grads[key].double(), embedded[key].double()  # (A, n, d), (n, d)
        per["integrated gradients"].append((g[:steps].mean(0) * e).sum(-1).cpu().numpy())
        per["gradient × input"].append((g[-1] * e).sum(-1).cpu().numpy())
        per["saliency"].append(g[-1].norm(dim=-1).cpu().numpy())
    scores = {m: np.concatenate(v) for m, v in per.items()}
    rolled = _rollout_rows(analysis, position)
    scores["rollout"] = np.concatenate(
        [rolled[s][: n_target if s == "decoder" else None] for s in STACKS if s in rolled]
    )
    flow, notes = attention_flow(analysis, position)
    if flow:
        scores["attention flow"] = np.concatenate(
            [flow[s][: n_target if s == "decoder" else None] for s in STACKS if s in flow]
        )
    logit, baseline = float(f[-1]), float(f[-2])
    gap = abs(float(scores["integrated gradients"].sum()) - (logit - baseline))
    return TokenAttribution(stacks, pieces, scores, position, token, logit, baseline, gap, notes)
