"""Projections without biases: x W instead of x W + b (Llama's attention, feed-forward and output)."""

from __future__ import annotations

from torch import nn


def linear_without_bias(d_in: int, d_out: int) -> nn.Linear:
    """nn.Linear(d_in, d_out) with no bias: a `Linear` part (model.attention.Linear)."""
    return nn.Linear(d_in, d_out, bias=False)
