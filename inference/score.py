"""Scoring a language model on text: perplexity and top-1 next-token accuracy."""

from __future__ import annotations

import math

import torch

from inference.checkpoint import Checkpoint
from model.forward import forward


@torch.inference_mode()
def perplexity(ckpt: Checkpoint, lines: list[str], window: int | None = None) -> tuple[float, float, int]:
    """Perplexity and top-1 next-token accuracy over each line (bos + tokens + eos).

    A line longer than the model's `max_len` (a document) is read in windows of `window` tokens that overlap by
    half: each token is scored once, in the first window where it has at least half a window of text before it
    (or the whole line so far), so no token is scored cold at a window's edge."""
    cfg = ckpt.config
    window = window or cfg.max_len
    stride = max(1, window // 2)
    total_nll, correct, count = 0.0, 0, 0
    for line in lines:
        if not line.strip():
            continue
        ids = [cfg.bos_id] + ckpt.tokenizer.encode(line) + [cfg.eos_id]
        scored = 1  # targets ids[1:scored] are done
        start = 0
        while scored < len(ids):
            chunk = torch.tensor([ids[start : start + window]])
            logits, _ = forward(ckpt.model, chunk, record=False)
            first = scored - start  # the chunk's first position whose target is new
            targets = chunk[0, first:]
            logp = torch.log_softmax(logits[0, first - 1 : -1].float(), dim=-1)
            total_nll -= float(logp.gather(1, targets[:, None]).sum())
            correct += int((logp.argmax(-1) == targets).sum())
            count += len(targets)
            scored = start + chunk.shape[1]
            start = scored - (window - stride)
    if count == 0:
        raise ValueError("the input has no text to score")
    return math.exp(total_nll / count), correct / count, count
