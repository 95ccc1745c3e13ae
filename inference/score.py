"""Scoring a language model on text: perplexity and top-1 next-token accuracy."""

from __future__ import annotations

import math

import torch

from inference.checkpoint import Checkpoint


@torch.inference_mode()
def perplexity(ckpt: Checkpoint, lines: list[str], window: int | None = None) -> tuple[float, float, int]:
    """Perplexity and top-1 next-token accuracy over each line (bos + tokens + eos), in max_len windows."""
    cfg = ckpt.config
    window = window or cfg.max_len
    total_nll, correct, count = 0.0, 0, 0
    for line in lines:
        if not line.strip():
            continue
        ids = [cfg.bos_id] + ckpt.tokenizer.encode(line) + [cfg.eos_id]
        for start in range(0, len(ids) - 1, window - 1):
            chunk = torch.tensor([ids[start : start + window]])
            if chunk.shape[1] < 2:
                continue
            logits, _ = ckpt.model(chunk, record=False)
            targets = chunk[0, 1:]
            logp = torch.log_softmax(logits[0, :-1].float(), dim=-1)
            total_nll -= float(logp.gather(1, targets[:, None]).sum())
            correct += int((logp.argmax(-1) == targets).sum())
            count += len(targets)
    if count == 0:
        raise ValueError("the input has no text to score")
    return math.exp(total_nll / count), correct / count, count
