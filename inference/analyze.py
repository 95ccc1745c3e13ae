"""From text to what the app and the CLI show: cleaned input, tokens, the trace and the predictions."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

import torch

from inference.checkpoint import Checkpoint
from inference.decoding import TopToken, generate, top_k
from model.trace import Trace
from model.transformer import EncoderDecoder

MAX_CHARS = 20_000  # longer text is cut before tokenizing: max_len tokens never need more


class InputError(ValueError):
    """The text cannot be analysed; the message says why and what to type instead."""


@dataclass(frozen=True)
class CleanText:
    text: str
    notes: tuple[str, ...] = ()


def clean_text(text: object) -> CleanText:
    """Normalise to NFC, drop control characters (keeping spaces), reject empty text, cut very long text."""
    if not isinstance(text, str):
        raise InputError(f"expected text, got {type(text).__name__}")
    notes = []
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS]
        notes.append(f"The text was cut to its first {MAX_CHARS:,} characters.")
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):  # lone surrogates: not text, sentencepiece rejects them
        count = sum(0xD800 <= ord(ch) <= 0xDFFF for ch in text)
        text = "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)
        notes.append(f"{count} invalid character(s) (lone UTF-16 surrogates) were replaced by \ufffd.")
    text = unicodedata.normalize("NFC", text)
    kept = "".join(" " if ch in "\t\n\r" else ch for ch in text if ch in "\t\n\r" or unicodedata.category(ch) != "Cc")
    if len(kept) != len(text):
        notes.append(f"{len(text) - len(kept)} control character(s) were removed.")
    kept = " ".join(kept.split())
    if not kept:
        raise InputError("The text is empty: type a sentence (letters, not only spaces or control characters).")
    return CleanText(kept, tuple(notes))


@dataclass(frozen=True)
class Analysis:
    """One input analysed by one checkpoint (batch of one)."""

    checkpoint: str
    kind: str
    text: str
    source_pieces: list[str] | None  # encoder-decoder only
    target_pieces: list[str]  # decoder input pieces (the text for a language model)
    target_ids: list[int]
    trace: Trace
    predictions: list[list[TopToken]]  # per decoder position: the next-token distribution's top k
    output_text: str | None  # encoder-decoder: the target text; language model: None
    notes: tuple[str, ...] = field(default_factory=tuple)
    unknown_pieces: tuple[str, ...] = ()


def _fit(ids: list[int], room: int, what: str, notes: list[str]) -> list[int]:
    if len(ids) > room:
        notes.append(f"The {what} was cut from {len(ids)} to {room} tokens (the model's max_len).")
        return ids[:room]
    return ids


def encode_source(ckpt: Checkpoint, text: str, notes: list[str]) -> list[int]:
    """Source side of an encoder-decoder: tokens + eos."""
    return _fit(ckpt.tokenizer.encode(text), ckpt.config.max_len - 1, "input", notes) + [ckpt.config.eos_id]


def encode_prefix(ckpt: Checkpoint, text: str, notes: list[str], reserve: int = 0) -> list[int]:
    """Decoder side: bos + tokens, leaving `reserve` positions free for generation."""
    room = ckpt.config.max_len - 1 - reserve
    return [ckpt.config.bos_id] + _fit(ckpt.tokenizer.encode(text), room, "text", notes)


@torch.no_grad()
def analyze(ckpt: Checkpoint, text: str, target: str | None = None, k: int = 5, max_tokens: int = 64) -> Analysis:
    """Clean and tokenize `text`, run the model once and return its trace and predictions.

    Encoder-decoder: `target` is the decoder's text; without it the model's own greedy output is used.
    """
    cleaned = clean_text(text)
    notes = list(cleaned.notes)
    tok, cfg = ckpt.tokenizer, ckpt.config
    source_ids = None
    output_text = None
    if isinstance(ckpt.model, EncoderDecoder):
        src = encode_source(ckpt, cleaned.text, notes)
        source_ids = torch.tensor([src])
        if target is None:
            out = generate(ckpt.model, [cfg.bos_id], source_ids, max_tokens=max_tokens, record=False).ids
            target_ids = [cfg.bos_id] + out
        else:
            target_ids = encode_prefix(ckpt, clean_text(target).text, notes)
        output_text = tok.decode(target_ids)
        logits, trace = ckpt.model(source_ids, torch.tensor([target_ids]))
    else:
        target_ids = encode_prefix(ckpt, cleaned.text, notes)
        logits, trace = ckpt.model(torch.tensor([target_ids]))
    all_ids = target_ids + (source_ids[0].tolist() if source_ids is not None else [])
    unknown = tuple(sorted({p for i, p in zip(all_ids, tok.pieces(all_ids)) if i == cfg.unk_id}))
    if unknown:
        notes.append("Some characters are not in the model's vocabulary and became <unk>.")
    return Analysis(
        checkpoint=ckpt.name,
        kind=cfg.kind,
        text=cleaned.text,
        source_pieces=tok.pieces(source_ids[0].tolist()) if source_ids is not None else None,
        target_pieces=tok.pieces(target_ids),
        target_ids=target_ids,
        trace=trace,
        predictions=top_k(logits[0], k),
        output_text=output_text,
        notes=tuple(notes),
        unknown_pieces=unknown,
    )
