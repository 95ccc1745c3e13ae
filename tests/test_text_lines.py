"""`atlas train --text` on a file without line breaks: its one long line is broken at spaces into parts the
tokenizer reads, in work linear in its length (a 50 MB line: bench figure in the commit, no timing here)."""

from __future__ import annotations

import random

import pytest

from training.data.text import MAX_LINE_CHARS, break_line, text_lines


def reference(line: str, limit: int) -> list[str]:
    """The rule, written plainly (and quadratically): cut at the last space within `limit`, drop the whitespace."""
    parts = []
    while len(line) > limit:
        cut = line.rfind(" ", 0, limit + 1)
        cut = cut if cut > 0 else limit
        parts.append(line[:cut])
        line = line[cut:].lstrip()
    return [*parts, line] if line else parts


def random_line(rng: random.Random, length: int) -> str:
    """Words of 1-30 letters, a long word now and then, between runs of one to three kinds of whitespace."""
    pieces = []
    while sum(map(len, pieces)) < length:
        pieces.append("x" * rng.choice([rng.randint(1, 30), rng.randint(1, 30), rng.randint(40, 120)]))
        pieces.append("".join(rng.choices([" ", " ", " ", "\t", "\u00a0", "\u2003"], k=rng.randint(1, 3))))
    return "".join(pieces)[:length]


@pytest.mark.parametrize("seed", range(20))
def test_a_long_line_breaks_as_the_plain_rule_says(seed: int) -> None:
    rng = random.Random(seed)
    line = random_line(rng, rng.randint(0, 3000))
    limit = rng.choice([1, 2, 7, 50, 100])
    assert break_line(line, limit) == reference(line, limit)


def test_a_line_without_spaces_is_cut_every_limit_characters() -> None:
    assert break_line("abcdefghij", 3) == ["abc", "def", "ghi", "j"]


def test_a_line_of_ten_megabytes_keeps_every_word_in_parts_the_tokenizer_reads() -> None:
    words = random.Random(0).choices(["the", "cat", "sat", "on", "a", "mat"], k=3_000_000)
    for i in range(0, len(words), 100_000):
        words[i] = "x" * 2500  # longer than a part: cut inside the word
    line = " ".join(words)
    parts = break_line(line)
    assert len(line) > 10_000_000 and all(0 < len(part) <= MAX_LINE_CHARS for part in parts)
    assert "".join(" ".join(parts).split()) == "".join(words), "nothing lost, nothing added but cuts in long words"


class Counted(str):
    """A string that counts the characters of every copy made from it (and its copies count too)."""

    copied = 0

    def __getitem__(self, key):  # type: ignore[override]
        part = super().__getitem__(key)
        Counted.copied += len(part)
        return Counted(part)

    def lstrip(self, chars=None):  # type: ignore[override]
        part = super().lstrip(chars)
        Counted.copied += len(part)
        return Counted(part)


def test_breaking_a_long_line_copies_each_character_about_once() -> None:
    line = Counted("the cat sat on the mat " * 20_000)  # 460,000 characters, 230 parts
    Counted.copied = 0
    parts = break_line(line)
    assert len(parts) > 200
    assert Counted.copied <= 2 * len(line), f"{Counted.copied:,} characters copied for a {len(line):,} line"


def test_a_text_of_one_long_line_becomes_lines_of_the_tokenizers_length() -> None:
    line = "The cat sat on the mat. " * 10_000
    lines = text_lines(line)
    assert len(lines) > 100 and all(len(part) <= MAX_LINE_CHARS for part in lines)
    assert " ".join(lines) == line.strip()
