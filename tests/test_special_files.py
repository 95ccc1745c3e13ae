"""Paths a person names that are not regular files: `atlas train --text` reads none of them and `atlas.save` /
`atlas.save_figure` write into none of them; each is named as what it is in one line, and nothing waits on a
named pipe. A write that fails (a full disk, a name too long, no permission) is one line too, and leaves the
file as it was (inference.files)."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import atlas
from atlas.cli import main

LIMIT = 20  # seconds a call may take before the test decides it is waiting on the named pipe


@contextlib.contextmanager
def unblocked(fifo: Path) -> Iterator[None]:
    """Run the body; should it open `fifo` for reading and wait there, a writer comes after LIMIT seconds and
    leaves at once, so the reader sees an empty file and the test fails on what it says instead of hanging."""
    done = threading.Event()

    def rescue() -> None:
        if not done.wait(LIMIT):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    helper = threading.Thread(target=rescue, daemon=True)
    helper.start()
    try:
        yield
    finally:
        done.set()
        helper.join()


def special(tmp_path: Path, what: str, name: str) -> Path:
    """A path named `name` in `tmp_path` that is `what`: a folder, a named pipe, a socket, a character device of
    its own (the null device's numbers; skipped where this user may not make one) or a link to a device."""
    path = tmp_path / name
    if what == "a folder":
        path.mkdir()
    elif what == "a named pipe":
        os.mkfifo(path)
    elif what == "a device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("this user may not make a device node")
    elif what == "a socket":
        server = socket.socket(socket.AF_UNIX)
        cwd = Path.cwd()
        os.chdir(tmp_path)  # a socket's path must be short: bound by its name, in its folder
        try:
            server.bind(name)
        finally:
            os.chdir(cwd)
        server.close()  # the file stays
    else:
        path.symlink_to(what)
    return path


WHATS = {
    "a folder": "a folder",
    "a named pipe": "a named pipe",
    "a socket": "a socket",
    "a device": "a character device",
    "/dev/zero": "a character device",
}
# Written into: never a link to a system device. Were the check broken, the write's rename would put a regular
# file in place of /dev/null for every process on the machine; a node of the test's own is all it can replace.
TARGETS = [what for what in WHATS if not what.startswith("/dev/")]


@pytest.mark.parametrize("what", WHATS)
def test_train_text_names_a_special_file_in_one_line_without_opening_it(what, tmp_path, capsys) -> None:
    text = special(tmp_path, what, "my.txt")
    with unblocked(text):
        code = main(["train", "--task", "lm", "--text", str(text), "--out", str(tmp_path / "out"), "--max-steps", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    expected = "is a folder;" if what == "a folder" else f"is {WHATS[what]}, not a regular file;"
    assert err.splitlines()[-1].startswith(f"error: {text}: {expected}"), err
    assert not (tmp_path / "out").exists()


def test_train_text_names_a_missing_file(tmp_path, capsys) -> None:
    text = tmp_path / "nowhere.txt"
    assert main(["train", "--task", "lm", "--text", str(text), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"error: {text}: file not found"


# --- atlas.save and atlas.save_figure ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def writers(tiny_checkpoints) -> dict[str, tuple[str, Callable[[Path], Path]]]:
    """Each writer with a suffix it writes: save a trace of a tiny seeded model, save_figure one of its heads."""
    analysis = atlas.analyze(atlas.load(tiny_checkpoints["decoder-only"]), "abcab")
    fig = atlas.head(analysis, layer=1, head=1)
    return {
        "save": (".json", lambda path: atlas.save(analysis, path)),
        "save_figure": (".html", lambda path: atlas.save_figure(fig, path)),
    }


@pytest.mark.parametrize("writer", ["save", "save_figure"])
@pytest.mark.parametrize("what", TARGETS)
def test_a_special_target_is_named_and_left_as_it_is(writers, writer, what, tmp_path) -> None:
    suffix, write = writers[writer]
    target = special(tmp_path, what, f"out{suffix}")
    before = os.lstat(target)
    with unblocked(target), pytest.raises(ValueError) as refused:
        write(target)
    assert str(refused.value) == f"{target}: is {WHATS[what]}, not a regular file; give the path of a file to write"
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino), "not replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name], "no temporary file left"


@pytest.mark.parametrize("writer", ["save", "save_figure"])
def test_a_name_too_long_is_one_line_that_says_so(writers, writer, tmp_path) -> None:
    suffix, write = writers[writer]
    target = tmp_path / ("a" * 300 + suffix)
    with pytest.raises(ValueError, match="the name is longer than the file system allows; give a shorter name$"):
        write(target)


@pytest.mark.parametrize("writer", ["save", "save_figure"])
@pytest.mark.parametrize(
    ("code", "advice"),
    [
        (errno.ENOSPC, "the disk is full; free some space or save on another disk"),
        (errno.EACCES, "no permission to write there; save in a folder of yours"),
        (errno.EIO, r"cannot write there \(Input/output error\); save somewhere else"),
    ],
)
def test_a_failed_write_is_one_line_and_leaves_the_old_file_whole(
    writers, writer, code, advice, tmp_path, monkeypatch
) -> None:
    suffix, write = writers[writer]
    target = tmp_path / f"out{suffix}"
    target.write_text("the old file")

    class Failing:
        def __init__(self, fd: int, *args: object, **kwargs: object) -> None:
            self.fd = fd

        def __enter__(self) -> Failing:
            os.write(self.fd, b"half of")  # some bytes reach the disk before it fills
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def write(self, data: bytes) -> int:
            raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fdopen", Failing)
    with pytest.raises(ValueError, match=f"^{target}: {advice}$"):
        write(target)
    monkeypatch.undo()
    assert target.read_text() == "the old file"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name], "no temporary file left"


@pytest.mark.parametrize("writer", ["save", "save_figure"])
def test_a_write_replaces_the_file_and_follows_a_link(writers, writer, tmp_path) -> None:
    suffix, write = writers[writer]
    real = tmp_path / f"real{suffix}"
    real.write_text("the old file")
    link = tmp_path / f"link{suffix}"
    link.symlink_to(real)
    assert write(link) == link
    assert link.is_symlink() and real.read_bytes() != b"the old file" and real.stat().st_size > 100
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([real.name, link.name])


def test_a_written_file_has_the_permissions_a_new_file_gets(writers, tmp_path) -> None:
    _, write = writers["save"]
    plain = tmp_path / "plain"
    plain.write_text("")
    written = write(tmp_path / "trace.json")
    assert written.stat().st_mode == plain.stat().st_mode
