"""Files a person names, read and written with care: a special file is named as what it is and never opened, and a
file is written whole or not at all.

Opening a named pipe blocks until something writes into it, /dev/zero never ends and a socket cannot be opened: a
path is looked at (os.stat) before it is opened, and whatever is not a regular file is refused by name. A write
goes to a temporary file in the target's folder, renamed over the target once complete, so a full disk leaves
the old file or none, never half of one. Every failure is a ValueError of one line that names the path and what
to do (inference.jsonfile reads the JSON files of a checkpoint folder the same careful way).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
ADVICE = {  # what a write's OSError means to the person who asked for it, and what to do
    errno.ENOSPC: "the disk is full; free some space or save on another disk",
    errno.EDQUOT: "the disk quota is used up; free some space or save on another disk",
    errno.ENAMETOOLONG: "the name is longer than the file system allows; give a shorter name",
    errno.EACCES: "no permission to write there; save in a folder of yours",
    errno.EPERM: "no permission to write there; save in a folder of yours",
    errno.EROFS: "the file system is read-only; save somewhere writable",
    errno.ENOENT: "its folder does not exist; create it first (Path.mkdir)",
    errno.ENOTDIR: "a part of the path is a file, not a folder; give a path in a folder",
}


def kind(mode: int) -> str:
    """What a file of this `st_mode` is, for a message: "a folder", "a named pipe", … or "a regular file"."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def why_not_written(path: Path, exc: OSError) -> str:
    """One line naming `path` and what the OSError of writing it means to do."""
    advice = ADVICE.get(exc.errno or 0, f"cannot write there ({exc.strerror or exc}); save somewhere else")
    return f"{path}: {advice}"


def check_target(path: Path) -> None:
    """ValueError unless `path` can be the target of `write_file` as far as can be told without writing: its folder
    exists and the name holds a regular file or nothing (a link is followed). Nothing is opened."""
    try:
        if not path.parent.is_dir():
            raise ValueError(f"{path}: its folder {path.parent} does not exist; create it first (Path.mkdir)")
        info = path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ValueError(why_not_written(path, exc)) from exc
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path}: is {kind(info.st_mode)}, not a regular file; give the path of a file to write")


def write_file(path: Path, data: bytes) -> Path:
    """Write `data` to `path` whole or not at all (see the module's docstring); returns `path`. A target that is
    not a regular file, and every OSError, is a ValueError of one line (check_target, why_not_written)."""
    check_target(path)
    target = Path(os.path.realpath(path))  # through a link, as open() would write: the link stays a link
    temporary = target.parent / f".atlas-{secrets.token_hex(6)}.tmp"  # short: a long target name still fits
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            with os.fdopen(fd, "wb", closefd=False) as file:
                file.write(data)
        finally:
            os.close(fd)
        os.replace(temporary, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        raise ValueError(why_not_written(path, exc)) from exc
    return path
