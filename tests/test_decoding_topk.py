"""Top-k without sorting the vocabulary: equal to a stable descending sort of the whole row, ties in order of id."""

from __future__ import annotations

import torch

from inference.decoding import _top_stable


def whole_sort(probs: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    values, ids = torch.sort(probs, dim=-1, descending=True, stable=True)
    return values[..., :k], ids[..., :k]


def test_top_k_equals_a_stable_sort_of_the_whole_row_even_with_ties() -> None:
    gen = torch.Generator().manual_seed(0)
    for levels in (3, 10, 1000, None):  # few distinct values: ties everywhere, and ties past the candidates
        probs = torch.rand(64, 300, generator=gen)
        if levels is not None:
            probs = (probs * levels).floor() / levels
        for k in (1, 5, 20):
            values, ids = _top_stable(probs, k)
            want_values, want_ids = whole_sort(probs, k)
            assert torch.equal(values, want_values) and torch.equal(ids, want_ids), (levels, k)


def test_a_row_shorter_than_the_candidates_is_sorted_whole() -> None:
    probs = torch.tensor([[0.1, 0.3, 0.3, 0.2, 0.1]])
    values, ids = _top_stable(probs, 5)
    assert ids.tolist() == [[1, 2, 3, 0, 4]] and values.tolist()[0][0] == 0.30000001192092896
