"""Files a person names, read and written with care: a special file is named as what it is and never opened, and a
file is written whole or not at all.

Opening a named pipe blocks until something writes into it, /dev/zero never ends and a socket cannot be opened: a
path is looked at (os.stat) before it is opened, and whatever is not a regular file is refused by name; a file
read is measured before a byte of it is (read_source), so a 20 GB file is refused at once. A write
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


class SourceError(ValueError):
    """A file a person named to be read cannot be: the message names it, what it is and what to do."""


def user_path(path: str | Path) -> Path:
    """`path` with a leading `~` or `~user` expanded; a user this machine does not know is a ValueError of one
    line (Path.expanduser raises RuntimeError)."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        head = str(path).split(os.sep, 1)[0]
        who = f"no user {head[1:]!r} on this machine" if len(head) > 1 else "no home folder for this user"
        raise ValueError(f"{path}: there is {who}, so {head} names no folder; give the full path") from None


def check_source(path: Path, max_bytes: int, what: str = "input file") -> int:
    """The size of `path` if it is a regular file of at most `max_bytes` that this user may read, told without
    opening it (os.stat, os.access): a named pipe waits for no writer, a 20 GB file is refused by its size at
    once. FileNotFoundError when nothing is there; otherwise a SourceError of one line that names `what` it is."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: {what} not found") from None
    except OSError as exc:
        raise SourceError(f"{path}: cannot look at the {what} ({exc.strerror})") from exc
    if stat.S_ISDIR(info.st_mode):
        raise SourceError(f"{path}: the {what} is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise SourceError(f"{path}: the {what} is {kind(info.st_mode)}, not a regular file; it is not opened")
    if info.st_size > max_bytes:
        raise SourceError(f"{path}: the {what} is {_size(info.st_size)}, more than the {_size(max_bytes)} allowed")
    if not os.access(path, os.R_OK):
        raise SourceError(f"{path}: no permission to read the {what}")
    return info.st_size


def read_source(path: Path, max_bytes: int, what: str = "input file") -> bytes:
    """The bytes of `path`, checked first as check_source says; opened without blocking and checked again by its
    open descriptor (a name swapped since for a pipe or a larger file), read no further than the cap."""
    check_source(path, max_bytes, what)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except PermissionError:
        raise SourceError(f"{path}: no permission to read the {what}") from None
    except OSError as exc:
        raise SourceError(f"{path}: cannot read the {what} ({exc.strerror})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            raise SourceError(f"{path}: the {what} changed while it was opened; give it again")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(max_bytes + 1)
    except OSError as exc:
        raise SourceError(f"{path}: cannot read the {what} ({exc.strerror})") from exc
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew after it was measured
        raise SourceError(f"{path}: the {what} is more than the {_size(max_bytes)} allowed")
    return data


def _size(count: int) -> str:
    if count >= 2**30:
        return f"{count / 2**30:.1f} GB"
    return f"{count / 2**20:.1f} MB" if count >= 2**20 else f"{count:,} bytes"


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
