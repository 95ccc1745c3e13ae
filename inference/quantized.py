"""4-bit and 8-bit weights, as GGUF's Q4_0 and Q8_0 store them: each matrix in groups of GROUP numbers along a row,
each group its own float16 scale (the group's largest magnitude / 7, or / 127) and the numbers −7 … 7 two to a byte,
or −127 … 127 one to a byte; vectors stay float16. A file in this form says QUANTIZED (4 bits) or QUANTIZED_8 in its
safetensors header ("quantized"); inference.checkpoint.read_weights loads one as float32. Training snapshots that
would not fit the repository ship in 4 bits (training.snapshots), and so do the small models of seed 003's
experiment (training.experiment); a model's own weights may ship in 8 bits where that is measured to cost nothing
a page shows (training.evaluate on both)."""

from __future__ import annotations

import torch

QUANTIZED, GROUP = "int4-groups-of-32", 32  # the header's "quantized" value; numbers per float16 scale
PACKED, SCALE = ".int4", ".int4_scale"  # a quantised matrix W is stored as W.int4 (uint8) and W.int4_scale
QUANTIZED_8, INT8, INT8_SCALE = "int8-groups-of-32", ".int8", ".int8_scale"  # W.int8 (int8) and W.int8_scale
STORED_AS = {PACKED: torch.uint8, INT8: torch.int8}  # the dtype each kind of quantised tensor must have


def _codes(tensor: torch.Tensor, levels: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """A matrix whose rows split into groups of GROUP as (the numbers −levels … levels, int16; each group's float16
    scale, its largest magnitude / levels); None for anything else (vectors, odd widths), which stays float16."""
    if tensor.dim() != 2 or tensor.shape[1] % GROUP:
        return None
    rows, cols = tensor.shape
    groups = tensor.reshape(rows, cols // GROUP, GROUP)
    scale = (groups.abs().amax(dim=2, keepdim=True) / levels).half().float()
    codes = torch.where(scale > 0, groups / scale.clamp_min(1e-30), 0).round().clamp(-levels, levels)
    return codes.reshape(rows, cols).to(torch.int16), scale.reshape(rows, cols // GROUP).half()


def quantize(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """4-bit weights: every matrix whose rows split into groups of GROUP, as two numbers −7 … 7 per byte and a
    float16 scale per group (the group's largest magnitude / 7); everything else float16."""
    out = {}
    for name, tensor in tensors.items():
        tensor = tensor.detach().float().cpu()
        coded = _codes(tensor, 7)
        if coded is None:
            out[name] = tensor.half()
            continue
        codes, scale = coded
        codes = (codes + 8).to(torch.uint8)
        out[name + PACKED] = (codes[:, 0::2] | (codes[:, 1::2] << 4)).contiguous()
        out[name + SCALE] = scale
    return out


def quantize_8(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """8-bit weights: every matrix whose rows split into groups of GROUP, as one number −127 … 127 per byte and a
    float16 scale per group (the group's largest magnitude / 127); everything else float16."""
    out = {}
    for name, tensor in tensors.items():
        tensor = tensor.detach().float().cpu()
        coded = _codes(tensor, 127)
        if coded is None:
            out[name] = tensor.half()
            continue
        codes, scale = coded
        out[name + INT8] = codes.to(torch.int8).contiguous()
        out[name + INT8_SCALE] = scale
    return out


def dequantize(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The float32 weights of :func:`quantize`'s or :func:`quantize_8`'s output (and of float tensors beside them)."""
    out = {}
    for name, tensor in tensors.items():
        if name.endswith((SCALE, INT8_SCALE)):
            continue
        if name.endswith(INT8):
            base = name.removesuffix(INT8)
            rows, cols = tensor.shape
            scale = tensors[base + INT8_SCALE].float()
            out[base] = (tensor.float().reshape(rows, -1, GROUP) * scale.unsqueeze(2)).reshape(rows, cols)
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
