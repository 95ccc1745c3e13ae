"""The class link's QR code (viz/qr.py), against the standard's own vectors: the Reed-Solomon codewords of
ISO/IEC 18004's worked example, the format-bit and version-bit tables, and the symbol's fixed patterns."""

from __future__ import annotations

import pytest

from viz import qr


def test_reed_solomon_matches_the_standards_worked_example() -> None:
    # ISO/IEC 18004 Annex I: "01234567" as 1-M, its 16 data codewords and 10 error-correction codewords.
    data = [0x10, 0x20, 0x0C, 0x56, 0x61, 0x80] + [0xEC, 0x11] * 5
    assert qr.rs_ecc(data, 10) == [0xA5, 0x24, 0xD4, 0xC1, 0xED, 0x36, 0xC7, 0x87, 0x2C, 0x55]


@pytest.mark.parametrize(
    ("level", "mask", "bits"),
    [(0, 0, "101010000010010"), (0, 5, "100000011001110"), (1, 0, "111011111000100"), (1, 7, "110100101110110")],
)
def test_format_bits_match_the_standards_table(level: int, mask: int, bits: str) -> None:
    assert qr.format_bits(mask, level) == int(bits, 2)


def test_version_bits_match_the_standards_table() -> None:
    assert qr.version_bits(7) == int("000111110010010100", 2)
    assert qr.version_bits(10) == int("001010010011010011", 2)


def test_the_link_fits_the_smallest_version_and_keeps_finders_and_timing() -> None:
    link = "http://192.168.1.20:8501/?class=ABC23"
    grid = qr.matrix(link)
    version, words = qr.codewords(link.encode())
    assert len(grid) == 4 * version + 17 and version == 3  # 37 bytes: more than 2-M's 26, within 3-M's 42
    assert len(words) == qr._raw_modules(version) // 8
    finder = [[max(abs(dx), abs(dy)) != 2 for dx in range(-3, 4)] for dy in range(-3, 4)]
    n = len(grid)
    for top, left in ((0, 0), (0, n - 7), (n - 7, 0)):
        assert [row[left : left + 7] for row in grid[top : top + 7]] == finder
    assert [grid[6][x] for x in range(8, n - 8)] == [x % 2 == 0 for x in range(8, n - 8)]
    assert grid[n - 8][8]  # the dark module


def test_the_format_bits_name_a_mask_the_symbol_uses_in_both_copies() -> None:
    grid = qr.matrix("http://example.org/?class=XYZ99")
    n = len(grid)
    first = [grid[i][8] for i in (0, 1, 2, 3, 4, 5, 7, 8)] + [grid[8][7]] + [grid[8][14 - i] for i in range(9, 15)]
    second = [grid[8][n - 1 - i] for i in range(8)] + [grid[n - 15 + i][8] for i in range(8, 15)]
    bits = sum(on << i for i, on in enumerate(first))
    assert bits == sum(on << i for i, on in enumerate(second))
    assert bits in {qr.format_bits(mask) for mask in range(8)}


def test_a_link_too_long_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="at most 213 bytes"):
        qr.matrix("x" * 214)


def test_the_svg_names_itself_for_a_screen_reader() -> None:
    image = qr.svg("http://example.org/?class=XYZ99", 'Class "XYZ99"')
    assert image.startswith("<svg") and 'aria-label="Class &quot;XYZ99&quot;"' in image
