"""Perplexity over documents longer than a window: every token scored once, with context before it."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from inference.score import perplexity


class _Recorder(torch.nn.Module):
    """A stand-in language model: uniform logits, and a log of the windows it was given."""

    def __init__(self, vocab: int, config: SimpleNamespace) -> None:
        super().__init__()
        self.vocab, self.calls, self.config = vocab, [], config

    def forward(self, ids: torch.Tensor, past=None, record: bool = True, ablate=None, activations: bool = False):
        self.calls.append(ids[0].tolist())
        return torch.zeros(1, ids.shape[1], self.vocab), None


def _ckpt(window_len: int, vocab: int = 50):
    config = SimpleNamespace(max_len=window_len, bos_id=2, eos_id=3, kind="decoder-only")
    tokenizer = SimpleNamespace(encode=lambda line: [4 + int(w) for w in line.split()])
    return SimpleNamespace(config=config, tokenizer=tokenizer, model=_Recorder(vocab, config))


def test_a_long_line_is_scored_once_per_token_in_half_overlapping_windows() -> None:
    ckpt = _ckpt(8)
    line = " ".join(str(i % 40) for i in range(30))  # 30 tokens + bos + eos
    ppl, _, count = perplexity(ckpt, [line])
    assert count == 31
    assert math.isclose(ppl, 50, rel_tol=1e-5)  # uniform logits over 50 tokens
    calls = ckpt.model.calls
    assert all(len(c) <= 8 for c in calls)
    assert calls[1][:4] == calls[0][4:]  # each window starts half a window back: its first half is context


def test_a_line_shorter_than_the_window_is_one_pass() -> None:
    ckpt = _ckpt(64)
    _, _, count = perplexity(ckpt, ["1 2 3"])
    assert count == 4 and len(ckpt.model.calls) == 1
