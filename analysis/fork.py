"""Fork the decoding: what if the model had written another word? At one step take the second (or third…) candidate
instead of the likeliest and continue greedily both ways, to compare the two continuations' words, logits and heads.

The prompt is fed once; greedy steps before the fork are fed once more each, with the key/value cache; both branches
then continue from that one cache of the shared prefix (a trace passed as `past` is never changed: each branch's
next pass makes new tensors). Each branch is decoded alone (a batch of 1), as `generate` decodes, so a fork at
choice 1 is greedy decoding itself: the same tokens and logits (tests/test_fork.py). Deterministic: eval mode, no
sampling, ties in order of id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from inference.checkpoint import Checkpoint
from inference.decoding import top_k
from inference.prediction import Prediction
from inference.text import clean_text, encode_source
from model.forward import forward
from model.trace import Trace

TOP_K = 5  # candidates kept per step


@dataclass(frozen=True)
class Branch:
    """One continuation from the fork step on (step 0 here is the fork's).

    ids: the tokens written, without eos; finished: it wrote eos. probs: (steps,) the probability of each step's
    token (the last of a finished branch: eos's). logits: (steps, vocab) float32 the logits each
    step chose from (a finished branch's last step chose eos). top: each step's TOP_K most probable tokens.
    attention: per step, sub-layer name → (H, Tk) the weights of the query that wrote that step's token (the last token
    fed), every head; cross-attention's keys are the source."""

    ids: tuple[int, ...]
    finished: bool
    probs: np.ndarray
    logits: np.ndarray
    top: tuple[tuple[Prediction, ...], ...]
    attention: tuple[dict[str, np.ndarray], ...]


@dataclass(frozen=True)
class Fork:
    """The two continuations: `greedy` takes the likeliest token at the fork step, `forked` the `choice`-th (from 1);
    both go on greedily. prompt: the decoder's ids fed first (bos first); shared: the greedy tokens written before
    the fork step (`step` of them: the fork is at written token step + 1, 0-based `step`)."""

    prompt: tuple[int, ...]
    shared: tuple[int, ...]
    step: int
    choice: int
    greedy: Branch
    forked: Branch


def source_of(ckpt: Checkpoint, text: str) -> Tensor | None:
    """A translator's source ids (1, S) for `text`, as its analysis reads it; None for a language model."""
    if not ckpt.config.has_cross_attention:
        return None
    return torch.tensor([encode_source(ckpt, clean_text(text).text, [])])


def _last_row(logits: Tensor, trace: Trace) -> tuple[Tensor, dict[str, np.ndarray]]:
    """The logits after the last fed token (vocab,) and every decoder sub-layer's weights of that query, (H, Tk)
    each."""
    decoder = {name: rec for name, rec in trace.attention.items() if name.startswith("decoder.")}
    rows = {name: rec.weights[0, :, -1].float().numpy() for name, rec in decoder.items()}
    return logits[0, -1].float(), rows


def _candidate(logits: Tensor, choice: int, never: frozenset[int]) -> int:
    """The `choice`-th likeliest token (from 1). The first is greedy's (torch's top-1, as `generate` takes it); the
    others follow in order of probability, ties in order of id, never a token the model is never asked to write."""
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    first = int(log_probs.topk(1).indices[0])
    if choice == 1:
        return first
    order = torch.sort(log_probs, descending=True, stable=True).indices.tolist()
    others = [t for t in order[: choice + len(never) + 1] if t != first and t not in never]
    return others[choice - 2]


def _continue(
    model: nn.Module,
    source: Tensor | None,
    past: Trace,
    start: tuple[Tensor, dict[str, np.ndarray]],
    first: int,
    steps: int,
    pieces: Callable[[list[int]], list[str]],
    never: frozenset[int],
) -> Branch:
    """Write `first`, then greedily up to `steps` tokens in all, from the cache `past` whose last row is `start`."""
    eos = model.config.eos_id
    logits, rows = start
    ids: list[int] = []
    all_logits, attention = [], []
    token = first
    finished = False
    for _ in range(steps):
        all_logits.append(logits)
        attention.append(rows)
        if token == eos:
            finished = True
            break
        ids.append(token)
        if len(ids) == steps:
            break
        out, past = forward(model, torch.tensor([[token]]), source, past, record=True)
        logits, rows = _last_row(out, past)
        token = _candidate(logits, 1, never)
    stacked = torch.stack(all_logits)  # (steps, vocab)
    top = tuple(tuple(row) for row in top_k(stacked, TOP_K, pieces, never))
    chosen = torch.tensor(ids + [eos] * finished)
    probs = torch.softmax(stacked, dim=-1).gather(1, chosen[:, None])[:, 0]
    return Branch(tuple(ids), finished, probs.numpy(), stacked.numpy(), top, tuple(attention))


@torch.inference_mode()
def fork(
    model: nn.Module,
    prompt: list[int],
    source: Tensor | None,
    step: int,
    choice: int,
    max_tokens: int,
    pieces: Callable[[list[int]], list[str]],
    never: frozenset[int] = frozenset(),
) -> Fork:
    """Decode greedily after `prompt` (the decoder's ids, bos first; `source` (1, S): an encoder-decoder's) for
    `step` tokens, then write the likeliest and, in a second branch, the `choice`-th likeliest token (from 1), each
    continued greedily to `max_tokens` written tokens in all (fewer at eos or the model's max_len). `pieces`: the
    tokenizer's ids → pieces; `never`: ids never offered as a candidate (the tokenizer's never_written)."""
    if step < 0 or choice < 1:
        raise ValueError(f"a fork needs a step from 1 and a candidate from 1, not step {step + 1}, choice {choice}")
    room = min(max_tokens, model.config.max_len - len(prompt))
    if step >= room:
        raise ValueError(f"step {step + 1} is past the {room} tokens written here: fork at step 1 to {room}")
    if choice > TOP_K:
        raise ValueError(f"choose one of the {TOP_K} likeliest candidates, not the {choice}th")
    out, past = forward(model, torch.tensor([prompt]), source, record=True)
    start = _last_row(out, past)
    shared: list[int] = []
    for _ in range(step):
        token = _candidate(start[0], 1, never)
        if token == model.config.eos_id:
            last = len(shared) + 1
            raise ValueError(f"greedy decoding ends the text at step {last}: fork at step 1 to {last}")
        shared.append(token)
        out, past = forward(model, torch.tensor([[token]]), source, past, record=True)
        start = _last_row(out, past)
    left = room - step
    branches = [
        _continue(model, source, past, start, _candidate(start[0], c, never), left, pieces, never) for c in (1, choice)
    ]
    return Fork(tuple(prompt), tuple(shared), step, choice, *branches)
