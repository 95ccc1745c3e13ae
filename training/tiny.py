"""Tiny seeded checkpoints for tests and development: a real tokenizer and an untrained model, in seconds."""

from __future__ import annotations

import tempfile
from pathlib import Path

import sentencepiece as spm
import torch

from inference.checkpoint import save_checkpoint
from model.config import ModelConfig
from model.factory import build_model

SENTENCES = [
    "The cat sat on the mat.",
    "A dog ran in the park.",
    "She reads a book every day.",
    "Der Hund läuft im Park.",
    "Die Katze sitzt auf der Matte.",
    "We have a lot of work to do today.",
    "Where is the station?",
    "I like green tea and fresh bread!",
]


def tiny_tokenizer_bytes(vocab_size: int = 64) -> bytes:
    """A unigram sentencepiece model over a few sentences, with pad/unk/bos/eos = 0/1/2/3 and byte fallback."""
    with tempfile.TemporaryDirectory() as tmp:
        prefix = Path(tmp) / "tiny"
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(SENTENCES * 20),
            model_prefix=str(prefix),
            vocab_size=vocab_size,
            model_type="unigram",
            pad_id=0,
            unk_id=1,
            bos_id=2,
            eos_id=3,
            byte_fallback=True,
            hard_vocab_limit=False,
            character_coverage=1.0,
            num_threads=1,
            minloglevel=2,
        )
        return prefix.with_suffix(".model").read_bytes()


def tiny_config(kind: str, vocab_size: int, **overrides: object) -> ModelConfig:
    fields = dict(
        kind=kind,
        vocab_size=vocab_size,
        d_model=32,
        n_heads=4,
        n_encoder_layers=2 if kind == "encoder-decoder" else 0,
        n_decoder_layers=2,
        d_ff=64,
        dropout=0.1,
        max_len=64,
    )
    return ModelConfig(**{**fields, **overrides})


def make_tiny_checkpoint(directory: str | Path, kind: str = "decoder-only", seed: int = 0, **overrides: object) -> Path:
    """Write an untrained, seeded checkpoint of `kind` to `directory` and return its path."""
    tokenizer_bytes = tiny_tokenizer_bytes(300)
    from inference.tokenizer import Tokenizer

    vocab = Tokenizer(tokenizer_bytes).vocab_size
    torch.manual_seed(seed)
    model = build_model(tiny_config(kind, vocab, **overrides)).eval()
    card = {
        "task": f"tiny untrained {kind} for tests",
        "data": [{"name": "model/testing.py SENTENCES", "license": "same as this project"}],
        "hyperparameters": model.config.to_dict(),
        "metrics": {},
        "command": f"python -c 'from training.tiny import make_tiny_checkpoint; make_tiny_checkpoint(DIR, {kind!r})'",
        "samples": [],
    }
    return save_checkpoint(directory, model, tokenizer_bytes, card)
