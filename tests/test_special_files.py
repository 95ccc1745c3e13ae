"""Paths a person names that are not regular files: `atlas train --text` reads none of them and `atlas.save` /
`atlas.save_figure` write into none of them; each is named as what it is in one line, and nothing waits on a
named pipe. A write that fails (a full disk, a name too long, no permission) is one line too, and leaves the
file as it was (inference.files)."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

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
