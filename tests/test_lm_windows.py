"""The windows a language model trains on: contiguous text from a document's <s> or from anywhere, spans repeated
within a window, runs of random tokens repeated, and the induction task's sequences."""

from __future__ import annotations

import random
from dataclasses import replace

import torch

from training.batches import induction_batches, lm_batches, repeat_span, repeated_random
from training.tasks import TASKS

BOS = 2


def _stream(n_docs: int = 50, length: int = 40) -> tuple[torch.Tensor, torch.Tensor]:
    ids, starts = [], []
    for d in range(n_docs):
        starts.append(len(ids))
        ids += [BOS] + [10 + (d * 7 + i) % 90 for i in range(length)] + [3]
    return torch.tensor(ids), torch.tensor(starts)


def test_without_shares_every_window_starts_at_a_documents_bos() -> None:
    stream, starts = _stream()
    batch = next(lm_batches(stream, starts, 16, 64, random.Random(0)))
    assert batch.shape == (64, 17)
    assert (batch[:, 0] == BOS).all()


def test_windows_from_anywhere_start_off_a_bos_and_are_contiguous_text() -> None:
    stream, starts = _stream()
    spec = replace(TASKS["lm"], anywhere_share=1.0, repeat_span_share=0.0, repeat_random_share=0.0)
    batch = next(lm_batches(stream, starts, 16, 64, random.Random(0), spec))
    assert (batch[:, 0] != BOS).any()
    text = stream.tolist()
    for row in batch.tolist():
        assert any(text[p : p + 17] == row for p in range(len(text) - 16))


def test_a_repeated_span_appears_twice_and_the_window_keeps_its_length() -> None:
    window = torch.arange(100, 200)  # no token twice
    for seed in range(20):
        out = repeat_span(window, random.Random(seed)).tolist()
        assert len(out) == 100
        repeated = [t for t in set(out) if out.count(t) == 2]
        assert len(repeated) >= 8, "a span of at least 8 tokens comes back"
        first = [i for i, t in enumerate(out) if t in repeated]
        assert out[first[0] : first[0] + len(repeated)] == sorted(repeated)


def test_a_random_run_is_repeated_after_bos_until_the_window_is_full() -> None:
    out = repeated_random(101, BOS, 500, random.Random(1)).tolist()
    assert len(out) == 101 and out[0] == BOS
    body = out[1:]
    period = next(p for p in range(8, 51) if all(body[i] == body[i + p] for i in range(len(body) - p)))
    assert all(t >= 4 for t in body) and period >= 8


def test_an_induction_batch_row_is_bos_then_the_same_run_twice() -> None:
    batch = next(induction_batches(300, BOS, 0, 32, random.Random(0)))
    for row in batch.tolist():
        body = [t for t in row[1:] if t != 0]
        half = len(body) // 2
        assert row[0] == BOS and 8 <= half <= 50 and body[:half] == body[half:]


def test_documents_are_drawn_by_their_length_not_one_each() -> None:
    # one long document (400 tokens) after 300 one-sentence documents (5 tokens each): 1,500 tokens
    ids, starts = [], []
    for d in range(300):
        starts.append(len(ids))
        ids += [BOS, 10 + d % 50, 11, 12, 3]
    starts.append(len(ids))
    ids += [BOS] + [20 + i % 30 for i in range(398)] + [3]
    stream, starts_t = torch.tensor(ids), torch.tensor(starts)
    batch = next(lm_batches(stream, starts_t, 16, 2000, random.Random(0)))
    from_long = sum(row[1:17].tolist() == ids[starts[-1] + 1 : starts[-1] + 17] for row in batch)
    assert 0.15 < from_long / 2000 < 0.35, "the long document's share of windows is about its share of tokens"
