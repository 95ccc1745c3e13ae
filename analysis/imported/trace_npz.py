"""An `.npz` trace (analysis.export.to_npz_bytes) parsed: measured from its zip directory and .npy headers before
any array is built, then read with allow_pickle=False into its object, attention entries and positional rows, for
analysis.imported.trace to check."""

from __future__ import annotations

import io
import math
import tokenize
import zipfile
import zlib
from typing import Any

import numpy as np

from analysis.imported.checks import MAX_FILE_BYTES, MAX_LAYERS, TraceError, size_text
from analysis.imported.trace_parsed import Entry, check_meta, fits
from inference.jsonfile import JsonFileError, parse_json

UNPACKED_PER_FILE_BYTE = 4  # an .npz's arrays may unpack to at most this many times MAX_FILE_BYTES
MAX_META_BYTES = 16 * 2**20  # an .npz trace's meta.json: its tokens and predictions, a few MB at MAX_TOKENS
MAX_HEADER_BYTES = 10_000  # an .npy header: numpy's own default cap

NPZ_PARTS = ("weights", "scores", "mask")
# What a damaged zip or .npy raises while read: a CRC or header fault, a cut member, a corrupt deflate stream.
ZIP_FAULTS = (ValueError, OSError, EOFError, RuntimeError, zipfile.BadZipFile, zlib.error)


def _role(key: str) -> tuple[str, str]:
    """What an .npz member holds and the dtype kinds it may have ("f" floats, "b" booleans, "u" bytes)."""
    if key == "meta.json":
        return "its JSON object", "u"
    if key == "positional_encoding":
        return "positional-encoding rows", "f"
    part = key.rpartition(".")[2]
    return {"weights": ("attention weights", "f"), "scores": ("scores", "f"), "mask": ("a mask", "b")}.get(
        part, ("?", "")
    )


def _npz_members(data: bytes, filename: str) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """Every member of an .npz, measured without building an array: from the zip's directory and each .npy header,
    its dtype and shape, checked to be what its role stores and to fit the bytes the member holds (a header may
    claim (10**10,) in a file of a few bytes)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except ZIP_FAULTS as exc:
        raise TraceError(f"{filename}: not a readable .npz archive ({exc})") from exc
    if len(infos) > 3 * MAX_LAYERS * 3 + 2:
        raise TraceError(f"{filename}: {len(infos):,} members, more than a trace of {MAX_LAYERS} layers holds")
    unpacked = sum(info.file_size for info in infos)
    limit = UNPACKED_PER_FILE_BYTE * MAX_FILE_BYTES
    if unpacked > limit:
        raise TraceError(
            f"{filename}: its arrays unpack to {size_text(unpacked)}, more than the {size_text(limit)} allowed"
        )
    members = {}
    for info in infos:
        if not info.filename.endswith(".npy"):
            raise TraceError(f"{filename}: member {info.filename!r} is not an .npy array; a trace holds arrays only")
        key = info.filename.removesuffix(".npy")
        try:
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
                if version not in read:
                    raise ValueError(f".npy format {version[0]}.{version[1]}; 1.0 and 2.0 are read")
                shape, _, dtype = read[version](member, max_header_size=MAX_HEADER_BYTES)
        except (*ZIP_FAULTS, SyntaxError, tokenize.TokenError) as exc:  # numpy tokenizes a header it cannot parse
            raise TraceError(f"{filename}: array {key!r} has no readable .npy header ({exc})") from exc
        what, kinds = _role(key)
        if dtype.hasobject or dtype.kind not in kinds or (kinds == "u" and dtype.itemsize != 1):
            wanted = {"f": "floats", "b": "true/false values", "u": "bytes (uint8)"}.get(kinds, "?")
            held = "objects, which only a pickle holds (never read here)" if dtype.hasobject else f"{dtype} values"
            raise TraceError(f"{filename}: array {key!r} holds {held}, where a trace stores {what} as {wanted}")
        claimed = math.prod(shape) * dtype.itemsize
        if claimed > info.file_size:
            raise TraceError(
                f"{filename}: array {key!r} claims shape {shape} of {dtype} ({size_text(claimed)}) but holds "
                f"{size_text(info.file_size)}"
            )
        if key == "meta.json" and claimed > MAX_META_BYTES:
            raise TraceError(
                f"{filename}: meta.json is {size_text(claimed)}, more than the {size_text(MAX_META_BYTES)} allowed"
            )
        members[key] = (dtype, shape)
    return members


def read_npz(data: bytes, filename: str, max_bytes: int | None = None) -> tuple[dict, list[Entry], Any]:
    """The trace's object, entries and positional rows. Measured first (`_npz_members`): refused before any array
    is built when what the Analysis would keep of it (float32 weights and scores, boolean masks) is more than
    `max_bytes`."""
    if not data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        raise TraceError(f"{filename}: not an .npz archive (a zip of .npy arrays): it does not start as a zip file")
    members = _npz_members(data, filename)
    parsed = sum(  # what the Analysis keeps: float32 weights and scores, boolean masks
        math.prod(shape) * (1 if key.endswith(".mask") else 4) for key, (_, shape) in members.items()
    )
    fits(parsed, max_bytes, filename)
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
    except ZIP_FAULTS as exc:
        raise TraceError(f"{filename}: not a readable .npz archive ({exc})") from exc
    with archive:
        meta = _meta(archive, filename)
        if "positional_encoding" not in archive.files:
            raise TraceError(f"{filename}: not a trace: no positional_encoding array")
        entries = _entries(archive, filename)
        return meta, entries, _array(archive, "positional_encoding", filename)


def _array(archive: np.lib.npyio.NpzFile, key: str, filename: str) -> np.ndarray:
    """The archive's array `key`, or a TraceError for damage its header could not show."""
    try:
        return archive[key]
    except ZIP_FAULTS as exc:  # damage the headers could not show
        raise TraceError(f"{filename}: array {key!r} cannot be read ({exc})") from exc


def _meta(archive: np.lib.npyio.NpzFile, filename: str) -> dict:
    """The trace's object, from its meta.json array (the UTF-8 bytes of a JSON object), checked as a JSON trace's."""
    if "meta.json" not in archive.files:
        raise TraceError(f"{filename}: not a trace: no meta.json array (the app's .npz traces carry one)")
    raw = _array(archive, "meta.json", filename)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise TraceError(f"{filename}: meta.json is {raw.dtype} {raw.shape}, not the UTF-8 bytes of a JSON object")
    try:
        meta = parse_json(raw.tobytes().decode("utf-8"), f"{filename}: meta.json")
    except (UnicodeDecodeError, JsonFileError) as exc:
        raise TraceError(f"{filename}: meta.json is not UTF-8 JSON ({exc})") from exc
    check_meta(meta, filename, ())
    return meta


def _entries(archive: np.lib.npyio.NpzFile, filename: str) -> list[Entry]:
    """The archive's NAME.weights, NAME.mask and NAME.scores arrays as one Entry per NAME, in the archive's order."""
    parts: dict[str, dict[str, np.ndarray]] = {}
    for key in archive.files:
        if key in ("meta.json", "positional_encoding"):
            continue
        name, _, part = key.rpartition(".")
        if part not in NPZ_PARTS or not name:
            raise TraceError(
                f"{filename}: unexpected array {key!r}: a trace holds NAME.weights, NAME.scores, NAME.mask"
            )
        if len(parts) >= 3 * MAX_LAYERS and name not in parts:
            raise TraceError(f"{filename}: more than {3 * MAX_LAYERS} attention sub-layers")
        parts.setdefault(name, {})[part] = _array(archive, key, filename)
    entries = []
    for name, arrays in parts.items():
        missing = [p for p in ("weights", "mask") if p not in arrays]
        if missing:
            raise TraceError(f"{filename}: sub-layer {name} has no {' or '.join(f'{name}.{p}' for p in missing)} array")
        entries.append(Entry(name, arrays["weights"], arrays["mask"], arrays.get("scores")))
    return entries
