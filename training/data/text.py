"""Any UTF-8 text made into the prepared data of the lm task (`python -m atlas train --task lm --text FILE`).

The folder gets what `python -m training.data prepare lm` writes (train/valid/test.txt, tokenizer.model and .vocab,
sources.json naming the file and its sha256) and prompts.txt: the openings of a few test lines, which
training.evaluate continues for the card's samples instead of its English prompts.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
import shutil
import stat
import sys
import tempfile
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

import sentencepiece as spm
from tqdm import tqdm

from inference.files import kind
from training.data.common import sha256_file, train_tokenizer, write_lines, write_manifest
from training.data.lm import LM_HELDOUT_BYTES, LM_VOCAB, clean_lm_lines, count_tokens, overlap_key
from training.tasks import TEXT_BATCH_TOKENS, TEXT_MAX_STEPS

MAX_TEXT_BYTES = 100_000_000  # a run reads at most about 6 M tokens (TEXT_MAX_STEPS batches), some 25 MB of text
MIN_TEXT_CHARS = 10_000  # about 1,700 English words: below it the held-out splits leave too little to learn from
HELDOUT_MIN_CHARS = 1_500  # each of valid and test: several 128-token windows whatever the tokenizer
MAX_LINE_CHARS = 2_000  # longer lines are broken at a space (sentencepiece skips lines over 16 kB)
CHARS_PER_PIECE = 100  # one learned piece per 100 characters of train: rarer pieces would be seen too seldom
BYTE_AND_SPECIAL_PIECES = 256 + 4  # byte fallback's <0x00>…<0xFF> and <pad> <unk> <s> </s>
MANY_CHARACTERS = 1_000  # more distinct characters than this (Chinese, Japanese): the rarest are spelled in bytes
SPLIT_SEED = 0  # the split does not follow --seed: runs of other seeds are scored on the same test lines
PROMPTS = "prompts.txt"
PROMPT_COUNT, PROMPT_WORDS = 5, 6
SPLITS = ("train", "valid", "test")
_NOT_SPACE = re.compile(r"\S")  # where the next part starts after a cut


class TextError(ValueError):
    """The text cannot be trained on; the message names the file, what is wrong and what to do."""


def slug(stem: str) -> str:
    """A folder-name form of a file name: ASCII lower case, runs of other characters as one '-'."""
    ascii_stem = unicodedata.normalize("NFKD", stem).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", ascii_stem).strip("-")[:60].strip("-") or "text"


def read_text(path: Path, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The file's text; a missing file, a folder, a file over `max_bytes`, binary or non-UTF-8 bytes or no text at
    all is a TextError. The file is read a megabyte at a time and checked as it comes, so a huge or binary file
    is refused without being held in memory. A named pipe, a device or a socket is named and never opened:
    opening a pipe would wait for a writer, and /dev/zero never ends."""
    try:
        info = path.stat()
        mode = info.st_mode
    except FileNotFoundError:
        raise TextError(f"{path}: file not found") from None
    except OSError as exc:
        raise TextError(f"{path}: cannot read it ({exc.strerror})") from exc
    if stat.S_ISDIR(mode):
        raise TextError(f"{path}: is a folder; give --text a UTF-8 text file")
    if not stat.S_ISREG(mode):
        raise TextError(f"{path}: is {kind(mode)}, not a regular file; give --text a UTF-8 text file")
    too_big = TextError(
        f"{path}: larger than {max_bytes / 1e6:.0f} MB; a run reads at most "
        f"{TEXT_MAX_STEPS * TEXT_BATCH_TOKENS / 1e6:.0f} M tokens, so give it the first part "
        f"(e.g. head -c {max_bytes // 10**6}M)"
    )
    if info.st_size > max_bytes:  # by its size, unread (a sparse file of 20 GB is one quick stat)
        raise too_big
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    parts, offset = [], 0
    try:
        with path.open("rb") as file:
            while chunk := file.read(2**20):
                if offset + len(chunk) > max_bytes:  # it grew since it was measured
                    raise too_big
                if b"\x00" in chunk:
                    raise TextError(
                        f"{path}: holds NUL bytes, so it is binary (or UTF-16) rather than UTF-8 text; save it as UTF-8"
                    )
                try:
                    parts.append(decoder.decode(chunk))
                except UnicodeDecodeError as exc:
                    raise TextError(
                        f"{path}: not UTF-8 text (byte 0x{chunk[exc.start]:02x} at offset {offset + exc.start:,} is "
                        "invalid there); save it as UTF-8"
                    ) from exc
                offset += len(chunk)
            parts.append(decoder.decode(b"", final=True))
    except UnicodeDecodeError as exc:  # the file ends inside a character
        raise TextError(f"{path}: not UTF-8 text (it ends inside a multi-byte character); save it as UTF-8") from exc
    except OSError as exc:
        raise TextError(f"{path}: cannot read it ({exc.strerror})") from exc
    text = "".join(parts)
    if not text.strip():
        raise TextError(f"{path}: holds no text (empty or only whitespace)")
    return text


def break_line(line: str, limit: int = MAX_LINE_CHARS) -> list[str]:
    """`line` in parts of at most `limit` characters, each cut at its last space (anywhere when it has none), the
    whitespace at a cut dropped. The line is walked by index and only the parts are copied, so the work is
    linear in its length: one 50 MB line (a file without line breaks) is no slower per character than many."""
    parts, start, end = [], 0, len(line)
    while end - start > limit:
        cut = line.rfind(" ", start + 1, start + limit + 1)
        cut = cut if cut > start else start + limit
        parts.append(line[start:cut])
        after = _NOT_SPACE.search(line, cut)
        start = after.start() if after else end
    return [*parts, line[start:]] if start < end else parts


def text_lines(text: str) -> list[str]:
    """The lm task's cleaning (normalized, no empty, control-character or repeated lines), long lines broken."""
    raw = text.splitlines()
    cleaned = clean_lm_lines(tqdm(raw, desc="cleaning", unit="line", mininterval=1, leave=False))
    return [part for line in cleaned for part in break_line(line)]


def split_text(lines: list[str], heldout_chars: int, seed: int = SPLIT_SEED) -> dict[str, list[str]]:
    """Test, then valid, take the lines of lowest hash until each holds `heldout_chars`; train keeps the rest.

    The hash is of a line's overlap key (training.data.lm): lines that differ only in case or punctuation share a
    split, so no held-out line is a copy of a training line. Every split keeps the file's order. Filling by size
    instead of lm.py's fixed fraction gives a small text its held-out lines too.
    """
    keys = [overlap_key(line) for line in lines]
    size: Counter[str] = Counter()
    for key, line in zip(keys, lines, strict=True):
        size[key] += len(line) + 1
    split_of, filled = {}, Counter()
    for key in sorted(size, key=lambda k: hashlib.sha256(f"{seed}\t{k}".encode()).digest()):
        split = next((s for s in ("test", "valid") if filled[s] < heldout_chars), "train")
        split_of[key], filled[split] = split, filled[split] + size[key]
    return {s: [line for key, line in zip(keys, lines, strict=True) if split_of[key] == s] for s in SPLITS}


def heldout_chars(total: int) -> int:
    """Characters in each of valid and test: lm.py's fraction (5 % down to 1 % of a large text), at least
    HELDOUT_MIN_CHARS."""
    return max(HELDOUT_MIN_CHARS, round(total * min(0.05, max(0.01, LM_HELDOUT_BYTES / total))))


def tokenizer_options(train: list[str]) -> dict[str, Any]:
    """Vocabulary sized to the text: the byte and special pieces, one piece per character the tokenizer must
    keep, and one learned piece per CHARS_PER_PIECE characters, at most LM_VOCAB in all unless the characters
    alone need more (sentencepiece may stop earlier: the limit is soft). A text of many distinct characters
    (Chinese: about 5,000 in a few pages) keeps those covering 99.95 % of it and spells the rest in bytes."""
    counts = Counter(ch for line in train for ch in line.replace(" ", "\u2581"))
    coverage = 1.0 if len(counts) <= MANY_CHARACTERS else 0.9995
    kept, covered, total = 0, 0, sum(counts.values())
    for n in sorted(counts.values(), reverse=True):  # as sentencepiece picks its required characters
        if covered >= coverage * total:
            break
        kept, covered = kept + 1, covered + n
    required = BYTE_AND_SPECIAL_PIECES + kept + 8  # a margin: sentencepiece counts its characters its own way
    learned = sum(len(line) for line in train) // CHARS_PER_PIECE
    return {"vocab_size": max(required, min(LM_VOCAB, required + learned)), "character_coverage": coverage}


def prompts_of(test: list[str]) -> list[str]:
    """The openings of the first PROMPT_COUNT test lines: half their words, at most PROMPT_WORDS (a line without
    spaces, as in Chinese: its first third)."""
    prompts = []
    for line in test[:PROMPT_COUNT]:
        words = line.split()
        prompts.append(
            " ".join(words[: min(PROMPT_WORDS, len(words) // 2)]) if len(words) > 1 else line[: -(-len(line) // 3)]
        )
    return prompts


def tokens_of(sp: spm.SentencePieceProcessor, lines: list[str], split: str, chunk: int = 10_000) -> int:
    """count_tokens over `lines`, a chunk at a time under a progress bar."""
    starts = tqdm(range(0, len(lines), chunk), desc=f"counting {split} tokens", unit="chunk", leave=False)
    return sum(count_tokens(sp, lines[i : i + chunk]) for i in starts)


def too_little(path: Path, what: str) -> TextError:
    return TextError(
        f"{path}: {what}; training needs at least {MIN_TEXT_CHARS:,} characters (about 1,700 words, four printed pages)"
    )


def prepare_text(
    path: Path, out_dir: Path, command: str, expected_tokenizer: str | None = None, min_valid_tokens: int = 0
) -> dict[str, Any]:
    """Write the lm task's prepared data for the text of `path` into `out_dir`; returns its sources.json.

    Everything is checked before `out_dir` is touched: `expected_tokenizer` (a sha256: the run being resumed) must
    be the tokenizer this text gives, else the text changed since that run; the valid split must hold at least
    `min_valid_tokens` (one window of training), which HELDOUT_MIN_CHARS makes sure of on any text seen so far.
    """
    text = read_text(path)
    lines = text_lines(text)
    total = sum(len(line) + 1 for line in lines)
    if total < MIN_TEXT_CHARS:
        raise too_little(path, f"{total:,} characters of text once blank and repeated lines are dropped")
    held = heldout_chars(total)
    splits = split_text(lines, held)
    if not splits["train"] or sum(len(line) + 1 for line in splits["train"]) < total // 3:
        raise too_little(path, f"too few distinct lines ({len(lines):,}) to hold some out for validation and test")
    with tempfile.TemporaryDirectory(prefix="atlas-text-") as tmp_name:
        tmp = Path(tmp_name)
        for split, items in splits.items():
            write_lines(tmp / f"{split}.txt", items)
        options = tokenizer_options(splits["train"])
        print(
            f"training a tokenizer of up to {options['vocab_size']:,} pieces on {len(splits['train']):,} lines …",
            file=sys.stderr,
        )
        model = train_tokenizer(
            [tmp / "train.txt"], tmp / "tokenizer", model_type="unigram", byte_fallback=True, hard_vocab_limit=False,
            **options,
        )  # fmt: skip
        sp = spm.SentencePieceProcessor(model_file=str(model))
        tokens = {split: tokens_of(sp, items, split) for split, items in splits.items()}
        source = {
            "name": path.name,
            "file": str(path),
            "sha256": sha256_file(path),
            "bytes": path.stat().st_size,
            "lines_in_file": len(text.splitlines()),
            "lines": len(lines),
            "words": sum(len(line.split()) for line in lines),
            "tokens": sum(tokens.values()),
            "dropped": "blank lines, lines with control characters and repeated lines (training.data.lm's cleaning); "
            f"lines over {MAX_LINE_CHARS:,} characters broken at a space",
            "license": "the user's own text",
        }
        write_manifest(tmp, "lm", SPLIT_SEED, [source], {s: [f"{s}.txt"] for s in splits})
        manifest = json.loads((tmp / "sources.json").read_text(encoding="utf-8"))
        for split in splits:
            manifest["splits"][split][f"{split}.txt"]["tokens"] = tokens[split]
        manifest.update(
            generated_by=command,
            split=f"valid and test: the lines of lowest sha256 of (seed, overlap key) until each holds {held:,} "
            "characters; train: the rest; each in the file's order",
            tokenizer_options=options,
            prompts=prompts_of(splits["test"]),  # the card's samples continue these; the app offers them as presets
        )
        if tokens["valid"] < min_valid_tokens:
            raise too_little(
                path, f"its valid split holds {tokens['valid']:,} tokens, under one {min_valid_tokens:,}-token window"
            )
        if expected_tokenizer and manifest["tokenizer"]["sha256"] != expected_tokenizer:
            raise TextError(
                f"{path}: gives another tokenizer than the run being resumed was trained with (the text changed "
                "since?); resume with the same text, or train afresh into a new --out"
            )
        (tmp / "sources.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8")
        write_lines(tmp / PROMPTS, manifest["prompts"])
        shutil.copytree(tmp, out_dir, dirs_exist_ok=True)
    return manifest
