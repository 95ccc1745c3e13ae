"""bench/classroom.py's equality check: a page of a class equals the same sentence typed alone, but for a rounded
figure one unit of its last digit apart (1e-7 of a batched pass can turn 11 % into 12 %); a rank, a position, a
word or a figure two units apart is a mismatch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
HOVER = "token 12: .<br>probability {} %, rank {}<br>the model's choice: . ({} %)"


@pytest.fixture(scope="module")
def classroom():
    pytest.importorskip("websockets")
    sys.path.insert(0, str(BENCH))
    try:
        import classroom
    finally:
        sys.path.remove(str(BENCH))
    return classroom


def test_a_rounded_figure_one_unit_apart_is_the_same_page(classroom) -> None:
    assert classroom.same_text(HOVER.format(11, 1, 11), HOVER.format(12, 1, 12))  # the bench's own mismatch
    assert classroom.same_text("x 9 %", "x 10 %") and classroom.same_text("0.51", "0.52")
    assert classroom.same_texts(("a", "11 %"), ("a", "12 %"))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (HOVER.format(11, 1, 11), HOVER.format(11, 2, 11)),  # a rank is no rounded figure
        ("token 12", "token 13"),
        ("11 %", "13 %"),
        ("0.51", "0.53"),
        ("a 1 %", "b 1 %"),
        ("11%", "12 %"),
        ("7", "7.0"),
        ("11 % and 4 %", "11 %"),
    ],
)
def test_anything_else_that_differs_is_a_mismatch(classroom, a: str, b: str) -> None:
    assert not classroom.same_text(a, b)
    assert not classroom.same_texts((a,), (b,))


def test_pages_of_other_lengths_differ(classroom) -> None:
    assert not classroom.same_texts(("a",), ("a", "b"))
