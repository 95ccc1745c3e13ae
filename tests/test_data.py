"""Tests for the pure parsing/cleaning helpers in ``training.data`` (no network, no apt)."""

from __future__ import annotations

import pytest

from training.data import lm, reverse, translate


def test_clean_ding_text_strips_annotations_and_slash_variants() -> None:
    raw = "Ich mache mir Sorge/Besorgnis {f} [ugs.] (um jdn.) <Sorgen> um ihn."
    assert translate.clean_ding_text(raw) == "Ich mache mir Sorge um ihn."
    assert translate.clean_ding_text("That\u2019s  beneath him .") == "That's beneath him."


def test_parse_ding_line_aligns_subentries_and_filters_sentences() -> None:
    line = (
        "Stolz {m} | verletzter Stolz | Ich bin stolz auf meine Arbeit.; Ich bin stolz. | Mach das/dies! "
        ":: pride | wounded pride | I am proud of my work.; I'm proud. | Do this/that!\n"
    )
    assert translate.parse_ding_line(line) == [("I am proud of my work.", "Ich bin stolz auf meine Arbeit.")]


@pytest.mark.parametrize(
    "line",
    [
        "# Version :: devel 2023-01-30",
        "Abfluss {m} :: outflow",
        "a | b :: only one side",
        "Es war von Anfang an / von vornherein klar. :: It was clear from the start / beginning.",
        "Er hat es etw. gegeben. :: He gave sth. to him.",
        "Und so weiter ... :: And so on and so forth...",
    ],
)
def test_parse_ding_line_rejects(line: str) -> None:
    assert translate.parse_ding_line(line) == []


def test_extract_ding_pairs_dedupes_by_english() -> None:
    lines = [
        "Das ist gut. :: That is good.",
        "Das ist fein. :: That is good.",
        "Er lacht laut. :: He laughs loudly.",
    ]
    assert translate.extract_ding_pairs(lines) == [
        ("That is good.", "Das ist gut."),
        ("He laughs loudly.", "Er lacht laut."),
    ]


def test_brown_line_to_text() -> None:
    line = (
        "\t``/`` Only/rb a/at handful/nn ''/'' ,/, the/at jury/nn said/vbd ,/, ``/`` considering/in "
        "(/( the/at size/nn )/) ''/'' ./."
    )
    assert lm.brown_line_to_text(line) == '"Only a handful", the jury said, "considering (the size)".'


def test_austen_paragraphs_joins_lines_and_drops_front_matter() -> None:
    lines = [
        "EMMA",
        "",
        "By Jane Austen",
        "",
        "CHAPTER I",
        "",
        "Emma Woodhouse, handsome,",
        "clever.",
        "",
        None,
        "",
        "Chapter 2",
        "",
        '"Yes."',
        "",
        "Finis",
        "",
    ]
    assert lm.austen_paragraphs(lines) == ["Emma Woodhouse, handsome, clever.", '"Yes."']


def test_wordnet_examples() -> None:
    line = (
        '00003993 03 n 01 congener 0 001 @ 00003553 n 0000 | a whole of the same kind; "lard was used , '
        'though butter was more frequent"; "the shopkeeper differs from his congener"  \n'
    )
    assert lm.wordnet_examples(line) == [
        "lard was used, though butter was more frequent",
        "the shopkeeper differs from his congener",
    ]
    assert lm.wordnet_examples('  1 This software and "database" is provided') == []


def test_clean_lm_lines() -> None:
    lines = ["  a\u00a0b  ", "", "a b", "bad\x07line", "caf\u0065\u0301"]
    assert list(lm.clean_lm_lines(lines)) == ["a b", "caf\u00e9"]


def test_split_of_is_deterministic_and_roughly_proportional() -> None:
    lines = [f"line {i}" for i in range(5000)]
    first = [lm.split_of(line, 0, 0.1) for line in lines]
    assert first == [lm.split_of(line, 0, 0.1) for line in lines]
    assert 350 < first.count("test") < 650 and 350 < first.count("valid") < 650


def test_make_reverse_splits_disjoint_and_deterministic() -> None:
    sizes = {"train": 500, "valid": 50, "test": 50}
    splits = reverse.make_reverse_splits(3, sizes)
    assert splits == reverse.make_reverse_splits(3, sizes)
    assert {k: len(v) for k, v in splits.items()} == sizes
    assert not set(splits["train"]) & (set(splits["valid"]) | set(splits["test"]))
    assert not set(splits["valid"]) & set(splits["test"])
    assert all(set(s) <= set(reverse.REVERSE_ALPHABET) and 1 <= len(s) <= 24 for v in splits.values() for s in v)
