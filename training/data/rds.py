"""R serialization (XDR) reader, enough for janeaustenr's lazy-load data."""

from __future__ import annotations

import bz2
import gzip
import lzma
import struct
import zlib
from pathlib import Path
from typing import Any

_R_NIL, _R_GLOBALENV, _R_REF, _R_ALTREP = 254, 253, 255, 238
_R_TRIVIAL = {253, 252, 251, 250, 242, 241}  # environments / markers we do not need


class RList(list):
    """An R list (VECSXP/pairlist) that also carries R attributes (e.g. ``names``)."""

    attributes: dict[str, Any]


class RReader:
    """Minimal reader for R's XDR serialization format (versions 2 and 3)."""

    def __init__(self, data: bytes) -> None:
        if data[:2] != b"X\n":
            raise ValueError("not an R XDR serialization (missing 'X\\n' header)")
        self.data, self.pos, self.refs = data, 2, []
        version = self.int()
        self.int(), self.int()  # writer / minimal reader R versions
        if version == 3:
            n = self.int()
            self.pos += n  # skip the native encoding name

    def int(self) -> int:
        (value,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return value

    def length(self) -> int:
        n = self.int()
        return (self.int() << 32) + self.int() if n == -1 else n

    def items(self, fmt: str, n: int) -> list:
        size = struct.calcsize(">" + fmt)
        values = list(struct.unpack_from(f">{n}{fmt}", self.data, self.pos))
        self.pos += n * size
        return values

    def attributes(self, pairlist: Any) -> dict[str, Any]:
        return dict(pairlist) if isinstance(pairlist, list) else {}

    def read(self) -> Any:
        """Read one R object; vectors become Python lists, pairlists lists of (tag, value)."""
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, bool(flags & 0x200), bool(flags & 0x400)
        if kind == _R_NIL or kind in _R_TRIVIAL:
            return None
        if kind == _R_REF:
            index = flags >> 8 or self.int()
            return self.refs[index - 1]
        if kind == 1:  # SYMSXP
            sym = self.read()
            self.refs.append(sym)
            return sym
        if kind in (2, 6, 17, 239, 240):  # pairlist-like
            return self.read_pairlist(has_attr, has_tag)
        if kind == 9:  # CHARSXP
            n = self.int()
            if n == -1:
                return None
            text = self.data[self.pos : self.pos + n].decode("utf-8", errors="replace")
            self.pos += n
            return text
        if kind == _R_ALTREP:
            return self.read_altrep()
        return self.read_vector(kind, has_attr)

    def read_pairlist(self, has_attr: bool, has_tag: bool) -> list:
        attrs = self.read() if has_attr else None
        tag = self.read() if has_tag else None
        out = [(tag, self.read())]
        rest = self.read()
        if isinstance(rest, list):
            out.extend(rest)
        del attrs
        return out

    def read_vector(self, kind: int, has_attr: bool) -> Any:
        n = self.length()
        if kind in (10, 13):  # LGLSXP, INTSXP
            value: Any = self.items("i", n)
        elif kind == 14:  # REALSXP
            value = self.items("d", n)
        elif kind in (16, 19, 20):  # STRSXP, VECSXP, EXPRSXP
            value = RList(self.read() for _ in range(n))
        else:
            raise ValueError(f"unsupported R SEXP type {kind} at byte {self.pos}")
        if has_attr:
            attrs = self.attributes(self.read())
            if isinstance(value, RList):
                value.attributes = attrs
        return value

    def read_altrep(self) -> Any:
        info, state, _attr = self.read(), self.read(), self.read()
        cls = info[0][1] if isinstance(info, list) and info else None
        if cls == "compact_intseq":
            n, start, step = (int(v) for v in state)
            return list(range(start, start + n * step, step))
        if cls == "compact_realseq":
            n, start, step = state
            return [start + i * step for i in range(int(n))]
        if cls and cls.startswith("wrap_"):
            return state[0]
        if cls == "deferred_string":
            return [str(v) for v in state[0][1]]
        raise ValueError(f"unsupported ALTREP class {cls!r}")


def r_unserialize(data: bytes) -> Any:
    """Deserialize R XDR bytes (optionally gzip-compressed, as in ``.rds``/``.rdx`` files)."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return RReader(data).read()


def r_named(value: Any) -> dict[str, Any]:
    """An R named list as a dict."""
    return dict(zip(value.attributes.get("names", []), value, strict=True))


def _lazyload_blob(blob: bytes, compression: int) -> bytes:
    """Decompress one lazy-load DB entry (4-byte length prefix, then zlib/bzip2/xz/raw)."""
    (out_len,) = struct.unpack(">I", blob[:4])
    if compression == 1:
        data = zlib.decompress(blob[4:])
    else:
        kind, payload = blob[4:5], blob[5:]
        decoders = {b"1": zlib.decompress, b"2": bz2.decompress, b"Z": lzma.decompress, b"0": bytes}
        data = decoders[kind](payload)
    if len(data) != out_len:
        raise ValueError("lazy-load entry has unexpected length")
    return data


def read_lazyload_db(rdx_path: Path) -> dict[str, Any]:
    """Read all variables of an R lazy-load database (``X.rdx`` + ``X.rdb``)."""
    index = r_named(r_unserialize(rdx_path.read_bytes()))
    compressed = index.get("compressed", [1])
    compression = int(compressed[0]) if compressed else 1
    rdb = rdx_path.with_suffix(".rdb").read_bytes()
    out = {}
    for name, (offset, length) in r_named(index["variables"]).items():
        blob = rdb[int(offset) : int(offset) + int(length)]
        out[name] = r_unserialize(_lazyload_blob(blob, compression))
    return out
