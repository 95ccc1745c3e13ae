"""The everyday sentences kept for judging the translator by hand (unseen_en_de.tsv; `python -m training.unseen`).

Their English is held out of the translator's training data as the app's presets are (training.data.translate).
"""

from __future__ import annotations

from pathlib import Path

SENTENCES = Path(__file__).with_name("unseen_en_de.tsv")


def read_sentences(path: Path = SENTENCES) -> list[tuple[str, str, str]]:
    """(set, English, reference) for each line that is not a comment; a malformed line is an error, not skipped."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 3 or not all(f.strip() for f in fields):
            raise ValueError(f"{path}:{number}: want three tab-separated fields (set, English, German)")
        rows.append((fields[0].strip(), fields[1].strip(), fields[2].strip()))
    return rows


def english_sentences(path: Path = SENTENCES) -> list[str]:
    """The English side, which the data preparation holds out of training."""
    return [en for _, en, _ in read_sentences(path)]
