"""training.unseen: the sentences kept for judging the translator by hand, and the check that none is in its data."""

from __future__ import annotations

from pathlib import Path

import pytest

from training import unseen
from training.data.unseen import read_sentences


def test_the_judged_sentences_are_two_sets_of_sixteen_with_references() -> None:
    rows = read_sentences()
    assert [name for name, _, _ in rows].count("stop55") == 16
    assert [name for name, _, _ in rows].count("stop60") == 16
    assert len({en for _, en, _ in rows}) == 32


def test_a_malformed_line_is_an_error_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "s.tsv"
    path.write_text("# comment\nset\tEnglish.\tDeutsch.\nset\tonly two\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"s\.tsv:3: want three"):
        read_sentences(path)


def test_a_sentence_in_the_training_data_is_named_on_either_side(tmp_path: Path) -> None:
    (tmp_path / "train.src").write_text("The dog sleeps under the bed!\nSomething else.\n", encoding="utf-8")
    (tmp_path / "train.tgt").write_text("Der Hund.\nWir brauchen mehr Stühle für die Gäste\n", encoding="utf-8")
    rows = [
        ("a", "The dog sleeps under the bed.", "Der Hund schläft unter dem Bett."),
        ("a", "We need more chairs.", "Wir brauchen mehr Stühle für die Gäste."),
        ("a", "The shop opens at nine.", "Das Geschäft öffnet um neun."),
    ]
    assert unseen.in_training(rows, tmp_path) == [True, True, False]


def _data(folder: Path, english: str = "Something else.\n", german: str = "Etwas anderes.\n") -> Path:
    (folder / "train.src").write_text(english, encoding="utf-8")
    (folder / "train.tgt").write_text(german, encoding="utf-8")
    return folder


def test_the_command_refuses_a_model_that_is_not_a_translator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert unseen.main(["checkpoints/lm-english", "--data", str(_data(tmp_path))]) == 2
    assert "not a translator" in capsys.readouterr().err


def test_without_prepared_data_the_command_says_what_to_prepare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert unseen.main(["checkpoints/translate-en-de", "--data", str(tmp_path / "translate")]) == 2
    assert "prepare translate" in capsys.readouterr().err


def test_the_command_prints_the_apps_output_the_reference_and_what_was_seen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sentences = tmp_path / "s.tsv"
    sentences.write_text(
        "a\tWhere is the train station?\tWo ist der Bahnhof?\nb\tThe cat sat on the mat.\tDie Katze saß.\n",
        encoding="utf-8",
    )
    data = _data(tmp_path, "The cat sat on the mat\n")
    args = ["checkpoints/translate-en-de", "--sentences", str(sentences), "--data", str(data)]
    assert unseen.main(args) == 0
    out, err = capsys.readouterr()
    assert "= app (beam 4): Wo ist der Bahnhof?" in out and "reference:    Die Katze saß." in out
    assert "b  IN TRAINING The cat sat on the mat." in out and "1 of 2 in the training data" in err
    assert unseen.main([*args, "--set", "a", "--json"]) == 0
    assert capsys.readouterr().out.count("\n") == 1
