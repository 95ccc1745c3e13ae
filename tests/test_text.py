"""The text → tokens policy (inference/text.py): what clean_text keeps, replaces, removes and refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.text import MAX_CHARS, InputError, clean_text


@pytest.mark.parametrize("text", ["", " ", "   \t\n  ", "\x00\x01\x1b", " \x07 "])
def test_clean_text_rejects_empty_or_whitespace_text(text: str) -> None:
    with pytest.raises(InputError, match="empty"):
        clean_text(text)


def test_clean_text_rejects_what_is_not_a_string() -> None:
    with pytest.raises(InputError, match="int"):
        clean_text(42)


def test_clean_text_removes_control_characters_with_a_note() -> None:
    result = clean_text("Hello\x00 wor\x1bld\x7f!")
    assert result.text == "Hello world!"
    assert len(result.notes) == 1 and "3 control character" in result.notes[0]


def test_clean_text_keeps_plain_text_without_notes_and_collapses_whitespace() -> None:
    assert clean_text("  Die\tKatze\n sitzt.  ") == clean_text("Die Katze sitzt.")
    assert clean_text("Die Katze sitzt.").notes == ()
    assert clean_text("Cafe\u0301").text == "Caf\u00e9"  # NFC


def test_clean_text_cuts_very_long_text_with_a_note() -> None:
    result = clean_text("ab " * MAX_CHARS)
    assert len(result.text) <= MAX_CHARS
    assert result.text.startswith("ab ab")
    assert any(f"{MAX_CHARS:,}" in note for note in result.notes)


@pytest.mark.parametrize(
    ("text", "expected", "count"),
    [
        ("\udcff", "\ufffd", 1),
        ("abc\ud800def", "abc\ufffddef", 1),
        ("smile \ud83d please \udc00", "smile \ufffd please \ufffd", 2),
        (b"caf\xe9 cr\xe8me".decode("utf-8", "surrogateescape"), "caf\ufffd cr\ufffdme", 2),
    ],
)
def test_lone_surrogates_are_replaced_by_the_replacement_character_and_said(text: str, expected: str, count: int):
    """A lone UTF-16 surrogate is not text (a browser never sends one; a JSON escape can): it becomes U+FFFD,
    the rest of the text is kept, and a note says how many were replaced."""
    result = clean_text(text)
    assert result.text == expected
    assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in result.text)
    assert any(f"{count} invalid character(s)" in note and "\ufffd" in note for note in result.notes), result.notes


def test_characters_outside_the_vocabulary_are_named_with_what_the_model_reads_instead() -> None:
    from pathlib import Path

    from inference.checkpoint import load_checkpoint
    from inference.text import outside_vocabulary, vocabulary_note

    shipped = Path(__file__).resolve().parents[1] / "checkpoints"
    lm = load_checkpoint(shipped / "lm-english").tokenizer
    assert outside_vocabulary(lm, "The cat sat on the mat.") == {}
    assert vocabulary_note("lm-english", {}) is None
    found = outside_vocabulary(lm, "I like 中文 and 😀, 中文!")
    assert found == {"bytes": ("中", "文", "😀")}  # each named once, in order, spaces and ASCII left out
    note = vocabulary_note("lm-english", found)
    assert note.startswith("3 character(s) are not in lm-english's vocabulary: 中 文 😀.") and "<0xE4>" in note
    reverse = load_checkpoint(shipped / "reverse").tokenizer  # the alphabet a-p: anything else is <unk>
    assert outside_vocabulary(reverse, "abcxyz") == {"unk": ("x", "y", "z")}
    assert "the unknown token <unk>" in vocabulary_note("reverse", outside_vocabulary(reverse, "abcxyz"))


def test_a_whole_word_vocabulary_names_the_words_it_does_not_know() -> None:
    from inference.checkpoint import load_checkpoint
    from inference.text import outside_vocabulary, vocabulary_note

    words = load_checkpoint(Path(__file__).resolve().parents[1] / "checkpoints" / "induction").tokenizer
    assert words.whole_words
    assert outside_vocabulary(words, "the old man went down to the river") == {}
    found = outside_vocabulary(words, "The cat sat on the mat. the cat")
    assert found == {"unk": ("cat", "mat.")}
    assert "2 word(s) are not in induction's vocabulary: cat mat." in vocabulary_note("induction", found)
