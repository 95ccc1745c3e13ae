"""Forced decoding (teacher forcing): a text the person gives is fed to the decoder, and at each of its tokens the
model's probability and rank for that token are read beside the model's own top choice there. A translator's
mistake becomes a question the class can ask: what did the model think of the right word?

A translator reads a reference translation (bos + reference, ending with eos as its training targets did); a
language model reads its text, then a continuation, as the two read run on with a space between them. The
probabilities are the model's own: one plain forward pass, softmax over the whole vocabulary at each position
(tests/test_forced.py checks them against a pass of its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from inference.checkpoint import Checkpoint
from inference.text import (
    InputError,
    clean_text,
    encode_prefix,
    encode_source,
    outside_vocabulary,
    vocabulary_note,
)
from inference.tokenizer import TokenizerLike
from model.forward import forward


@dataclass(frozen=True)
class ForcedRow:
    """One token fed to the decoder: the probability the model gave it at its position, its rank among every
    token of the vocabulary (1: the model's own top choice), and that top choice with its probability."""

    position: int  # 0-based position of the token in the decoder's input (bos at 0)
    token: int
    piece: str
    probability: float
    rank: int
    top_token: int
    top_piece: str
    top_probability: float


@dataclass(frozen=True)
class Forced:
    """A reference (or continuation) read by the model: one row per token of it, in order, and the notes on how it
    was read (characters outside the vocabulary)."""

    rows: tuple[ForcedRow, ...]
    notes: tuple[str, ...] = ()


@torch.inference_mode()
def score(
    ckpt: Checkpoint, target_ids: Sequence[int], source_ids: Sequence[int] | None = None, start: int = 1
) -> tuple[ForcedRow, ...]:
    """The rows of `target_ids[start:]`: each token's probability and rank where the decoder, fed every token before
    it (teacher forcing), predicts it. `source_ids`: an encoder-decoder's encoder input. One forward pass, nothing
    recorded."""
    ids = list(target_ids)
    if not 1 <= start < len(ids) <= ckpt.config.max_len:
        raise InputError(f"Forced decoding scores 1 to {ckpt.config.max_len - 1} tokens after the first.")
    source = None if source_ids is None else torch.tensor([list(source_ids)])
    logits, _ = forward(ckpt.model, torch.tensor([ids[:-1]]), source, record=False)  # (1, T-1, vocab)
    return rows_of(ckpt, ids, logits[0], start)


def rows_of(ckpt: Checkpoint, target_ids: Sequence[int], logits: torch.Tensor, start: int = 1) -> tuple[ForcedRow, ...]:
    """The rows of `target_ids[start:]` from the logits (≥ T-1, vocab) of a pass that fed them (row t predicts token
    t + 1): `score` without its forward pass, for an analysis whose traced pass computed them already. The
    probabilities are exp(logit - logsumexp): no (T, vocab) softmax beside the logits."""
    ids = list(target_ids)
    at = logits[start - 1 : len(ids) - 1].float()  # (n, vocab): row i predicts ids[start + i]
    fed = torch.tensor(ids[start:])
    total = torch.logsumexp(at, dim=-1)  # (n,)
    chosen = at.gather(1, fed[:, None])[:, 0]
    ranks = (at > chosen[:, None]).sum(dim=1) + 1
    best, tops = at.max(dim=1)  # greedy decoding's choice: argmax over the whole vocabulary
    chosen_p, top_p = torch.exp(chosen - total).tolist(), torch.exp(best - total).tolist()
    fed_ids, top_ids, rank_list = ids[start:], tops.tolist(), ranks.tolist()  # Python ints: no tensor indexing a row
    pieces = ckpt.tokenizer.pieces(fed_ids + top_ids)
    n = len(fed_ids)
    return tuple(
        ForcedRow(start + i, fed_ids[i], pieces[i], chosen_p[i], rank_list[i], top_ids[i], pieces[n + i], top_p[i])
        for i in range(n)
    )


def _reference_ids(ckpt: Checkpoint, reference: str, room: int, what: str, after: str | None = None) -> list[int]:
    """The reference's ids, checked: not empty, at most `room` tokens (the positions the text leaves). `after`: the
    text a continuation follows, so that it is read as the text run on with a space between them (continuation_ids)."""
    try:
        cleaned = clean_text(reference).text
    except InputError:
        raise InputError(f"The {what} is empty: type the words you expect the model to write.") from None
    ids = ckpt.tokenizer.encode(cleaned) if after is None else continuation_ids(ckpt.tokenizer, after, cleaned)
    if not ids:
        raise InputError(f"The {what} reads as no token at all: type words, not only symbols the model skips.")
    if len(ids) > room:
        raise InputError(
            f"The {what} is {len(ids)} tokens long; with the text, the model reads at most {room} of them "
            f"({ckpt.config.max_len} positions, its max_len). Shorten it."
        )
    return ids


def continuation_ids(tokenizer: TokenizerLike, text: str, continuation: str) -> list[int]:
    """The ids of `continuation` as the model reads it after `text` with a space between: the tail of the whole
    run-on text's ids. A byte-level BPE (GPT-2, SmolLM2) spells a word after a space `Ġthe`, a piece apart from the
    `the` that starts a text, so the continuation encoded alone would be other tokens than the model reads there.
    Where the tokenizer merges across the join (the text's ids are not a prefix of the whole's), the continuation
    is encoded alone, after a space when its pieces are byte-level."""
    head = tokenizer.encode(text)
    whole = tokenizer.encode(f"{text} {continuation}")
    if whole[: len(head)] == head and len(whole) > len(head):
        return whole[len(head) :]
    return tokenizer.encode(f" {continuation}" if getattr(tokenizer, "byte_level", False) else continuation)


def forced(ckpt: Checkpoint, text: str, reference: str) -> Forced:
    """`reference` fed to the decoder after `text`, one row per reference token: a translator's reference
    translation of the source `text` (its rows end with the end of text), a language model's continuation of
    `text`. Raises InputError for an empty or too long reference, or a model that writes nothing."""
    cfg = ckpt.config
    notes: list[str] = []
    cleaned = clean_text(text).text
    if not cfg.has_decoder:
        raise InputError(f"{ckpt.name} is an encoder: it writes nothing, so there is no reference to feed it.")
    if cfg.has_cross_attention:
        source = encode_source(ckpt, cleaned, notes)
        ids = _reference_ids(ckpt, reference, cfg.max_len - 2, "reference translation")  # bos and eos besides
        target, start = [cfg.bos_id, *ids, cfg.eos_id], 1
    else:
        prefix = encode_prefix(ckpt, cleaned, notes)
        ids = _reference_ids(ckpt, reference, cfg.max_len - len(prefix), "continuation", after=cleaned)
        source, target, start = None, prefix + ids, len(prefix)
    note = vocabulary_note(ckpt.name, outside_vocabulary(ckpt.tokenizer, clean_text(reference).text))
    return Forced(score(ckpt, target, source, start), tuple(notes + ([note] if note else [])))


def scored(ckpt: Checkpoint, text: str, target_ids: Sequence[int], start: int = 1) -> tuple[ForcedRow, ...]:
    """The rows of an analysis's own decoder input from `start` (`Analysis.target_ids`: a translator's output, a
    language model's text and what it wrote): how sure the model was of each token it read or wrote."""
    source = encode_source(ckpt, clean_text(text).text, []) if ckpt.config.has_cross_attention else None
    return score(ckpt, target_ids, source, start)
