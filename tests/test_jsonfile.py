"""JSON files read defensively: deep nesting, size, bad bytes and bad JSON are one error naming the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from inference.catalog import list_checkpoints
from inference.jsonfile import JsonFileError, nesting_depth, read_json
from training.tiny import make_tiny_checkpoint


def test_nesting_depth_counts_brackets_outside_strings_only() -> None:
    assert nesting_depth('{"a": [1, {"b": "[[[[{{"}]}') == 3
    assert nesting_depth('"\\"[" ') == 0


def depth_by_hand(text: str) -> int:
    """The rule, one character at a time: what nesting_depth computes without a Python loop."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


@pytest.mark.parametrize("chunk", [3, 2**20])
def test_nesting_depth_equals_the_rule_by_hand_on_random_texts(chunk: int, monkeypatch) -> None:
    import random

    import inference.jsonfile as jsonfile

    monkeypatch.setattr(jsonfile, "_CHUNK", chunk)  # 3: the running depth is carried across the chunks
    rng = random.Random(0)
    alphabet = '[[[{{]]}}"\\ ab\nü€'
    texts = ["", "[", '"', '"[', "\\[", *("".join(rng.choices(alphabet, k=rng.randint(0, 40))) for _ in range(3000))]
    for text in texts:
        assert nesting_depth(text) == depth_by_hand(text), repr(text)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[" * 50_000 + b"]" * 50_000, "nested 50000 levels deep"),
        (b'{"a": \xff}', "not UTF-8"),
        (b'{"a": }', "not valid JSON"),
        (b'{"d_model": ' + b"9" * 5000 + b"}", "holds an integer of 5000 digits; no setting here needs one"),
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
    with pytest.raises(JsonFileError, match="3.0 MB, more than the 1.0 MB allowed"):
        read_json(path, max_bytes=2**20)


def test_a_published_folder_with_a_hostile_config_is_listed_with_its_error(tmp_path: Path) -> None:
    folder = tmp_path / "bert-deep"
    folder.mkdir()
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "model.safetensors").write_bytes(b"")
    (folder / "tokenizer.json").write_text("{}")
    [entry] = list_checkpoints(tmp_path, packages=False)
    assert not entry.ok and "nested 100000 levels deep" in entry.error


@pytest.mark.parametrize("special", ["fifo", "device"])
def test_a_special_file_named_config_json_is_refused_without_being_read(tmp_path: Path, special: str) -> None:
    """A FIFO would block the reader (every page) for ever; a link to /dev/zero would be read without end."""
    path = tmp_path / "config.json"
    if special == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    with pytest.raises(JsonFileError, match="not a regular file") as caught:
        read_json(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("damage", ["digits", "fifo", "device", "card-digits"])
def test_one_broken_checkpoint_is_one_line_naming_its_file_and_hides_no_other(tmp_path: Path, damage: str) -> None:
    for name in ("a-good", "b-broken", "c-good"):
        make_tiny_checkpoint(tmp_path / name)
    broken = tmp_path / "b-broken" / ("card.json" if damage == "card-digits" else "config.json")
    broken.unlink()
    if damage in ("digits", "card-digits"):
        broken.write_text('{"format": 1, "model": {"d_model": ' + "7" * 5000 + "}}")
    elif damage == "fifo":
        os.mkfifo(broken)
    else:
        broken.symlink_to("/dev/zero")
    entries = {e.name: e for e in list_checkpoints(tmp_path, packages=False)}
    assert entries["a-good"].ok and entries["c-good"].ok
    assert not entries["b-broken"].ok and str(broken) in entries["b-broken"].error
    assert "\n" not in entries["b-broken"].error
