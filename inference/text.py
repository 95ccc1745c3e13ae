"""The text → tokens policy, in one place: clean the input, then lay out the ids each stack reads.

Encoder input: tokens + eos. Decoder input: bos + tokens. Text longer than the model's max_len is cut, and
every change made to the input is said in a note.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

from inference.checkpoint import Checkpoint
from inference.tokenizer import Tokenizer

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


def _fit(ids: list[int], room: int, what: str, notes: list[str], max_len: int, besides: str) -> list[int]:
    """The first `room` ids; the note says why `room` is less than the model's `max_len` positions (`besides`)."""
    if len(ids) > room:
        notes.append(
            f"The {what} was cut from {len(ids)} to {room} tokens: with {besides} that fills the model's "
            f"{max_len} positions (its max_len)."
        )
        return ids[:room]
    return ids


def encode_source(ckpt: Checkpoint, text: str, notes: list[str]) -> list[int]:
    """Source side of an encoder-decoder: tokens + eos."""
    n = ckpt.config.max_len
    return _fit(ckpt.tokenizer.encode(text), n - 1, "input", notes, n, "the end-of-text token") + [ckpt.config.eos_id]


def encode_prefix(ckpt: Checkpoint, text: str, notes: list[str], reserve: int = 0) -> list[int]:
    """Decoder side: bos + tokens, leaving `reserve` positions free for generation."""
    n = ckpt.config.max_len
    besides = "the start token" + (f" and {reserve} positions kept for the tokens to write" if reserve else "")
    return [ckpt.config.bos_id] + _fit(ckpt.tokenizer.encode(text), n - 1 - reserve, "text", notes, n, besides)


WORD = re.compile(r"[a-z]+")
BLANK = re.compile(r"_+")  # where the missing word goes: "The cat ___ on the mat"


def words(text: str) -> list[str]:
    """The words of `text` as a centre-word model reads them: lower-cased runs of the letters a–z (the fivegram
    task's words, training.data.fivegram)."""
    return WORD.findall(text.lower())


def centre_context(text: str, side: int, notes: list[str]) -> list[str]:
    """The `side` words before and the `side` words after the blank (`___`) of `text`; a text of exactly
    2·side words and no blank has it in the middle. InputError says what to type otherwise."""
    example = (
        f"type a sentence with ___ where the missing word goes (“the old man ___ to the river”), or {2 * side} words"
    )
    parts = BLANK.split(text)
    if len(parts) > 2:
        raise InputError(f"The text has {len(parts) - 1} blanks; this model fills one: {example}.")
    if len(parts) == 1:
        found = words(text)
        if len(found) != 2 * side:
            raise InputError(f"This model guesses a missing word from the words around it: {example}.")
        left, right = found[:side], found[side:]
    else:
        before, after = words(parts[0]), words(parts[1])
        if len(before) < side or len(after) < side:
            raise InputError(
                f"This model reads {side} words on each side of the blank; the text has {len(before)} before it and "
                f"{len(after)} after it: {example}."
            )
        left, right = before[-side:], after[:side]
    reads = " ".join([*left, "___", *right])
    if len(parts) == 2 and (len(before) > side or len(after) > side):
        notes.append(f"The model reads the {side} words on each side of the blank, “{reads}”: the others are left out.")
    elif BLANK.sub("___", " ".join(text.split())) != reads:
        notes.append(f"The model reads lower-case words only: “{reads}”.")
    return [*left, *right]


def encode_centre_word(ckpt: Checkpoint, text: str, notes: list[str]) -> list[int]:
    """A centre-word model's input (seed 003's): the ids of the words around the blank, one piece per word."""
    tok = ckpt.tokenizer
    return [word_id(tok, word) for word in centre_context(text, ckpt.config.max_len // 2, notes)]


def word_id(tok: Tokenizer, word: str) -> int:
    """The id of one word of a whole-word tokenizer: its piece, or `<unk>`."""
    found = tok.encode(word)
    return found[0] if len(found) == 1 else tok.unk_id


def encode_encoder_only(ckpt: Checkpoint, text: str, notes: list[str]) -> list[int]:
    """An encoder-only model's input, as BERT reads a sentence: bos ([CLS]) + tokens + eos ([SEP]); a centre-word
    model's: the words around the blank (encode_centre_word)."""
    if ckpt.config.switches.sum_outputs:
        return encode_centre_word(ckpt, text, notes)
    n = ckpt.config.max_len
    kept = _fit(ckpt.tokenizer.encode(text), n - 2, "input", notes, n, "the two special tokens around it")
    return [ckpt.config.bos_id, *kept, ckpt.config.eos_id]


def encode_first_stack(ckpt: Checkpoint, text: str, notes: list[str]) -> list[int]:
    """The ids the model's first stack reads: the encoder's input (encoder-decoder, encoder-only), or the language
    model's text."""
    if ckpt.config.has_cross_attention:
        return encode_source(ckpt, text, notes)
    if ckpt.config.has_encoder:
        return encode_encoder_only(ckpt, text, notes)
    return encode_prefix(ckpt, text, notes)


BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")
SHOWN_CHARS = 12  # at most this many of the characters are named in the note


@functools.lru_cache(maxsize=65_536)
def _reads_as(tokenizer: Tokenizer, ch: str) -> str:
    """How the tokenizer takes one character: "unk" (the unknown token), "bytes" (sentencepiece's byte
    fallback: one <0xNN> piece per UTF-8 byte) or "" (a piece of its vocabulary)."""
    ids = tokenizer.encode(ch)
    if tokenizer.unk_id in ids:
        return "unk"
    return "bytes" if any(BYTE_PIECE.fullmatch(p) for p in tokenizer.pieces(ids)) else ""


def outside_vocabulary(tokenizer: Tokenizer, text: str) -> dict[str, tuple[str, ...]]:
    """The characters of `text` the tokenizer has no piece for, by how it reads them ("unk", "bytes"), in order
    of first appearance: Chinese, Arabic or emoji for a model trained on English and German. A tokenizer of whole
    words (one piece a word, as the induction model's) names the words it reads as `<unk>` instead."""
    found: dict[str, list[str]] = {}
    if getattr(tokenizer, "whole_words", False):
        for word in dict.fromkeys(text.split()):
            if tokenizer.unk_id in tokenizer.encode(word):
                found.setdefault("unk", []).append(word)
        return {how: tuple(words) for how, words in found.items()}
    for ch in dict.fromkeys(text):
        if not ch.isspace() and (how := _reads_as(tokenizer, ch)):
            found.setdefault(how, []).append(ch)
    return {how: tuple(chars) for how, chars in found.items()}


def vocabulary_note(model: str, outside: dict[str, tuple[str, ...]]) -> str | None:
    """The page's note naming the characters outside `model`'s vocabulary and what the model sees instead."""
    if not outside:
        return None
    chars = [ch for group in outside.values() for ch in group]
    unit = "word(s)" if any(len(ch) > 1 for ch in chars) else "character(s)"
    named = " ".join(chars[:SHOWN_CHARS]) + (" …" if len(chars) > SHOWN_CHARS else "")
    sees = []
    if "bytes" in outside:
        sees.append("raw UTF-8 bytes (pieces like <0xE4>)")
    if "unk" in outside:
        sees.append("the unknown token <unk>")
    return (
        f"{len(chars)} {unit} are not in {model}'s vocabulary: {named}. The model reads them as "
        f"{' and '.join(sees)}, which it met rarely or never in training: its attention and output for them do "
        "not mean much."
    )
