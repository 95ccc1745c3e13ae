"""JSON files read defensively: deep nesting, size, bad bytes and bad JSON are one error naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.catalog import list_checkpoints
from inference.jsonfile import JsonFileError, nesting_depth, read_json


def test_nesting_depth_counts_brackets_outside_strings_only() -> None:
    assert nesting_depth('{"a": [1, {"b": "[[[[{{"}]}') == 3
    assert nesting_depth('"\\"[" ') == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[" * 50_000 + b"]" * 50_000, "nested 50000 levels deep"),
        (b'{"a": \xff}', "not UTF-8"),
        (b'{"a": }', "not valid JSON"),
    ],
)
def test_a_bad_json_file_is_a_json_file_error_naming_it(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(content)
    with pytest.raises(JsonFileError, match=message) as caught:
        read_json(path)
    assert str(path) in str(caught.value)


def test_an_oversized_json_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "card.json"
    path.write_bytes(b'{"a": "' + b"x" * 3 * 2**20 + b'"}')
    with pytest.raises(JsonFileError, match="3 MB, more than the 1 MB"):
        read_json(path, max_bytes=2**20)


def test_a_published_folder_with_a_hostile_config_is_listed_with_its_error(tmp_path: Path) -> None:
    folder = tmp_path / "bert-deep"
    folder.mkdir()
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "model.safetensors").write_bytes(b"")
    (folder / "tokenizer.json").write_text("{}")
    [entry] = list_checkpoints(tmp_path, packages=False)
    assert not entry.ok and "nested 100000 levels deep" in entry.error
