"""Task induction: runs of random words, repeated — the setting in which Olsson et al. (2022) watched induction
heads form.

A sequence is `<s>`, then a run of `length` words drawn uniformly from a vocabulary of common English words, then
the same run again. The first copy cannot be predicted; the second can, word for word, by a model that finds the
earlier occurrence of the current word and copies the word that followed it. Training sequences are drawn on the
fly from the run's seed (training.batches.induction_batches); valid and test are fixed files of such sequences.

The vocabulary is the INDUCTION_WORDS most frequent words of the lm task's training text (OUT/lm/train.txt), one
piece per word (sentencepiece's word model), case-folded: a student can type any text of common words and watch
the model copy it. A word outside the list, or one with punctuation attached ("mat."), is `<unk>`.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

from training.data.common import SourceError, sha256_file, train_tokenizer, write_lines, write_manifest

INDUCTION_WORDS = 2000
INDUCTION_SIZES = {"valid": 500, "test": 500}
SHORTEST_RUN, LONGEST_RUN = 8, 50  # words in one copy; the sequence is <s> + 2 runs, at most 101 tokens
LM_DATA = Path("data/lm")  # the lm task's prepared folder, where `prepare --out` leaves it by default
_WORD = re.compile(r"[a-z]+")


def common_words(text: Path, count: int = INDUCTION_WORDS) -> list[str]:
    """The `count` most frequent words (runs of ASCII letters, lower-cased) of a text, most frequent first."""
    if not text.is_file():
        raise SourceError(f"{text}: not found; {prepare_lm_first(text.parent)}")
    counts: Counter[str] = Counter()
    with text.open(encoding="utf-8") as f:
        for line in f:
            counts.update(_WORD.findall(line.lower()))
    words = [word for word, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
    if len(words) < count:
        raise SourceError(f"{text} has only {len(words)} different words, fewer than {count}")
    return words[:count]


def prepare_lm_first(lm: Path) -> str:
    """What to run when the lm task's folder `lm` (OUT/lm) is not prepared: the same --out."""
    out = "" if lm.parent == LM_DATA.parent else f" --out {lm.parent}"
    return f"run `python -m atlas prepare lm{out}` first"


def random_run(rng: random.Random, n_words: int, shortest: int = SHORTEST_RUN, longest: int = LONGEST_RUN) -> list[int]:
    """Word indices of one run: a length in [shortest, longest], each word uniform over the vocabulary."""
    return [rng.randrange(n_words) for _ in range(rng.randint(shortest, longest))]


def _chunks(total: int, size: int) -> list[int]:
    return [size] * (total // size) + ([total % size] if total % size else [])


def prepare_induction(out_dir: Path, seed: int, lm: Path = LM_DATA) -> None:
    """Write the word tokenizer, the valid and test sequences (one per line, the run twice) and the manifest; the
    words are those of the lm task prepared into the folder `lm`."""
    source = lm / "train.txt"
    words = common_words(source)
    # sentencepiece's word model keeps the most frequent words: each word written as often as its rank is high
    # gives every one of them a distinct count, so the vocabulary is exactly the list
    corpus = out_dir / "words.txt"
    lines = (" ".join([word] * n) for rank, word in enumerate(words) for n in _chunks(len(words) - rank, 100))
    write_lines(corpus, lines)  # 100 to a line: sentencepiece skips lines over its max_sentence_length
    train_tokenizer(
        [corpus],
        out_dir / "tokenizer",
        vocab_size=len(words) + 4,
        model_type="word",
        normalization_rule_name="nmt_nfkc_cf",  # case-folded: "The" is "the"
    )
    corpus.unlink()
    rng = random.Random(seed)
    for split, size in INDUCTION_SIZES.items():
        runs = [random_run(rng, len(words)) for _ in range(size)]
        write_lines(out_dir / f"{split}.txt", (" ".join(words[i] for i in run + run) for run in runs))
    write_lines(out_dir / "train.txt", [])  # training sequences are drawn on the fly from the run's seed
    info = {
        "name": f"runs of random words, each repeated once: {SHORTEST_RUN}-{LONGEST_RUN} words drawn uniformly from "
        f"the {len(words)} most frequent words of the lm task's training text",
        "obtained_from": f"{source} (sha256 {sha256_file(source)}), synthetic sequences seeded by --seed",
        "license": "synthetic; the word list is a list of common English words",
    }
    write_manifest(out_dir, "induction", seed, [info], {s: [f"{s}.txt"] for s in ("train", "valid", "test")})
