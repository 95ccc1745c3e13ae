"""The paper's layers (model.transformer), post-norm LayerNorm(x + Sublayer(x)) and pre-norm
x + Sublayer(LayerNorm(x)), equal PyTorch's own `nn.TransformerEncoderLayer(norm_first=…)` given the same weights:
an encoder layer over padded texts, and a language model's decoder layer under the no-peek mask. Torch only, so
the everyday tier holds them."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from model.attention import attention_mask, subsequent_mask
from model.transformer import DecoderLayer, EncoderLayer, paper_parts
from training.tiny import tiny_config

B, T = 3, 7


def torch_twin(ours: EncoderLayer | DecoderLayer, pre_norm: bool) -> nn.TransformerEncoderLayer:
    """PyTorch's encoder layer holding `ours`'s weights: Q, K, V stacked into its in-projection, W_O, the
    feed-forward's two projections and the two sub-layers' norms."""
    attn, ff = ours.self_attn, ours.feed_forward
    d_model, d_ff = ff.w_1.in_features, ff.w_1.out_features
    twin = nn.TransformerEncoderLayer(
        d_model, attn.n_heads, d_ff, dropout=0.0, activation="relu", batch_first=True, norm_first=pre_norm
    )
    with torch.no_grad():
        twin.self_attn.in_proj_weight.copy_(torch.cat([attn.w_q.weight, attn.w_k.weight, attn.w_v.weight]))
        twin.self_attn.in_proj_bias.copy_(torch.cat([attn.w_q.bias, attn.w_k.bias, attn.w_v.bias]))
        twin.self_attn.out_proj.load_state_dict(attn.w_o.state_dict())
        twin.linear1.load_state_dict(ff.w_1.state_dict())
        twin.linear2.load_state_dict(ff.w_2.state_dict())
        twin.norm1.load_state_dict(ours.sublayer[0].norm.state_dict())
        twin.norm2.load_state_dict(ours.sublayer[1].norm.state_dict())
    return twin.eval()


def layer_of(stack: str, norm: str) -> EncoderLayer | DecoderLayer:
    """A seeded layer in eval mode, every bias and norm away from its initial value (so a forgotten one shows)."""
    torch.manual_seed(0)
    config = tiny_config("encoder-decoder", 40, norm=norm)
    parts = paper_parts(config)
    layer = EncoderLayer(config, parts) if stack == "encoder" else DecoderLayer(config, parts, cross=False)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
    return layer.eval()


@pytest.mark.parametrize("norm", ["post", "pre"])
@torch.inference_mode()
def test_an_encoder_layer_equals_torchs_at_every_real_token(norm: str) -> None:
    layer = layer_of("encoder", norm)
    twin = torch_twin(layer, pre_norm=norm == "pre")
    x = torch.randn(B, T, layer.feed_forward.w_1.in_features, generator=torch.Generator().manual_seed(1))
    valid = torch.ones(B, T, dtype=torch.bool)
    valid[1, 5:] = valid[2, 2:] = False  # two padded texts
    ours, _, _ = layer(x, attention_mask(valid, valid), record=True)
    theirs = twin(x, src_key_padding_mask=~valid)
    torch.testing.assert_close(ours[valid], theirs[valid], atol=1e-5, rtol=1e-5)  # a padding query: no row


@pytest.mark.parametrize("norm", ["post", "pre"])
@torch.inference_mode()
def test_a_decoder_layer_without_cross_attention_equals_torchs_under_the_no_peek_mask(norm: str) -> None:
    layer = layer_of("decoder", norm)
    twin = torch_twin(layer, pre_norm=norm == "pre")
    x = torch.randn(B, T, layer.feed_forward.w_1.in_features, generator=torch.Generator().manual_seed(2))
    valid = torch.ones(B, T, dtype=torch.bool)
    for record in (True, False):  # the explicit steps and the fused kernel
        ours, _, _ = layer(x, attention_mask(valid, valid, causal=True), None, None, {}, record)
        theirs = twin(x, src_mask=~subsequent_mask(T))  # torch's mask: True where attention is not allowed
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
