"""A trace file is measured before it is parsed: an .npz's members from the zip directory and their .npy
headers, their dtypes by role, the memory the parsed trace would take asked before any array is built; a JSON
trace's parsing bounded by its size. Every fault is a TraceError, fuzzed."""

from __future__ import annotations

import io
import random
import tracemalloc
import zipfile

import numpy as np
import pytest

from analysis.analyze import analyze
from analysis.export import to_json, to_npz_bytes
from analysis.imported import JSON_PARSED_PER_BYTE, MAX_META_BYTES, TraceError, read_trace
from training.tiny import make_tiny_checkpoint


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    from inference.checkpoint import load_checkpoint

    folder = make_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "lm", "decoder-only")
    analysis = analyze(load_checkpoint(folder), "the cat sat on the mat and the dog sat on the log")
    return {"npz": to_npz_bytes(analysis), "json": to_json(analysis).encode()}


def npz_of(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def arrays_of(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data)) as archive:
        return {k: archive[k] for k in archive.files}


def peak_while(call) -> int:
    tracemalloc.start()
    try:
        call()
    except TraceError:
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_integer_weights_are_refused_naming_the_array_before_any_array_is_built(exports) -> None:
    """48 heads x 4,096 tokens of uint8 one-hot rows: 1.2 MB compressed, 0.8 GB unpacked, 3.2 GB as float32."""
    arrays = arrays_of(exports["npz"])
    weights_key = next(k for k in arrays if k.endswith(".weights"))
    heads, n = 48, 4096
    one_hot = np.zeros((heads, n, n), np.uint8)
    one_hot[:, np.arange(n), np.arange(n)] = 1
    bomb = npz_of({**arrays, weights_key: one_hot})
    assert len(bomb) < 3 * 2**20
    with pytest.raises(TraceError, match=rf"array '{weights_key}' holds uint8 values, where a trace stores attention"):
        read_trace(bomb, "bomb.npz")
    assert peak_while(lambda: read_trace(bomb, "bomb.npz")) < 64 * 2**20, "refused from the headers alone"


def test_a_header_claiming_more_than_its_member_holds_is_refused(exports) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive, archive.open("positional_encoding.npy", "w") as member:
        np.lib.format.write_array_header_1_0(member, {"descr": "<f4", "fortran_order": False, "shape": (10**10,)})
    with pytest.raises(TraceError, match=r"claims shape \(10000000000,\) of float32 \(38147 MB\) but holds"):
        read_trace(buffer.getvalue(), "liar.npz")


def test_a_member_that_is_not_an_array_is_refused(exports) -> None:
    buffer = io.BytesIO(exports["npz"])
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(TraceError, match=r"member 'notes.txt' is not an \.npy array"):
        read_trace(buffer.getvalue(), "extra.npz")


def test_a_huge_meta_json_is_refused_from_its_header(exports) -> None:
    """704 MB of spaces cost 2 GB and up to two minutes; a meta.json over MAX_META_BYTES is not read."""
    arrays = arrays_of(exports["npz"])
    spaces = np.full(MAX_META_BYTES + 1, ord(" "), np.uint8)
    bomb = npz_of({**arrays, "meta.json": spaces})
    with pytest.raises(TraceError, match=r"meta\.json is 16 MB, more than the 16 MB allowed"):
        read_trace(bomb, "spaces.npz")
    assert peak_while(lambda: read_trace(bomb, "spaces.npz")) < 8 * 2**20


def test_the_memory_a_trace_would_take_is_asked_before_it_is_parsed(exports) -> None:
    for suffix, data in exports.items():
        read_trace(data, f"ok.{suffix}", max_bytes=64 * 2**20)
        with pytest.raises(TraceError, match="would take .* in memory once read, more than this server keeps") as e:
            read_trace(data, f"big.{suffix}", max_bytes=1000)
        # a JSON trace costs its parsing: the same trace as .npz is the way out (bench/bombs.py: 48 MB of JSON)
        assert ("save it as .npz instead" in str(e.value)) == (suffix == "json")
        assert peak_while(lambda d=data, s=suffix: read_trace(d, f"big.{s}", max_bytes=1000)) < len(data) + 2**20


def test_parsing_a_json_trace_takes_at_most_the_bound_asked_for_it(exports) -> None:
    data = exports["json"]
    peak = peak_while(lambda: read_trace(data, "t.json"))
    assert peak <= JSON_PARSED_PER_BYTE * len(data), (peak, len(data))


def test_notebook_arguments_of_the_wrong_type_are_one_trace_error(exports) -> None:
    with pytest.raises(TraceError, match="file name is a string"):
        read_trace(exports["json"], None)  # type: ignore[arg-type]
    with pytest.raises(TraceError, match="read from bytes, not str"):
        read_trace("{}", "t.json")  # type: ignore[arg-type]


@pytest.mark.parametrize("suffix", ["npz", "json"])
def test_damaged_traces_raise_only_trace_errors(exports, suffix: str) -> None:
    """Seeded damage: bytes flipped, cut, repeated; every outcome is a trace or a TraceError."""
    rng = random.Random(0)
    data = exports[suffix]
    for case in range(300):
        damaged = bytearray(data)
        how = case % 3
        if how == 0:
            for _ in range(rng.randint(1, 8)):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        elif how == 1:
            damaged = damaged[: rng.randrange(len(damaged))]
        else:
            at = rng.randrange(len(damaged))
            damaged[at:at] = damaged[at : at + rng.randint(1, 64)] * rng.randint(1, 4)
        try:
            read_trace(bytes(damaged), f"d{case}.{suffix}")
        except TraceError:
            pass
