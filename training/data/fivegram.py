"""Task fivegram: the centre word of a 5-gram from the four words around it, as seed 003's students predicted it.

Every run of five consecutive words in one document of the lm task's text (OUT/lm/{train,valid,test}.txt, so
valid and test hold whole documents that train never saw) whose centre word is in the vocabulary is one example,
written as its five words on one line. The vocabulary is the FIVEGRAM_WORDS most frequent words of the lm task's
training text, lower-cased runs of letters (training.data.induction.common_words: the induction task's list), one
sentencepiece piece per word (its word model); a context word outside it reads as `<unk>`, and 5-grams whose
centre word is outside it are left out (a model cannot name a word it has no row for).

The tokenizer does no normalisation of its own (sentencepiece's "identity" rule: its file then holds no
normalisation table, a tenth of the size): :func:`words` lower-cases a text and keeps its runs of letters before
any encoding, here and in the app (inference.text.words), so "The cat sat." reads as "the cat sat".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from inference.text import words
from training.data.common import SourceError, sha256_file, train_tokenizer, write_lines, write_manifest
from training.data.induction import LM_DATA, common_words, prepare_lm_first

FIVEGRAM_WORDS = 2000
CONTEXT = 2  # words on each side of the centre word


def fivegrams(line: str, vocabulary: set[str]) -> Iterator[list[str]]:
    """Each window of 2·CONTEXT + 1 consecutive words of `line` whose centre word is in `vocabulary`."""
    found = words(line)
    width = 2 * CONTEXT + 1
    for start in range(len(found) - width + 1):
        window = found[start : start + width]
        if window[CONTEXT] in vocabulary:
            yield window


def prepare_fivegram(out_dir: Path, seed: int, lm: Path = LM_DATA) -> None:
    """Write the word tokenizer, the 5-grams of each split (one per line) and the manifest, from the lm task
    prepared into the folder `lm`."""
    source, manifest = lm, lm / "sources.json"
    if not manifest.is_file():
        raise SourceError(f"{manifest}: not found; {prepare_lm_first(lm)}")
    vocabulary = common_words(source / "train.txt", FIVEGRAM_WORDS)
    # sentencepiece's word model keeps the most frequent words: each written as often as its rank is high gives
    # every one a distinct count, so the vocabulary is exactly the list (as training.data.induction does)
    corpus = out_dir / "words.txt"
    write_lines(corpus, _ranked_lines(vocabulary))
    train_tokenizer(
        [corpus], out_dir / "tokenizer", vocab_size=len(vocabulary) + 4, model_type="word",
        normalization_rule_name="identity",
    )  # fmt: skip
    corpus.unlink()
    known = set(vocabulary)
    counts: dict[str, str] = {}
    for split in ("train", "valid", "test"):
        with (source / f"{split}.txt").open(encoding="utf-8") as f:
            grams = (" ".join(g) for line in f for g in fivegrams(line, known))
            write_lines(out_dir / f"{split}.txt", grams)
        counts[split] = sha256_file(source / f"{split}.txt")
    lm = json.loads(manifest.read_text(encoding="utf-8"))
    sources = [
        {
            "name": "5-grams of the lm task's documents (train/valid/test as there): every 5 consecutive words of a "
            f"document whose centre word is one of the {len(vocabulary)} most frequent words of its training text",
            "obtained_from": ", ".join(f"{source}/{s}.txt (sha256 {sha})" for s, sha in counts.items()),
            "license": "as each source of the lm task, listed below",
        },
        *lm["sources"],
    ]
    write_manifest(out_dir, "fivegram", seed, sources, {s: [f"{s}.txt"] for s in ("train", "valid", "test")})


def _ranked_lines(vocabulary: list[str]) -> Iterator[str]:
    """Word `r` (0 = most frequent) written len(vocabulary) − r times, at most 100 to a line (sentencepiece skips
    lines longer than its max_sentence_length)."""
    total = len(vocabulary)
    for rank, word in enumerate(vocabulary):
        left = total - rank
        while left > 0:
            n = min(100, left)
            yield " ".join([word] * n)
            left -= n
