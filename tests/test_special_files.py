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


# --- files read: `python -m atlas trace/generate/score --input-file`, atlas.read_trace -------------------------------

INPUT_COMMANDS = ("trace", "generate", "score")
NOBODY = "~nosuchuser-atlas"  # a user no test machine has


def read_inputs(checkpoints, command: str, source: Path, tmp_path: Path, capsys) -> tuple[int, str]:
    """`command` on the tiny language model reading `source` (trace writing into out.jsonl): exit code, stderr."""
    out = ["-o", str(tmp_path / "out.jsonl")] if command == "trace" else []
    code = main([command, str(checkpoints["decoder-only"]), "--input-file", str(source), *out])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "could not write the output" not in err, err
    assert not (tmp_path / "out.jsonl").exists(), "a bad input opens no output"
    return code, err.splitlines()[-1]


def refuse_to_open(monkeypatch: pytest.MonkeyPatch, path: Path, error: type[OSError] = AssertionError) -> None:
    """os.open of `path` raises `error` (by default the test fails: the file was to be refused unopened)."""
    real = os.open

    def guarded(name, *args, **kwargs):
        if Path(name) == path:
            raise error(errno.EACCES, "Permission denied") if error is PermissionError else error(f"{path} opened")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded)


@pytest.mark.parametrize("command", INPUT_COMMANDS)
@pytest.mark.parametrize("what", WHATS)
def test_an_input_file_that_is_not_a_file_is_named_as_what_it_is(
    tiny_checkpoints, command, what, tmp_path, capsys
) -> None:
    source = special(tmp_path, what, "inputs.txt")
    with unblocked(source):
        code, last = read_inputs(tiny_checkpoints, command, source, tmp_path, capsys)
    said = "a folder, not a file" if what == "a folder" else f"{WHATS[what]}, not a regular file; it is not opened"
    assert (code, last) == (2, f"error: {source}: the input file is {said}")


def test_a_missing_input_file_is_still_not_found(tiny_checkpoints, tmp_path, capsys) -> None:
    source = tmp_path / "nowhere.txt"
    assert read_inputs(tiny_checkpoints, "trace", source, tmp_path, capsys) == (
        2,
        f"error: {source}: input file not found",
    )


@pytest.mark.parametrize("command", INPUT_COMMANDS)
def test_a_sparse_20_gb_input_is_refused_by_its_size_unopened(
    tiny_checkpoints, command, tmp_path, capsys, monkeypatch
) -> None:
    source = tmp_path / "huge.txt"
    with source.open("wb") as file:
        file.truncate(20 * 2**30)  # sparse: no disk is used
    refuse_to_open(monkeypatch, source)
    code, last = read_inputs(tiny_checkpoints, command, source, tmp_path, capsys)
    assert (code, last) == (2, f"error: {source}: the input file is 20.0 GB, more than the 32.0 MB allowed")


def test_an_input_one_byte_past_the_bound_is_refused_and_one_at_it_is_read(
    tiny_checkpoints, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setattr("atlas.cli.MAX_BYTES", 1000)
    source = tmp_path / "inputs.txt"
    source.write_text("ab\n" * 333 + "a")  # 1,000 bytes
    assert (
        main(["generate", str(tiny_checkpoints["decoder-only"]), "--input-file", str(source), "--max-tokens", "1"]) == 0
    )
    assert len(capsys.readouterr().out.splitlines()) == 334
    source.write_text("ab\n" * 333 + "ab")
    code, last = read_inputs(tiny_checkpoints, "generate", source, tmp_path, capsys)
    assert (code, last) == (2, f"error: {source}: the input file is 1,001 bytes, more than the 1,000 bytes allowed")


@pytest.mark.parametrize("command", INPUT_COMMANDS)
def test_an_input_of_nul_bytes_is_refused_as_not_text(tiny_checkpoints, command, tmp_path, capsys) -> None:
    source = tmp_path / "zeros.txt"
    source.write_bytes(b"\x00" * 100_000)
    code, last = read_inputs(tiny_checkpoints, command, source, tmp_path, capsys)
    assert code == 2 and last == (
        f"error: {source}: the input file is mostly NUL bytes: binary (or UTF-16), not text; save it as UTF-8"
    )


@pytest.mark.parametrize("how", ["chmod 000", "os.access says no", "open says no"])
@pytest.mark.parametrize("command", INPUT_COMMANDS)
def test_an_unreadable_input_is_named_as_the_input(
    tiny_checkpoints, command, how, tmp_path, capsys, monkeypatch
) -> None:
    source = tmp_path / "inputs.txt"
    source.write_text("The cat sat.\n")
    if how == "chmod 000":
        if os.geteuid() == 0:
            pytest.skip("root reads a file of mode 000: the two cases beside simulate what another user meets")
        source.chmod(0)
    elif how == "os.access says no":
        real = os.access
        monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != source and real(path, mode, **kw))
    else:
        refuse_to_open(monkeypatch, source, PermissionError)
    code, last = read_inputs(tiny_checkpoints, command, source, tmp_path, capsys)
    assert (code, last) == (2, f"error: {source}: no permission to read the input file")


def test_an_input_under_an_unknown_users_home_is_one_line(tiny_checkpoints, tmp_path, capsys) -> None:
    source = f"{NOBODY}/inputs.txt"
    code, last = read_inputs(tiny_checkpoints, "trace", source, tmp_path, capsys)
    assert (code, last) == (
        2,
        f"error: {source}: there is no user 'nosuchuser-atlas' on this machine, so {NOBODY} names no folder; "
        "give the full path",
    )


@pytest.mark.parametrize("what", WHATS)
def test_read_trace_names_a_special_file_without_opening_it(what, tmp_path) -> None:
    source = special(tmp_path, what, "trace.json")
    with unblocked(source), pytest.raises((atlas.TraceError, FileNotFoundError)) as refused:
        atlas.read_trace(source)
    if what == "a folder":
        assert isinstance(refused.value, FileNotFoundError) and "a folder, not a trace file" in str(refused.value)
    else:
        said = f"{source}: the trace file is {WHATS[what]}, not a regular file; it is not opened"
        assert isinstance(refused.value, atlas.TraceError) and str(refused.value) == said


def test_read_trace_refuses_a_sparse_20_gb_file_by_its_size_unopened(tmp_path, monkeypatch) -> None:
    source = tmp_path / "huge.json"
    with source.open("wb") as file:
        file.truncate(20 * 2**30)
    refuse_to_open(monkeypatch, source)
    with pytest.raises(atlas.TraceError, match=r"the trace file is 20\.0 GB, more than the 200\.0 MB allowed$"):
        atlas.read_trace(source)


def test_read_trace_says_in_one_line_that_it_may_not_read_a_file(tmp_path, monkeypatch) -> None:
    source = tmp_path / "trace.json"
    source.write_text("{}")
    refuse_to_open(monkeypatch, source, PermissionError)
    with pytest.raises(atlas.TraceError) as refused:
        atlas.read_trace(source)
    assert str(refused.value) == f"{source}: no permission to read the trace file"


@pytest.mark.parametrize("writer", ["save", "save_figure", "read_trace"])
def test_an_unknown_users_home_is_one_line(writers, writer, tmp_path) -> None:
    suffix, write = writers.get(writer, (".json", atlas.read_trace))
    path = f"{NOBODY}/x{suffix}"
    with pytest.raises(ValueError) as refused:
        write(path)
    assert str(refused.value) == (
        f"{path}: there is no user 'nosuchuser-atlas' on this machine, so {NOBODY} names no folder; give the full path"
    )


@pytest.mark.parametrize("writer", ["save", "save_figure"])
def test_a_tilde_is_the_home_folder(writers, writer, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    suffix, write = writers[writer]
    assert write(f"~/x{suffix}") == tmp_path / f"x{suffix}" and (tmp_path / f"x{suffix}").stat().st_size > 100


def test_train_text_refuses_a_sparse_20_gb_file_by_its_size_unopened(tmp_path, capsys, monkeypatch) -> None:
    text = tmp_path / "huge.txt"
    with text.open("wb") as file:
        file.truncate(20 * 2**30)
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: pytest.fail(f"{self} opened"))
    assert main(["train", "--task", "lm", "--text", str(text), "--out", str(tmp_path / "out"), "--max-steps", "1"]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"error: {text}: larger than 100 MB;")
