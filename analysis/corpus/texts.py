"""A corpus's texts, streamed: a text file (a text a line), JSONL (a "text" field a line), Parquet (a "text"
column), or a folder of them (its files in name order, sub-folders too). Nothing is read whole: lines are read
with a bound and Parquet a row group at a time, so memory stays flat however large the corpus.

Every problem is a CorpusError of one line naming the file (and line) and what to do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SUFFIXES = (".txt", ".jsonl", ".parquet")
MAX_TEXT_BYTES = 100_000  # a text longer than this is not a line of running text; the model reads a few hundred
# tokens of it at most, so a longer line is a file that is not one text a line (or binary), and stops the run
SNIFF_BYTES = 8192  # the start of a text file looked at for NUL bytes: UTF-8 text holds none


class CorpusError(ValueError):
    """A corpus's input, model or output folder cannot be used: the message says which and what to do."""


@dataclass(frozen=True)
class Text:
    """One text of the corpus: `where` is its file and line (or row), from 1, as a person finds it."""

    text: str
    where: str


def corpus_files(path: Path) -> list[Path]:
    """The files a corpus reads at `path`: itself, or a folder's files with a corpus suffix, in name order."""
    if not path.exists():
        raise CorpusError(f"{path}: no such file or folder: give a .txt, .jsonl or .parquet file, or a folder of them")
    if path.is_dir():
        found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        if not found:
            raise CorpusError(f"{path}: the folder holds no texts: put .txt, .jsonl or .parquet files in it")
        return found
    if not path.is_file():
        raise CorpusError(f"{path}: not a regular file: give a .txt, .jsonl or .parquet file, or a folder of them")
    return [path]


def fingerprint(files: list[Path]) -> list[dict]:
    """What identifies the input for a resumed run: each file's path, size and time of change."""
    return [{"path": str(p.resolve()), "bytes": p.stat().st_size, "mtime_ns": p.stat().st_mtime_ns} for p in files]


def count_texts(files: list[Path]) -> int:
    """How many texts (non-blank lines, Parquet rows) the files hold, for the progress bar's time left: a pass that
    reads lines with the bound of `stream`, or Parquet's metadata only."""
    total = 0
    for file in files:
        if file.suffix.lower() == ".parquet":
            total += _parquet(file).metadata.num_rows
        else:
            total += sum(1 for _ in _lines(file))
    return total


def stream(files: list[Path]) -> Iterator[Text]:
    """Every text of the files, in order: blank lines are no texts; a JSONL line's "text" field; a Parquet file's
    "text" column."""
    for file in files:
        suffix = file.suffix.lower()
        if suffix == ".parquet":
            yield from _parquet_texts(file)
        elif suffix == ".jsonl":
            for number, line in _lines(file):
                yield Text(_json_text(file, number, line), f"{file.name}:{number}")
        else:
            for number, line in _lines(file):
                yield Text(line, f"{file.name}:{number}")


def _lines(file: Path) -> Iterator[tuple[int, str]]:
    """(line number from 1, line) of each non-blank line, each at most MAX_TEXT_BYTES; a binary file or a line
    over the bound is a CorpusError."""
    try:
        handle = file.open("rb")
    except OSError as exc:
        raise CorpusError(f"{file}: cannot be read ({exc.strerror})") from None
    with handle:
        if b"\0" in handle.read(SNIFF_BYTES):
            raise CorpusError(f"{file}: holds NUL bytes: binary (or UTF-16), not text; save it as UTF-8 text")
        handle.seek(0)
        number = 0
        while True:
            raw = handle.readline(MAX_TEXT_BYTES + 2)  # the bound, its line end, and one byte to see it is over
            if not raw:
                return
            number += 1
            line = raw.rstrip(b"\r\n")
            if len(line) > MAX_TEXT_BYTES:
                raise CorpusError(
                    f"{file}:{number}: a line over {MAX_TEXT_BYTES:,} bytes is no text of a corpus (a text a line): "
                    "split it into texts"
                )
            text = line.decode("utf-8", errors="replace")
            if text.strip():
                yield number, text


def _json_text(file: Path, number: int, line: str) -> str:
    try:
        value = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        raise CorpusError(
            f'{file}:{number}: not a JSON object: each line of a .jsonl corpus is {{"text": ...}}'
        ) from None
    if not isinstance(value, dict) or not isinstance(value.get("text"), str):
        raise CorpusError(f'{file}:{number}: no "text" string: each line of a .jsonl corpus is {{"text": ...}}')
    return value["text"]


def _parquet(file: Path):  # -> pyarrow.parquet.ParquetFile
    import pyarrow.parquet as pq  # only a Parquet corpus needs it

    try:
        return pq.ParquetFile(file)
    except Exception as exc:  # pyarrow's errors have no common base that names a bad file
        raise CorpusError(f"{file}: not a Parquet file pyarrow can read ({str(exc).splitlines()[0]})") from None


def _parquet_texts(file: Path) -> Iterator[Text]:
    parquet = _parquet(file)
    if "text" not in parquet.schema_arrow.names:
        raise CorpusError(f'{file}: no "text" column (it has {", ".join(parquet.schema_arrow.names)})')
    row = 0
    for group in range(parquet.num_row_groups):
        column = parquet.read_row_group(group, columns=["text"]).column("text")
        for value in column.to_pylist():
            row += 1
            if not isinstance(value, str):
                raise CorpusError(f'{file}: row {row}: the "text" column holds {type(value).__name__}, not text')
            if len(value.encode("utf-8")) > MAX_TEXT_BYTES:
                raise CorpusError(f"{file}: row {row}: a text over {MAX_TEXT_BYTES:,} bytes: split it into texts")
            yield Text(value, f"{file.name}:{row}")
