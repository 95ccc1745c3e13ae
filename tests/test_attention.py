"""MultiHeadedAttention against torch's own scaled_dot_product_attention, and what its record holds."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F  # noqa: N812

from model.attention import MultiHeadedAttention

B, TQ, TK, D, H = 3, 5, 7, 32, 4


@pytest.fixture(scope="module")
def attn() -> MultiHeadedAttention:
    torch.manual_seed(0)
    module = MultiHeadedAttention(H, D, dropout=0.1).eval()
    with torch.no_grad():  # non-zero biases, so a forgotten bias would show
        for linear in (module.w_q, module.w_k, module.w_v, module.w_o):
            linear.bias.normal_(0, 0.1)
    return module


@pytest.fixture(scope="module")
def inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """query (B, Tq, D), key_value (B, Tk, D) and a mask with padded keys, padded queries and an all-padding row."""
    gen = torch.Generator().manual_seed(1)
    query = torch.randn(B, TQ, D, generator=gen)
    key_value = torch.randn(B, TK, D, generator=gen)
    q_valid = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [0, 0, 0, 0, 0]], dtype=torch.bool)
    k_valid = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0]], dtype=torch.bool)
    mask = q_valid[:, :, None] & k_valid[:, None, :]
    mask[0] &= torch.rand(TQ, TK, generator=gen) > 0.3  # irregular holes too
    mask[0, :, 0] = True
    return query, key_value, mask


def heads(x: torch.Tensor) -> torch.Tensor:
    """(B, T, D) → (B, H, T, D/H), written here independently of the module."""
    b, t, _ = x.shape
    return x.reshape(b, t, H, D // H).permute(0, 2, 1, 3)


@torch.no_grad()
def test_attention_output_equals_scaled_dot_product_attention(attn, inputs) -> None:
    query, key_value, mask = inputs
    out, rec = attn(query, key_value, mask)
    q, k, v = heads(attn.w_q(query)), heads(attn.w_k(key_value)), heads(attn.w_v(key_value))
    reference_heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])  # (B, H, Tq, d_head)
    reference = attn.w_o(reference_heads.permute(0, 2, 1, 3).reshape(B, TQ, D))
    rows = mask.any(-1)  # (B, Tq): queries with at least one allowed key
    assert rows.sum() >= 5 and (~rows).sum() >= 5
    torch.testing.assert_close(out[rows], reference[rows], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rec.keys, k, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(rec.values, v, atol=1e-6, rtol=1e-6)
    # the heads, before W^O, are the recorded weights applied to the values
    per_head = rec.weights @ rec.values
    torch.testing.assert_close(per_head.transpose(1, 2)[rows], reference_heads.transpose(1, 2)[rows], atol=1e-5, rtol=0)


@torch.no_grad()
def test_scores_are_the_scaled_dot_products_before_the_mask(attn, inputs) -> None:
    query, key_value, mask = inputs
    _, rec = attn(query, key_value, mask)
    q, k = heads(attn.w_q(query)), heads(attn.w_k(key_value))
    expected = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(D // H)
    assert rec.scores.shape == (B, H, TQ, TK)
    torch.testing.assert_close(rec.scores, expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(rec.mask, mask)


@torch.no_grad()
def test_weight_rows_sum_to_one_and_masked_weights_are_exactly_zero(attn, inputs) -> None:
    query, key_value, mask = inputs
    _, rec = attn(query, key_value, mask)
    full = mask[:, None].expand_as(rec.weights)
    assert torch.all(rec.weights[~full] == 0)
    rows = mask.any(-1)[:, None].expand(B, H, TQ)
    torch.testing.assert_close(rec.weights.sum(-1)[rows], torch.ones(int(rows.sum())), atol=1e-6, rtol=0)


@torch.no_grad()
def test_all_padding_rows_have_zero_weights_and_nothing_is_nan(attn, inputs) -> None:
    query, key_value, mask = inputs
    out, rec = attn(query, key_value, mask)
    for tensor in (out, rec.scores, rec.weights, rec.keys, rec.values):
        assert torch.isfinite(tensor).all()
    assert torch.all(rec.weights[2] == 0)  # the all-padding sequence
    assert torch.all(rec.weights[1, :, 3:] == 0)  # padded queries
    # a query that sees nothing gets W^O applied to zero heads: exactly the output bias
    torch.testing.assert_close(out[2], attn.w_o.bias.expand(TQ, D))


@torch.no_grad()
def test_past_keys_and_values_come_before_the_new_ones(attn, inputs) -> None:
    query, key_value, mask = inputs
    full_out, full_rec = attn(query, key_value, mask)
    _, past = attn(query[:, :1], key_value[:, :3], mask[:, :1, :3])
    out, rec = attn(query, key_value[:, 3:], mask, past=past)
    torch.testing.assert_close(rec.keys, full_rec.keys, atol=1e-6, rtol=0)
    torch.testing.assert_close(rec.values, full_rec.values, atol=1e-6, rtol=0)
    torch.testing.assert_close(out, full_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rec.weights, full_rec.weights, atol=1e-6, rtol=0)


@torch.no_grad()
def test_key_value_none_uses_the_past_as_it_is(attn, inputs) -> None:
    query, key_value, mask = inputs
    expected, rec = attn(query, key_value, mask)
    out, rec_again = attn(query, None, mask, past=rec)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)
    assert rec_again.keys is rec.keys and rec_again.values is rec.values
    with pytest.raises(ValueError, match="past"):
        attn(query, None, mask)


@torch.no_grad()
def test_the_fused_path_gives_the_same_output_without_scores_or_weights(attn, inputs) -> None:
    """record=False calls scaled_dot_product_attention; padded and all-padding queries must agree as well."""
    query, key_value, mask = inputs
    out, rec = attn(query, key_value, mask)
    out_fused, rec_fused = attn(query, key_value, mask, record=False)
    assert rec.weights is not None and rec_fused.weights is None and rec_fused.scores is None
    torch.testing.assert_close(out_fused, out, atol=1e-5, rtol=1e-5)
    assert torch.isfinite(out_fused).all()
    assert torch.equal(rec_fused.keys, rec.keys) and torch.equal(rec_fused.mask, rec.mask)


def test_a_mask_of_the_wrong_shape_is_rejected(attn, inputs) -> None:
    query, key_value, mask = inputs
    with pytest.raises(ValueError, match="mask shape"):
        attn(query, key_value, mask[:, :, :-1])


def test_d_model_not_divisible_by_n_heads_is_rejected() -> None:
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadedAttention(5, 32)


def test_dropout_acts_in_train_mode_only(inputs) -> None:
    torch.manual_seed(3)
    module = MultiHeadedAttention(H, D, dropout=0.5)
    query, key_value, mask = inputs
    for record in (True, False):
        with torch.no_grad():
            module.train()
            a, _ = module(query, key_value, mask, record=record)
            b, _ = module(query, key_value, mask, record=record)
            module.eval()
            c, _ = module(query, key_value, mask, record=record)
            d, _ = module(query, key_value, mask, record=record)
        assert not torch.equal(a, b)
        assert torch.equal(c, d)
