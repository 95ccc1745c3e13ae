"""Inference: next-token distributions, greedy decoding and beam search with an incremental key/value cache."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from model.trace import Trace
from model.transformer import DecoderCache, DecoderOnlyLM, EncoderDecoder, LayerCache


@dataclass(frozen=True)
class TopToken:
    id: int
    prob: float


@dataclass(frozen=True)
class Generation:
    """A decoded output: the new ids (without bos/eos) and one trace per generated step."""

    ids: list[int]
    step_traces: list[Trace]
    finished: bool  # True when the model emitted eos before max_tokens


def top_k(logits: Tensor, k: int) -> list[list[TopToken]]:
    """(T, vocab) logits → for each position, the k most probable next tokens, most probable first."""
    probs = torch.softmax(logits.float(), dim=-1)
    values, indices = probs.topk(min(k, probs.shape[-1]), dim=-1)
    return [[TopToken(int(i), float(p)) for i, p in zip(row_i, row_p)] for row_i, row_p in zip(indices, values)]


def _start(model: EncoderDecoder | DecoderOnlyLM, source_ids: Tensor | None) -> DecoderCache | None:
    if isinstance(model, EncoderDecoder):
        if source_ids is None:
            raise ValueError("an encoder-decoder needs source ids to decode")
        return model.start_cache(source_ids)[0]
    return None


def _step(model: EncoderDecoder | DecoderOnlyLM, ids: Tensor, cache: DecoderCache | None, record: bool):
    return model.step(ids, cache, record=record)


@torch.no_grad()
def generate(
    model: EncoderDecoder | DecoderOnlyLM,
    prefix: list[int],
    source_ids: Tensor | None = None,
    max_tokens: int = 50,
    beam: int = 1,
    record: bool = True,
) -> Generation:
    """Greedy (beam=1) or beam-search decoding after `prefix` (which starts with bos).

    The traces are those of the steps that produced the chosen output: step i's queries are the token fed
    at that step, its keys every token so far.
    """
    cfg = model.config
    room = cfg.max_len - len(prefix)
    max_tokens = max(0, min(max_tokens, room))
    if beam < 1:
        raise ValueError(f"beam must be at least 1, got {beam}")
    ids, finished = _beam_search(model, prefix, source_ids, max_tokens, beam)
    traces = _traces_for(model, prefix, ids, source_ids) if record else []
    return Generation(ids, traces, finished)


def _traces_for(model, prefix: list[int], ids: list[int], source_ids: Tensor | None) -> list[Trace]:
    """Traces of the decoder at each step that chose a token of `ids`: the prefix first, then one per token."""
    cache = _start(model, source_ids)
    traces = []
    fed = prefix
    for token in [None, *ids[:-1]] if ids else []:
        step_ids = torch.tensor([fed]) if token is None else torch.tensor([[token]])
        _, trace, cache = _step(model, step_ids, cache, True)
        traces.append(trace)
    return traces


def _beam_search(model, prefix: list[int], source_ids: Tensor | None, max_tokens: int, beam: int):
    """Keep the `beam` best hypotheses by summed log-probability; finished ones compete with length norm."""
    cfg = model.config
    cache = _start(model, source_ids)
    logits, _, cache = _step(model, torch.tensor([prefix]), cache, False)
    log_probs = torch.log_softmax(logits[:, -1].float(), dim=-1)  # (1, vocab)
    hyps: list[tuple[list[int], float]] = [([], 0.0)]
    done: list[tuple[list[int], float]] = []
    for _ in range(max_tokens):
        candidates = []
        for b, (seq, score) in enumerate(hyps):
            values, indices = log_probs[b].topk(beam)
            candidates += [(seq + [int(i)], score + float(v), b) for v, i in zip(values, indices)]
        candidates.sort(key=lambda c: -c[1])
        keep = []
        for seq, score, b in candidates:
            if seq[-1] == cfg.eos_id:
                done.append((seq[:-1], score))
            else:
                keep.append((seq, score, b))
            if len(keep) == beam:
                break
        hyps = [(s, sc) for s, sc, _ in keep]
        if len(done) >= beam or not keep:
            break
        order = [b for _, _, b in keep]
        if order != list(range(log_probs.shape[0])):  # greedy search never reorders: no copy of the cache
            cache = _reorder(cache, torch.tensor(order))
        logits, _, cache = _step(model, torch.tensor([[s[-1]] for s, _ in hyps]), cache, False)
        log_probs = torch.log_softmax(logits[:, -1].float(), dim=-1)
    if done:  # finished hypotheses win; among them, the best log-probability per token
        return max(done, key=lambda d: d[1] / (len(d[0]) + 1))[0], True
    return hyps[0][0], False


def _reorder(cache: DecoderCache, order: Tensor) -> DecoderCache:
    """Select batch rows `order` of every cached tensor (beam search keeps the surviving hypotheses)."""

    def pick(kv):
        return None if kv is None else (kv[0].index_select(0, order), kv[1].index_select(0, order))

    layers = tuple(LayerCache(pick(layer.self_kv), pick(layer.cross_kv)) for layer in cache.layers)
    memory = None if cache.memory is None else cache.memory.index_select(0, order)
    source_valid = None if cache.source_valid is None else cache.source_valid.index_select(0, order)
    return DecoderCache(layers, cache.target_valid.index_select(0, order), memory, source_valid)
