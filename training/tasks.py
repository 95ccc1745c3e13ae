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
    cooldown_share: float = 0.0  # or this share of the run's steps, whichever is longer (a run fitted to --minutes)
    anywhere_share: float = 0.0  # language model: the share of windows that begin at any token, not at a <s>
    repeat_span_share: float = 0.0  # language model: the share of windows that repeat a span of their own text
    repeat_random_share: float = 0.0  # language model: the share of windows of random tokens repeated
    snapshot_every: int = 0  # keep a snapshot every this many steps too (besides 0, 1 %, 3 %, 10 %, 30 %, 100 %)
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
    # Sized to a GPU's few minutes and the repository's room (8-bit weights, about 15 MB): the paper's base width
    # halved and three layers a side, d_ff four times d_model; dropout above the paper's 0.1, for 127k pairs read
    # many times over. The shipped translate-en-de is the earlier 3+3 x d256 model, trained on one CPU core.
    "translate": TaskSpec(
        name="translate",
        checkpoint="translate-en-de",
        description="English → German translation of short everyday sentences (the paper's encoder-decoder).",
        model=dict(
            kind="encoder-decoder",
            d_model=384,
            n_heads=8,
            n_encoder_layers=3,
            n_decoder_layers=3,
            d_ff=1536,
            dropout=0.2,
            max_len=512,
            positional="sinusoidal",
            norm="post",
            tie_embeddings=True,
        ),
        batch_tokens=12000,
        max_steps=6000,
        warmup=600,
        lr_factor=0.7,
        label_smoothing=0.1,
        eval_every=250,
        max_train_len=64,
        cooldown_share=0.2,
        notes={
            "dropout": "0.2: the 127k training pairs are read about 30 times in 6,000 steps of 12,000 tokens",
            "schedule": "the paper's warm-up and inverse square root, the last fifth of the run taken linearly to 0; "
            "with --minutes the run's length is fitted to the budget (training.clock)",
        },
    ),
    # Sized to one GPU's 8 minutes (python -m atlas train --task lm --device cuda --minutes 8) and the repository's
    # checkpoint budget: 6 layers x 8 heads, d_model 384 (10.6 M weights outside the embeddings: 8-bit weights and
    # 4-bit snapshots fit lm-english's 25 MB). The 7.3 M training tokens are read about 13 times in 6,000 steps of
    # 16,384 tokens, so dropout is higher than the paper's and the best validation step is the one kept.
    "lm": TaskSpec(
        name="lm",
        checkpoint="lm-english",
        description=(
            "English language model (decoder-only) on documents of running text: Brown's texts, the chapters of "
            "Austen, Moby Dick and the World English Bible, nlp-corpus prose and WordNet examples."
        ),
        model=dict(
            kind="decoder-only",
            d_model=384,
            n_heads=8,
            n_encoder_layers=0,
            n_decoder_layers=6,
            d_ff=1536,
            dropout=0.15,
            max_len=256,
            positional="sinusoidal",
            norm="pre",
            tie_embeddings=True,
        ),
        batch_tokens=16384,
        max_steps=6000,
        warmup=300,
        lr_factor=0.6,
        label_smoothing=0.0,
        eval_every=100,
        block_size=256,
        cooldown_share=0.2,
        anywhere_share=0.5,
        repeat_span_share=0.25,
        repeat_random_share=0.2,
        snapshot_every=100,
        notes={
            "label_smoothing": "0 for the language model: its metric is perplexity, which smoothing inflates.",
            "dropout": "0.15: the training text is read about thirteen times over; a run without dropout learned "
            "its text by heart by the fourth epoch (validation loss flat while the training loss fell).",
            "windows": "half the windows begin at a document's <s>, as the app's input does, half at any token, so "
            "every part of a chapter is read with context before it.",
            "repeats": "a quarter of the windows copy a span of their own text in again later, and one in five is "
            "<s> and a run of random tokens repeated, from step 0: text where copying from the context pays, which "
            "is how induction heads are made to form (Olsson et al. 2022). The circuit forms early in a run or not "
            "at all: fine-tuning a finished model on such text did not form one.",
            "positional": "the paper's sinusoids: a copying head needs a previous-token head before it, which reads "
            "its offset from the positions. A learned table drawn at std 0.02 beside token embeddings of std 1 "
            "(√d_model times d_model^-0.5) formed neither in 6,000 steps (best previous-token head 0.11, induction "
            "0.02; with dropout 0.05 and 35 % random runs 0.16 and 0.03); with the sinusoids the induction head "
            "formed between steps 1,400 and 1,900 (0.10 → 0.95) and the validation loss ended lower.",
            "schedule": "the paper's warm-up and inverse square root, the last fifth of the run taken linearly to 0; "
            "with --minutes the run's length is fitted to the budget (training.clock).",
            "snapshots": "every validation keeps a float16 snapshot, so those around the induction head's forming "
            "can be shipped (python -m training.snapshots … --around-induction)",
        },
    ),
    # Olsson et al.'s setting at the size of a CPU lesson: two layers (an induction head needs a previous-token head
    # in an earlier layer), four heads, d_model 64. The snapshots every 100 steps catch the phase change.
    "induction": TaskSpec(
        name="induction",
        checkpoint="induction",
        description=(
            "Induction heads forming: a two-layer decoder trained on runs of random words, each repeated once, "
            "learns to copy the second run from the first."
        ),
        model=dict(
            kind="decoder-only",
            d_model=64,
            n_heads=4,
            n_encoder_layers=0,
            n_decoder_layers=2,
            d_ff=256,
            dropout=0.0,
            max_len=128,
            positional="learned",
            norm="pre",
            tie_embeddings=True,
        ),
        batch_tokens=32 * 101,
        max_steps=6000,
        warmup=200,
        lr_factor=0.5,
        label_smoothing=0.0,
        eval_every=100,
        block_size=101,  # <s> and two runs of at most 50 words
        snapshot_every=100,
        notes={
            "data": "drawn on the fly from the seed: a run of 8-50 words, uniform over the vocabulary, then it again",
            "dropout": "0: the data never repeats, so there is nothing to learn by heart",
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
