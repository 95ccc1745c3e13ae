"""The model a ModelConfig describes: the paper's classes (model.transformer) built from the paper's parts, or, for a
published model, from the parts its switches choose (model/components/); its weights initialised once, after every
module exists."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from model.attention import Linear, MultiHeadedAttention
from model.components.bert import BertEncoder
from model.components.centre_word import CentreWordPredictor
from model.components.embeddings import UnscaledEmbeddings
from model.components.feed_forward import GatedFeedForward, GELUFeedForward
from model.components.grouped_query import GroupedQueryAttention
from model.components.no_bias import linear_without_bias
from model.components.parallel import ParallelDecoderLM
from model.components.rotary import RotaryAttention, RotaryPositions
from model.config import PAPER, ModelConfig
from model.transformer import (
    DecoderOnlyLM,
    EncoderDecoder,
    EncoderOnly,
    FeedForward,
    Model,
    Parts,
    TransformerBase,
    init_weights,
    paper_parts,
)

MODELS: dict[str, type[TransformerBase]] = {
    "encoder-decoder": EncoderDecoder,
    "decoder-only": DecoderOnlyLM,
    "encoder-only": EncoderOnly,
}


def _feed_forward(config: ModelConfig, linear: Linear) -> partial[nn.Module]:
    sizes = (config.d_model, config.d_ff, config.dropout)
    activation = config.switches.activation
    if activation == "swiglu":
        return partial(GatedFeedForward, *sizes, linear)
    if activation in ("gelu", "gelu_tanh"):
        return partial(GELUFeedForward, *sizes, linear, approximate="tanh" if activation == "gelu_tanh" else "none")
    return partial(FeedForward, *sizes, linear)


def parts_for(config: ModelConfig) -> Parts:
    """The paper's parts, with the component each published switch of `config` names in place of the paper's."""
    switches = config.switches
    if switches == PAPER and config.positional != "rotary":
        return paper_parts(config)
    linear = nn.Linear if switches.bias else linear_without_bias
    heads = (config.n_heads, config.d_model, config.dropout)
    if config.kv_heads == config.n_heads:
        attention = partial(MultiHeadedAttention, *heads, linear)
    else:
        attention = partial(GroupedQueryAttention, *heads, config.kv_heads, linear)
    norm = nn.RMSNorm if switches.norm_type == "rms" else nn.LayerNorm
    parts = replace(
        paper_parts(config),
        self_attention=attention,
        cross_attention=attention,
        feed_forward=_feed_forward(config, linear),
        norm=partial(norm, config.d_model, eps=switches.norm_eps),
        linear=linear,
    )
    if not switches.embed_scale:
        parts = replace(parts, embeddings=partial(UnscaledEmbeddings, config.vocab_size, config.d_model))
    if config.positional == "rotary":  # cross-attention keeps its keys unturned: they are the encoder's outputs
        base, dims = switches.rope_base, config.rotary_dims
        turned = partial(RotaryAttention, *heads, config.kv_heads, config.max_len, base, linear, dims)
        positions = partial(RotaryPositions, config.max_len, dims, base)
        parts = replace(parts, positions=positions, self_attention=turned)
    return parts


class NoRandomDraws(TorchFunctionMode):
    """While active in this thread, torch.nn.init's random draws leave their tensor as it is (uninitialised
    memory) and draw nothing: modules are built without PyTorch's own initial weights, which init_weights, or a
    checkpoint's weights, replace. A torch function mode holds for the thread that entered it only."""

    SKIPPED = frozenset(
        {
            nn.init.uniform_,
            nn.init.normal_,
            nn.init.kaiming_uniform_,
            nn.init.kaiming_normal_,
            torch.Tensor.uniform_,
            torch.Tensor.normal_,
        }
    )

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func in self.SKIPPED:
            return args[0] if args else kwargs["tensor"]
        return func(*args, **kwargs)


def build_model(config: ModelConfig, init: bool = True) -> Model:
    """The model `config` describes, with its weights drawn by init_weights once every module exists.

    `init=False` leaves the weights unset (whatever memory held) and draws no random number: for a caller that
    fills every parameter (a checkpoint's or a published model's weights)."""
    model_class = MODELS[config.kind]
    if config.switches.bert_input_or_output:
        model_class = BertEncoder
    elif config.switches.sum_outputs:
        model_class = CentreWordPredictor
    elif config.switches.parallel_residual:
        model_class = ParallelDecoderLM
    with NoRandomDraws():
        model = model_class(config, parts_for(config))
    if init:
        model.apply(init_weights)
    return model  # type: ignore[return-value]
