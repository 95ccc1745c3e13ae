"""Tests for the LM corpus readers and filters in ``training.data.lm`` (tiny in-memory inputs, no network)."""

from __future__ import annotations

import bz2
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from rdata.conversion import convert_python_to_r_data
from rdata.unparser import unparse_data

from training.data import lm


def _rds(value: object) -> bytes:
    return unparse_data(convert_python_to_r_data(value))


def _write_lazyload_db(folder: Path, variables: dict[str, object], compression: int) -> Path:
    """A lazy-load database as R writes one: each object length-prefixed and compressed, an index beside."""
    rdb, offsets = b"", {}
    for name, value in variables.items():
        data = _rds(value)
        packed = zlib.compress(data) if compression == 1 else b"2" + bz2.compress(data)
        offsets[name] = np.array([len(rdb), 4 + len(packed)], dtype=np.int32)
        rdb += struct.pack(">I", len(data)) + packed
    (folder / "Rdata.rdb").write_bytes(rdb)
    index = {"variables": offsets, "references": {}, "compressed": np.array([compression], dtype=np.int32)}
    (folder / "Rdata.rdx").write_bytes(_rds(index))
    return folder / "Rdata.rdx"


@pytest.mark.parametrize("compression", [1, 3])
def test_read_lazyload_db_returns_every_variable(tmp_path: Path, compression: int) -> None:
    books = {"emma": np.array(["EMMA", "", "Emma Woodhouse, handsome"]), "ints": np.array([7, -8], dtype=np.int32)}
    variables = lm.read_lazyload_db(_write_lazyload_db(tmp_path, books, compression))
    assert sorted(variables) == ["emma", "ints"]
    assert variables["emma"].tolist() == ["EMMA", "", "Emma Woodhouse, handsome"]
    assert variables["ints"].tolist() == [7, -8]


def test_lazyload_entry_refuses_a_wrong_length() -> None:
    blob = struct.pack(">I", 99) + zlib.compress(b"abc")
    with pytest.raises(ValueError, match="holds 3 bytes, its header says 99"):
        lm.lazyload_entry(blob, 1)
