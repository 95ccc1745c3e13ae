"""4-bit weights, as GGUF's Q4_0 stores them: each matrix in groups of GROUP numbers along a row, each group its
own float16 scale (the group's largest magnitude / 7) and the numbers −7 … 7, two to a byte; vectors stay float16.
A file in this form says QUANTIZED in its safetensors header ("quantized"); inference.checkpoint.read_weights loads
one as float32. Training snapshots that would not fit the repository ship so (training.snapshots), and so do the
small models of seed 003's experiment (training.experiment)."""

from __future__ import annotations

import torch

QUANTIZED, GROUP = "int4-groups-of-32", 32  # the header's "quantized" value; numbers per float16 scale
PACKED, SCALE = ".int4", ".int4_scale"  # a quantised matrix W is stored as W.int4 (uint8) and W.int4_scale


def quantize(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """4-bit weights: every matrix whose rows split into groups of GROUP, as two numbers −7 … 7 per byte and a
    float16 scale per group (the group's largest magnitude / 7); everything else float16."""
    out = {}
    for name, tensor in tensors.items():
        tensor = tensor.detach().float().cpu()
        if tensor.dim() != 2 or tensor.shape[1] % GROUP:
            out[name] = tensor.half()
            continue
        rows, cols = tensor.shape
        groups = tensor.reshape(rows, cols // GROUP, GROUP)
        scale = (groups.abs().amax(dim=2, keepdim=True) / 7).half().float()
        codes = torch.where(scale > 0, groups / scale.clamp_min(1e-30), 0).round().clamp(-7, 7).to(torch.int16) + 8
        codes = codes.reshape(rows, cols).to(torch.uint8)
        out[name + PACKED] = (codes[:, 0::2] | (codes[:, 1::2] << 4)).contiguous()
        out[name + SCALE] = scale.reshape(rows, cols // GROUP).half()
    return out


def dequantize(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The float32 weights of :func:`quantize`'s output (and of any float tensors beside them)."""
    out = {}
    for name, tensor in tensors.items():
        if name.endswith(SCALE):
            continue
        if not name.endswith(PACKED):
            out[name] = tensor.float()
            continue
        base = name.removesuffix(PACKED)
        scale = tensors[base + SCALE].float()
        rows, half = tensor.shape
        codes = torch.stack(((tensor & 0x0F), (tensor >> 4)), dim=2).reshape(rows, 2 * half).float() - 8
        out[base] = (codes.reshape(rows, -1, GROUP) * scale.unsqueeze(2)).reshape(rows, 2 * half)
    return out
