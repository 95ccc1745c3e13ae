"""Custom patterns in a corpus run (`python -m atlas corpus … --pattern NAME=SOURCE`, atlas.corpus(patterns=…);
analysis.corpus.patterns): each head's score for one equals detect_heads' for the same function on the same texts,
a custom copy of a built-in pattern scores as the built-in one, a stopped run resumes to one run's files, a changed
pattern file is another corpus, and each way a pattern is wrong is one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_corpus import READ, TEXTS, _one_line_error, _tables

import atlas
from analysis.corpus.run import Settings, run_corpus
from analysis.corpus.texts import CorpusError
from atlas.cli import main

SMALL = Settings(batch=3, shard=3, top_k=4, sample=16)

PATTERNS_PY = """
import numpy as np


def previous(pieces):
    n = len(pieces)
    pattern = np.zeros((n, n))
    pattern[np.arange(1, n), np.arange(n - 1)] = 1
    return pattern


def two_back(pieces):
    n = len(pieces)
    pattern = np.zeros((n, n))
    pattern[np.arange(2, n), np.arange(n - 2)] = 1
    return pattern


def same_word(pieces):
    words = [p.lstrip("\u2581").lower() for p in pieces]
    return [[0.5 if j < i and words[j] == words[i] else 0.0 for j in range(len(pieces))] for i in range(len(pieces))]
"""


def two_back(pieces: list[str]) -> np.ndarray:
    n = len(pieces)
    pattern = np.zeros((n, n))
    pattern[np.arange(2, n), np.arange(n - 2)] = 1
    return pattern


@pytest.fixture(scope="module")
def induction():
    return atlas.load("induction")


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("texts") / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def module_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("code") / "patterns.py"
    path.write_text(PATTERNS_PY, encoding="utf-8")
    return path


def specs(path: Path) -> list[str]:
    return [f"{name}={path}:{name}" for name in ("previous", "two_back", "same_word")]


@pytest.fixture(scope="module")
def made(induction, texts: Path, module_file: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("corpus") / "out"
    run_corpus(induction, texts, out, SMALL, progress=False, patterns=specs(module_file))
    return atlas.open_corpus(out)


def _loaded(module_file: Path):
    from analysis.corpus.patterns import parse

    return {name: parse(f"{name}={module_file}:{name}").function for name in ("previous", "two_back", "same_word")}


def test_a_custom_patterns_scores_equal_detect_heads_with_its_function(induction, made, module_file: Path) -> None:
    heads = made.heads.set_index(["layer", "head"])
    for name, function in _loaded(module_file).items():
        expected = atlas.detect_heads(induction, READ, function).set_index(["layer", "head"])["score"]
        got = heads[name].reindex(expected.index)
        np.testing.assert_allclose(got.to_numpy(), expected.to_numpy(), atol=1e-5)
        assert expected.max() > 0.01  # the texts give each pattern something to find
    np.testing.assert_allclose(heads["previous"], heads["previous_token"], atol=1e-6)  # the built-in, written out
    assert not np.allclose(heads["two_back"], heads["previous_token"], atol=1e-2)


def test_the_profile_lists_custom_scores_after_the_built_in_ones_and_sql_reads_them(made, module_file: Path) -> None:
    scores = made.manifest["scores"]
    assert scores[:5] == ["previous_token", "first_token", "current_token", "same_token", "induction"]
    assert scores[5:] == ["previous", "two_back", "same_word", "entropy"]
    assert list(made.heads.columns) == ["attention", "layer", "head", *scores]
    kept = made.manifest["identity"]["patterns"]
    assert [p["source"] for p in kept] == [f"{module_file}:{n}" for n in ("previous", "two_back", "same_word")]
    per_text = made.sql("SELECT avg(two_back) AS m FROM text_heads WHERE layer = 2 AND head = 1")["m"][0]
    assert per_text == pytest.approx(made.heads.set_index(["layer", "head"]).loc[(2, 1), "two_back"])


def test_a_function_given_as_is_scores_as_its_file(induction, texts: Path, made, tmp_path: Path) -> None:
    given = atlas.corpus(
        induction, texts, tmp_path / "given", batch=3, shard=3, top_k=4, sample=16, progress=False,
        patterns={"two_back": two_back},
    )  # fmt: skip
    np.testing.assert_allclose(given.heads["two_back"], made.heads["two_back"], atol=1e-7)
    assert given.manifest["identity"]["patterns"][0]["source"] == f"{__name__}:two_back"  # Ray's workers import it


def test_a_stopped_run_with_patterns_resumes_to_one_runs_files(induction, texts: Path, module_file, made, tmp_path):
    parts = tmp_path / "parts"
    run_corpus(induction, texts, parts, SMALL, progress=False, max_shards=1, patterns=specs(module_file))
    run_corpus(induction, texts, parts, SMALL, progress=False, patterns=specs(module_file))
    expected, got = _tables(made.path), _tables(parts)
    assert list(got) == list(expected)
    for name, frame in expected.items():
        pd.testing.assert_frame_equal(got[name], frame, check_exact=True)
    assert json.loads((parts / "manifest.json").read_text()) == json.loads((made.path / "manifest.json").read_text())


def test_a_changed_pattern_file_is_another_corpus(induction, texts: Path, tmp_path: Path, capsys) -> None:
    code = tmp_path / "mine.py"
    code.write_text(PATTERNS_PY, encoding="utf-8")
    out = tmp_path / "o"
    argv = ["corpus", "induction", str(texts), "--out", str(out), "--shard", "3", "-q"]
    assert main([*argv, "--pattern", f"back={code}:two_back"]) == 0
    capsys.readouterr()
    assert main([*argv, "--pattern", f"back={code}:two_back"]) == 0  # done: the same run says so again
    code.write_text(PATTERNS_PY + "\n# changed\n", encoding="utf-8")
    err = _one_line_error(capsys, [*argv, "--pattern", f"back={code}:two_back"])
    assert "holds another corpus" in err and "patterns" in err
    err = _one_line_error(capsys, argv)  # without the pattern: another corpus too
    assert "holds another corpus" in err


BAD = {
    "no equals sign": ("{code}:two_back", "write NAME=MODULE:FUNCTION"),
    "no function": ("back={code}", "write NAME=MODULE:FUNCTION"),
    "a capital in the name": ("Back={code}:two_back", "is not a pattern name"),
    "a built-in score's name": ("induction={code}:two_back", "a column of the corpus's own"),
    "a table's own column": ("layer={code}:two_back", "a column of the corpus's own"),
    "a missing file": ("back={missing}:two_back", "no such file"),
    "a file that fails": ("back={broken}:f", "fails to run: ZeroDivisionError"),
    "a missing module": ("back=no_such_module_anywhere:f", "cannot import no_such_module_anywhere"),
    "a missing function": ("back={code}:nothing", "has no 'nothing'"),
    "not a function": ("back={code}:np", "'np' is not a function"),
    "raises on a text": ("back={code}:raises", "on text 1: the function raised KeyError"),
    "the wrong shape": ("back={code}:square", "returned shape (3, 3)"),
    "not an array": ("back={code}:words", "returned dict"),
    "outside 0 to 1": ("back={code}:twos", "values outside 0 to 1"),
    "NaN": ("back={code}:nan", "values outside 0 to 1 (or NaN)"),
}
BAD_PY = """
import numpy as np


def raises(pieces):
    return {}["missing"]


def square(pieces):
    return np.zeros((3, 3))


def words(pieces):
    return {"a": 1}


def twos(pieces):
    return np.full((len(pieces), len(pieces)), 2.0)


def nan(pieces):
    return np.full((len(pieces), len(pieces)), np.nan)
"""


@pytest.mark.parametrize("case", list(BAD))
def test_each_way_a_pattern_is_wrong_is_one_line(case: str, texts: Path, tmp_path: Path, capsys) -> None:
    code, broken = tmp_path / "code.py", tmp_path / "broken.py"
    code.write_text(BAD_PY, encoding="utf-8")
    broken.write_text("x = 1 / 0\n", encoding="utf-8")
    spec, says = BAD[case]
    spec = spec.format(code=code, broken=broken, missing=tmp_path / "missing.py")
    argv = ["corpus", "induction", str(texts), "--out", str(tmp_path / "o"), "--pattern", spec, "-q"]
    err = _one_line_error(capsys, argv)
    assert says in err, err


def test_one_name_twice_is_one_line(texts: Path, module_file: Path, tmp_path: Path, capsys) -> None:
    twice = ["--pattern", f"a={module_file}:previous", "--pattern", f"a={module_file}:two_back"]
    err = _one_line_error(capsys, ["corpus", "induction", str(texts), "--out", str(tmp_path / "o"), *twice])
    assert "'a' is named twice" in err


def test_a_function_only_this_process_has_cannot_go_to_ray(induction, texts: Path, tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="'mine' is a function only this process has"):
        atlas.corpus(induction, texts, tmp_path / "o", progress=False, ray="", patterns={"mine": lambda p: 0})
