"""The pure functions: the sinusoidal table against its closed form, the masks, the masked softmax."""

from __future__ import annotations

import math

import pytest
import torch

from model.attention import (
    attention_mask,
    masked_softmax,
    padding_mask,
    subsequent_mask,
)
from model.transformer import sinusoidal_table


def closed_form_table(max_len: int, d_model: int) -> list[list[float]]:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)), one number at a time."""
    rows = []
    for pos in range(max_len):
        row = []
        for j in range(d_model):
            two_i = j - (j % 2)
            angle = pos / 10000 ** (two_i / d_model)
            row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
        rows.append(row)
    return rows


@pytest.mark.parametrize(("max_len", "d_model"), [(1, 2), (7, 4), (50, 16), (120, 128)])
def test_sinusoidal_table_equals_the_closed_form(max_len: int, d_model: int) -> None:
    table = sinusoidal_table(max_len, d_model)
    assert table.shape == (max_len, d_model)
    assert table.dtype == torch.float32
    expected = torch.tensor(closed_form_table(max_len, d_model), dtype=torch.float64)
    torch.testing.assert_close(table.double(), expected, atol=1e-6, rtol=0)


def test_sinusoidal_table_starts_with_sin_zero_and_cos_zero() -> None:
    first = sinusoidal_table(3, 8)[0]
    assert torch.equal(first, torch.tensor([0.0, 1.0] * 4))


def test_sinusoidal_table_rejects_an_odd_d_model() -> None:
    with pytest.raises(ValueError, match="even d_model"):
        sinusoidal_table(4, 5)


def test_padding_mask_is_true_at_real_tokens_only() -> None:
    ids = torch.tensor([[5, 6, 0, 0], [0, 7, 8, 9]])
    expected = torch.tensor([[True, True, False, False], [False, True, True, True]])
    assert torch.equal(padding_mask(ids, pad_id=0), expected)
    assert torch.equal(padding_mask(ids, pad_id=9), ids != 9)


def test_subsequent_mask_lets_query_i_see_keys_up_to_i() -> None:
    size = 5
    mask = subsequent_mask(size)
    assert mask.dtype == torch.bool
    for i in range(size):
        for j in range(size):
            assert bool(mask[i, j]) == (j <= i)


def test_attention_mask_combines_query_and_key_padding() -> None:
    q_valid = torch.tensor([[True, True, False]])
    k_valid = torch.tensor([[True, False, True, True]])
    mask = attention_mask(q_valid, k_valid)
    assert mask.shape == (1, 3, 4)
    for i in range(3):
        for j in range(4):
            assert bool(mask[0, i, j]) == (bool(q_valid[0, i]) and bool(k_valid[0, j]))


def test_attention_mask_with_causal_adds_the_no_peek_rule() -> None:
    valid = torch.tensor([[True, True, True, False], [True, True, True, True]])
    mask = attention_mask(valid, valid, causal=True)
    for b in range(2):
        for i in range(4):
            for j in range(4):
                assert bool(mask[b, i, j]) == (bool(valid[b, i]) and bool(valid[b, j]) and j <= i)


def test_attention_mask_with_a_query_offset_equals_the_rows_of_the_full_mask() -> None:
    valid = torch.tensor([[True, True, True, True, True, False]])
    full = attention_mask(valid, valid, causal=True)
    for offset in range(6):
        rows = attention_mask(valid[:, offset:], valid, causal=True, query_offset=offset)
        assert torch.equal(rows, full[:, offset:])


def test_masked_softmax_rows_sum_to_one_and_masked_weights_are_exactly_zero() -> None:
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 4, 6, generator=gen) * 5
    mask = torch.rand(3, 4, 6, generator=gen) > 0.4
    mask[:, :, 0] = True  # every row has at least one allowed key
    weights = masked_softmax(scores, mask)
    assert torch.all(weights[~mask] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4), atol=1e-6, rtol=0)
    assert torch.all(weights[mask] > 0)


def test_masked_softmax_equals_a_softmax_over_the_allowed_keys_only() -> None:
    scores = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    mask = torch.tensor([[True, False, True, False]])
    expected_allowed = torch.softmax(torch.tensor([1.0, 3.0]), dim=0)
    weights = masked_softmax(scores, mask)[0]
    torch.testing.assert_close(weights[[0, 2]], expected_allowed)
    assert weights[1] == 0 and weights[3] == 0


def test_masked_softmax_gives_an_all_zero_row_and_no_nan_when_every_key_is_masked() -> None:
    scores = torch.tensor([[0.5, -2.0, 3.0], [1.0, 1.0, 1.0]], requires_grad=True)
    mask = torch.tensor([[False, False, False], [True, False, True]])
    weights = masked_softmax(scores, mask)
    assert torch.equal(weights[0], torch.zeros(3))
    torch.testing.assert_close(weights[1], torch.tensor([0.5, 0.0, 0.5]))
    weights.sum().backward()  # gradients through an empty row are finite too
    assert torch.isfinite(scores.grad).all()


def test_masked_softmax_is_stable_for_huge_scores() -> None:
    scores = torch.tensor([[1e4, -1e4, 3e4, 0.0]])
    mask = torch.tensor([[True, True, False, True]])
    weights = masked_softmax(scores, mask)
    assert torch.isfinite(weights).all()
    torch.testing.assert_close(weights, torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
