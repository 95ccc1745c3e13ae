"""The three shipped tasks: where their data lives and the model and training settings each one uses."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TaskSpec:
    """A task's model config (without vocab and special ids, read from its tokenizer) and training settings."""

    name: str
    checkpoint: str  # the folder name under checkpoints/
    description: str
    model: dict[str, Any]
    batch_tokens: int  # tokens (target side) per optimizer step
    max_steps: int
    warmup: int
    lr_factor: float
    label_smoothing: float
    eval_every: int
    block_size: int = 0  # language model: tokens per training window
    max_train_len: int = 0  # sequence-to-sequence: drop training pairs longer than this (tokens)
    cooldown: int = 0  # the run's last `cooldown` steps take the rate linearly from the schedule's down to 0
    notes: dict[str, str] = field(default_factory=dict)


TASKS: dict[str, TaskSpec] = {
    "reverse": TaskSpec(
        name="reverse",
        checkpoint="reverse",
        description="Sequence reversal: the encoder-decoder writes its input string backwards.",
        model=dict(
            kind="encoder-decoder",
            d_model=128,
            n_heads=4,
            n_encoder_layers=2,
            n_decoder_layers=2,
            d_ff=512,
            dropout=0.1,
            max_len=512,
            positional="sinusoidal",
            norm="post",
            tie_embeddings=True,
        ),
        batch_tokens=2048,
        max_steps=5000,
        warmup=400,
        lr_factor=0.5,
        label_smoothing=0.1,
        eval_every=250,
        max_train_len=64,
    ),
    # 3+3 layers for ~127k pairs (Ding + de-corpus join + LibreOffice help): about 2 hours on one shared CPU core.
    "translate": TaskSpec(
        name="translate",
        checkpoint="translate-en-de",
        description="English → German translation of short everyday sentences (the paper's encoder-decoder).",
        model=dict(
            kind="encoder-decoder",
            d_model=256,
            n_heads=8,
            n_encoder_layers=3,
            n_decoder_layers=3,
            d_ff=1024,
            dropout=0.1,
            max_len=512,
            positional="sinusoidal",
            norm="post",
            tie_embeddings=True,
        ),
        batch_tokens=3000,
        max_steps=3000,
        warmup=400,
        lr_factor=0.5,
        label_smoothing=0.1,
        eval_every=250,
        max_train_len=64,
    ),
    # 6 layers x 8 heads d256 for the ~7.7 M-token corpus: on one CPU core it trains at ~1,900 tokens/s, twice
    # the speed of 6 x 6 d384 (~940), so the same hours see two epochs instead of one (tokens/s measured by a
    # forward + backward of 16 x 256 tokens per size; see issue 11's note).
    "lm": TaskSpec(
        name="lm",
        checkpoint="lm-english",
        description=(
            "English language model (decoder-only) on Brown, Austen, Moby Dick, the World English Bible, "
            "nlp-corpus prose and WordNet examples."
        ),
        model=dict(
            kind="decoder-only",
            d_model=256,
            n_heads=8,
            n_encoder_layers=0,
            n_decoder_layers=6,
            d_ff=1024,
            dropout=0.0,
            max_len=256,
            positional="learned",
            norm="pre",
            tie_embeddings=True,
        ),
        batch_tokens=4096,
        max_steps=4000,
        warmup=200,
        lr_factor=0.4,
        label_smoothing=0.0,
        eval_every=250,
        block_size=256,
        notes={
            "label_smoothing": "0 for the language model: its metric is perplexity, which smoothing inflates.",
            "dropout": (
                "0, chosen for about two epochs on one CPU core; by the fourth (7,500 steps) the validation loss had "
                "stopped falling while the training loss went on down: a longer run wants dropout."
            ),
        },
    ),
}


# A language model on any text (python -m atlas train --task lm --text FILE): half lm-english's width and two thirds
# of its depth (a sixth of its weights outside the embeddings), so a CPU core trains it in minutes. Its steps read
# the training tokens TEXT_EPOCHS times, at least TEXT_MIN_STEPS (a small text is read many times over: dropout 0.1,
# and the best validation step is the one kept) and at most TEXT_MAX_STEPS (about 6 M tokens; a larger text is not
# read whole).
TEXT_MODEL: dict[str, Any] = dict(
    kind="decoder-only",
    d_model=128,
    n_heads=4,
    n_encoder_layers=0,
    n_decoder_layers=4,
    d_ff=512,
    dropout=0.1,
    max_len=128,  # the block size too: positions beyond the training windows would never be learned
    positional="learned",
    norm="pre",
    tie_embeddings=True,
)
TEXT_BATCH_TOKENS = 2048
TEXT_EPOCHS, TEXT_MIN_STEPS, TEXT_MAX_STEPS = 2, 300, 3000


def text_spec(checkpoint: str, description: str, train_tokens: int, model: dict[str, Any] = TEXT_MODEL) -> TaskSpec:
    """The lm task sized to a text of `train_tokens` training tokens: TEXT_MODEL (or `model`), its steps as above."""
    steps = min(TEXT_MAX_STEPS, max(TEXT_MIN_STEPS, math.ceil(TEXT_EPOCHS * train_tokens / TEXT_BATCH_TOKENS)))
    return TaskSpec(
        name="lm",  # what training.evaluate scores it as: perplexity and top-1 accuracy
        checkpoint=checkpoint,
        description=description,
        model=dict(model),
        batch_tokens=TEXT_BATCH_TOKENS,
        max_steps=steps,
        warmup=100,
        lr_factor=0.25,  # peak 0.25 * 128^-0.5 * 100^-0.5 = 2.2e-3, as reverse's 0.5 at d_model 128, warmup 400
        label_smoothing=0.0,
        eval_every=max(25, steps // 10),
        block_size=model["max_len"],
        notes={
            "steps": f"{TEXT_EPOCHS} epochs of the text's {train_tokens:,} training tokens in batches of "
            f"{TEXT_BATCH_TOKENS:,}, at least {TEXT_MIN_STEPS:,} and at most {TEXT_MAX_STEPS:,}",
            "dropout": "0.1: a small text is read many times over",
        },
    )


def data_dir(task: str, root: str | Path = "data") -> Path:
    return Path(root) / task
