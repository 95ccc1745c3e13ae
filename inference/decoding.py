"""Decoding: next-token distributions, greedy decoding and beam search, with or without the key/value cache.

With `cache=True` each step feeds only the newest token and passes the previous step's trace back as `past`
(its records hold every key and value so far); with `cache=False` every step recomputes the whole sequence.
Both give the same tokens (tests/test_inference.py): the cache only saves work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from inference.prediction import Prediction
from model.attention import AttentionRecord
from model.forward import forward
from model.trace import Trace
from model.transformer import NONE, Ablations, DecoderOnlyLM, EncoderDecoder

Model = EncoderDecoder | DecoderOnlyLM


@dataclass(frozen=True)
class Sampling:
    """Sampling instead of the most probable token: softmax(logits / temperature) over the `top_k` most probable
    tokens (0: all), drawn with a generator seeded by `seed` — the same seed gives the same text."""

    temperature: float = 1.0
    top_k: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.01 <= self.temperature <= 10:
            raise ValueError(f"temperature must be between 0.01 and 10, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be 0 (all tokens) or more, got {self.top_k}")

    def choose(self, log_probs: Tensor, generator: torch.Generator) -> int:
        """One token id drawn from (vocab,) log-probabilities."""
        scaled = log_probs.float() / self.temperature
        if 0 < self.top_k < scaled.shape[-1]:
            kth = scaled.topk(self.top_k).values[-1]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        return int(torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=generator))


@dataclass(frozen=True)
class Generation:
    """A decoded output: the new ids (without bos/eos)."""

    ids: list[int]
    finished: bool  # True when the model emitted eos before max_tokens


TIE_ROOM = 16  # candidates beyond k that torch.topk gathers, so ties at the k-th place are ordered by id


def _top_stable(probs: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """(T, V) → the k largest of each row, largest first, equal values in order of id: what a stable descending
    sort of the whole row gives, without sorting the whole vocabulary (49,152 entries in SmolLM2's). topk takes
    k + TIE_ROOM candidates, which are sorted by id then stably by value; a row whose ties run past the candidates
    is sorted whole."""
    room = min(probs.shape[-1], k + TIE_ROOM)
    cand_values, cand_ids = torch.topk(probs, room, dim=-1)
    by_id = torch.argsort(cand_ids, dim=-1)
    cand_values, cand_ids = cand_values.gather(-1, by_id), cand_ids.gather(-1, by_id)
    order = torch.sort(cand_values, dim=-1, descending=True, stable=True).indices[..., :k]
    values, ids = cand_values.gather(-1, order), cand_ids.gather(-1, order)
    if room < probs.shape[-1]:
        # ties run past the candidates where the smallest candidate equals the k-th value
        spill = (cand_values.min(dim=-1).values == values[..., -1]).nonzero().flatten().tolist()
        for row in spill:
            whole_values, whole_ids = torch.sort(probs[row], descending=True, stable=True)
            values[row], ids[row] = whole_values[:k], whole_ids[:k]
    return values, ids


def top_k(
    logits: Tensor, k: int, pieces: Callable[[list[int]], list[str]], never: frozenset[int] = frozenset()
) -> list[list[Prediction]]:
    """(T, vocab) logits → for each position, the k most probable next tokens, most probable first, each named by
    `pieces` (the tokenizer's ids → pieces); tokens of exactly equal probability in order of id. `never`: ids
    left out of the lists (the tokenizer's never_written); the probabilities stay the model's, over its whole
    vocabulary. A padded batch and a single run can differ in the last bits, so two nearly equal tokens may trade
    places between them: comparisons of the two allow for that (tests)."""
    probs = torch.softmax(logits.float(), dim=-1)
    shown = probs
    if never:
        shown = probs.clone()
        shown[..., sorted(never)] = -1.0  # below every probability: never among the k
    k = min(k, probs.shape[-1] - len(never))
    values, indices = _top_stable(shown, k)
    ids, probs = indices.tolist(), values.tolist()
    names = iter(pieces([i for row in ids for i in row]))
    return [[Prediction(next(names), i, p) for i, p in zip(row_i, row_p)] for row_i, row_p in zip(ids, probs)]


def next_log_probs(
    model: Model,
    source_ids: Tensor | None,
    fed: Tensor,
    past: Trace | None,
    cache: bool,
    ablate: Ablations = NONE,
) -> tuple[Tensor, Trace | None]:
    """Log-probabilities (B, vocab) of the token after `fed` (B, T), and the trace to pass as the next `past`.

    With the cache and a `past`, only the last column of `fed` is new; without it, all of `fed` is computed.
    `ablate`: heads switched off (model.attention.Ablation), by sub-layer name.
    """
    new = fed[:, -1:] if cache and past is not None else fed
    previous = past if cache else None
    source = None if source_ids is None else source_ids.expand(fed.shape[0], -1)  # one source row per hypothesis
    logits, trace = forward(model, new, source, previous, record=False, ablate=ablate)
    return torch.log_softmax(logits[:, -1].float(), dim=-1), (trace if cache else None)


@torch.inference_mode()
def generate(
    model: Model,
    prefix: list[int],
    source_ids: Tensor | None = None,
    max_tokens: int = 50,
    beam: int = 1,
    cache: bool = True,
    sampling: Sampling | None = None,
    ablate: Ablations = NONE,
) -> Generation:
    """Greedy (beam=1), beam-search or sampled decoding after `prefix` (which starts with bos).

    Beam search keeps the `beam` best hypotheses by summed log-probability; finished ones compete by their
    log-probability per token. `sampling` draws each token instead (beam must be 1). `ablate`: heads switched
    off in every step (greedy only; a mean-ablation needs every position, so it decodes without the cache).
    """
    if beam < 1:
        raise ValueError(f"beam must be at least 1, got {beam}")
    if sampling is not None:
        if beam != 1:
            raise ValueError("sampling draws one sequence: beam must be 1")
        return _sample(model, prefix, source_ids, max_tokens, cache, sampling)
    if ablate:
        if beam != 1:
            raise ValueError("ablated decoding is greedy: beam must be 1")
        cache = cache and all(a.mode == "zero" for a in ablate.values())
    eos = model.config.eos_id
    max_tokens = max(0, min(max_tokens, model.config.max_len - len(prefix)))
    fed = torch.tensor([prefix])  # (hypotheses, T): every token fed so far
    log_probs, past = next_log_probs(model, source_ids, fed, None, cache, ablate)
    hyps: list[tuple[list[int], float]] = [([], 0.0)]
    done: list[tuple[list[int], float]] = []
    for _ in range(max_tokens):
        keep = _beam_step(hyps, _top_rows(log_probs, beam), 0, beam, eos, done)
        if not keep:
            break
        hyps = [(s, sc) for s, sc, _ in keep]
        order = torch.tensor([b for _, _, b in keep])
        fed = torch.cat([fed.index_select(0, order), torch.tensor([[s[-1]] for s, _ in hyps])], dim=1)
        if past is not None and order.tolist() != list(range(log_probs.shape[0])):  # greedy never reorders
            past = past.select(order, same_sources=True)  # one text: every row has its source
        log_probs, past = next_log_probs(model, source_ids, fed, past, cache, ablate)
    return _beam_result(hyps, done)


Hypothesis = tuple[list[int], float]  # the tokens written so far, their summed log-probability
TopRows = list[list[tuple[float, int]]]  # per batch row, its `beam` best (log-probability, token id), best first


def _top_rows(log_probs: Tensor, beam: int) -> TopRows:
    """(B, vocab) → each row's `beam` best continuations, in one topk and one copy to Python for the whole batch
    (a topk per hypothesis cost more than the step's arithmetic)."""
    values, indices = log_probs.topk(beam, dim=-1)
    return [list(zip(v, i)) for v, i in zip(values.tolist(), indices.tolist())]


def _beam_step(
    hyps: list[Hypothesis], top: TopRows, first_row: int, beam: int, eos: int, done: list[Hypothesis]
) -> list[tuple[list[int], float, int]]:
    """One step of one text's beam search: its hypotheses' rows of `top` (_top_rows) begin at `first_row`; the
    `beam` best continuations that do not end (with the batch row each continues), those that end added to `done`;
    empty when the search is over (`beam` finished, or none left)."""
    candidates = []
    for b, (seq, score) in enumerate(hyps):
        candidates += [(seq + [i], score + v, first_row + b) for v, i in top[first_row + b]]
    candidates.sort(key=lambda c: -c[1])
    keep = []
    for seq, score, row in candidates:
        if seq[-1] == eos:
            done.append((seq[:-1], score))
        else:
            keep.append((seq, score, row))
        if len(keep) == beam:
            break
    return [] if len(done) >= beam else keep


def _beam_result(hyps: list[Hypothesis], done: list[Hypothesis]) -> Generation:
    """Finished hypotheses win; among them, the best log-probability per token; else the best live one."""
    if done:
        return Generation(max(done, key=lambda d: d[1] / (len(d[0]) + 1))[0], True)
    return Generation(hyps[0][0], False)


def _sample(
    model: Model, prefix: list[int], source_ids: Tensor | None, max_tokens: int, cache: bool, sampling: Sampling
) -> Generation:
    eos = model.config.eos_id
    max_tokens = max(0, min(max_tokens, model.config.max_len - len(prefix)))
    generator = torch.Generator().manual_seed(sampling.seed)
    fed = torch.tensor([prefix])
    out: list[int] = []
    past = None
    for _ in range(max_tokens):
        log_probs, past = next_log_probs(model, source_ids, fed, past, cache)
        token = sampling.choose(log_probs[0], generator)
        if token == eos:
            return Generation(out, True)
        out.append(token)
        fed = torch.cat([fed, torch.tensor([[token]])], dim=1)
    return Generation(out, False)


def pad_rows(rows: list[list[int]], pad_id: int) -> Tensor:
    """Id lists → one (B, T_max) tensor, padded at the end (the padding masks keep it out of attention)."""
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad_id] * (width - len(r)) for r in rows])


@torch.inference_mode()
def greedy_many(
    model: EncoderDecoder,
    sources: list[list[int]],
    max_tokens: int,
    start: tuple[Tensor, Trace] | None = None,
    skip: Sequence[int] = (),
) -> list[Generation]:
    """Greedy decoding of several sources in one batch, with the cache; each row stops at its own eos.

    Row i's tokens equal `generate(model, [bos], sources[i], max_tokens)` (tests/test_worker.py): padding is
    masked, and a finished row is fed padding, which no later query may attend to. `start`: the (logits, trace)
    of a pass that already fed bos to the padded sources (analysis.analyze's traced one: the encoder runs once);
    rows in `skip` are not decoded (empty, unfinished).
    """
    cfg = model.config
    max_tokens = max(0, min(max_tokens, cfg.max_len - 1))
    source = pad_rows(sources, cfg.pad_id)
    if start is None:
        logits, past = forward(model, torch.full((len(sources), 1), cfg.bos_id), source, record=False)
    else:
        logits, past = start
    out: list[list[int]] = [[] for _ in sources]
    finished = [i in skip for i in range(len(sources))]
    for _ in range(max_tokens):
        choice = logits[:, -1].float().argmax(dim=-1).tolist()
        for i, token in enumerate(choice):
            if not finished[i]:
                if token == cfg.eos_id:
                    finished[i] = True
                else:
                    out[i].append(token)
        if all(f or len(o) == max_tokens for f, o in zip(finished, out)):
            break
        step = torch.tensor([[cfg.pad_id if f else o[-1]] for f, o in zip(finished, out)])
        logits, past = forward(model, step, source, past, record=False)
    return [Generation(ids, done and i not in skip) for i, (ids, done) in enumerate(zip(out, finished))]


def decoding_cache(trace: Trace, rows: Tensor) -> Trace:
    """Batch rows `rows` of a decoder pass's trace as the cache a decoding carries from step to step: the decoder
    sub-layers' masks, keys and values only (a traced pass also holds the encoder's records and every head's scores and
    weights, which no later step reads and beam search would otherwise copy at every step)."""
    attention = {
        name: AttentionRecord(rec.mask, rec.keys, rec.values)
        for name, rec in trace.attention.items()
        if name.startswith("decoder.")
    }
    return replace(trace, attention=attention, activations={}).select(rows)


@torch.inference_mode()
def beam_many(
    model: EncoderDecoder,
    sources: list[list[int]],
    max_tokens: Sequence[int],
    beam: int,
    start: tuple[Tensor, Trace] | None = None,
) -> list[Generation]:
    """Beam search for several sources in one batch, with the cache: row i's tokens equal `generate(model, [bos],
    sources[i], max_tokens[i], beam)` (tests/test_decoding_default.py). Every text's live hypotheses are rows of
    one batch (padded sources, masked), chosen text by text as `generate` chooses them; a text leaves the batch
    when it is done. A class's texts decode together in about the time of one (greedy_many does the same for beam
    1). `start`: the (logits, cache) of a pass that already fed bos to these sources, one row each
    (`decoding_cache` of analysis.analyze's traced pass: the encoder runs once); its padded sources are used."""
    if beam < 1:
        raise ValueError(f"beam must be at least 1, got {beam}")
    cfg = model.config
    eos = cfg.eos_id
    limits = [max(0, min(m, cfg.max_len - 1)) for m in max_tokens]
    hyps: list[list[Hypothesis]] = [[([], 0.0)] for _ in sources]  # each text's live hypotheses
    done: list[list[Hypothesis]] = [[] for _ in sources]
    owner = list(range(len(sources)))  # the text of each batch row; a text's rows are consecutive, in hyps' order
    if start is None:
        padded = pad_rows(sources, cfg.pad_id)
        logits, past = forward(model, torch.full((len(sources), 1), cfg.bos_id), padded, record=False)
    else:
        logits, past = start
        padded = past.source_ids
    log_probs = torch.log_softmax(logits[:, -1].float(), dim=-1)
    step = 0
    sources_now = None  # the padded source of each batch row, as the last step fed them
    while owner:
        first_row = {}
        for row, text in enumerate(owner):
            first_row.setdefault(text, row)
        order, new_owner, last = [], [], []
        top = _top_rows(log_probs, beam)
        for text in dict.fromkeys(owner):
            if step >= limits[text]:
                continue  # its live hypotheses stand, as generate's after its last step
            keep = _beam_step(hyps[text], top, first_row[text], beam, eos, done[text])
            if not keep:
                continue
            hyps[text] = [(seq, score) for seq, score, _ in keep]
            order += [row for _, _, row in keep]
            new_owner += [text] * len(keep)
            last += [seq[-1] for seq, _, _ in keep]
        step += 1
        same_sources = new_owner == owner  # each text's rows where they were: their sources' rows stay
        owner = new_owner
        if not owner:
            break
        rows = torch.tensor(order)
        if order != list(range(past.target_ids.shape[0])):  # rows that kept their places keep their cache
            past = past.select(rows, same_sources=same_sources)
        if not same_sources or sources_now is None:
            sources_now = padded.index_select(0, torch.tensor(owner))
        new = torch.tensor(last)[:, None]  # each row's newest token: the cache holds the others' keys and values
        logits, past = forward(model, new, sources_now, past, record=False)
        log_probs = torch.log_softmax(logits[:, -1].float(), dim=-1)
    return [_beam_result(h, d) for h, d in zip(hyps, done)]
