"""ui.cache.folder_stamp: the checkpoint folder's stamp read at most once a second for the whole server, at once
when a checkpoint is added or removed (else every follower's page run stats every checkpoint's files)."""

from __future__ import annotations

import os
from pathlib import Path

from inference import catalog
from ui import cache


def _checkpoint(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_folder_is_stamped_once_a_second_and_at_once_when_it_changes(tmp_path: Path, monkeypatch) -> None:
    reads: list[Path] = []
    real = catalog.folder_stamp
    monkeypatch.setattr(catalog, "folder_stamp", lambda root: reads.append(root) or real(root))
    clock = Clock()
    first = _checkpoint(tmp_path, "a")
    stamp = cache.folder_stamp(tmp_path, clock)
    assert stamp == real(tmp_path) and len(reads) == 1
    clock.now += 0.5
    assert cache.folder_stamp(tmp_path, clock) == stamp and len(reads) == 1  # within the second: not read again

    config = first / "config.json"  # replaced in place: the folder's own mtime does not move
    os.utime(config, ns=(config.stat().st_mtime_ns + 10**9,) * 2)
    assert cache.folder_stamp(tmp_path, clock) == stamp  # seen after the second, not before
    clock.now += 0.6
    replaced = cache.folder_stamp(tmp_path, clock)
    assert replaced != stamp and replaced == real(tmp_path) and len(reads) == 2

    _checkpoint(tmp_path, "b")  # a checkpoint added: at once
    added = cache.folder_stamp(tmp_path, clock)
    assert [name for name, _ in added] == ["a", "b"] and len(reads) == 3
    (tmp_path / "b" / "config.json").unlink()
    (tmp_path / "b").rmdir()  # and removed: at once
    assert [name for name, _ in cache.folder_stamp(tmp_path, clock)] == ["a"] and len(reads) == 4


def test_checkpoints_lists_a_folder_added_at_once(tmp_path: Path) -> None:
    assert cache.checkpoints(tmp_path) == []
    _checkpoint(tmp_path, "a")
    assert [entry.name for entry in cache.checkpoints(tmp_path)] == ["a"]
