"""A QR code for a class's student link, as SVG, in pure Python: no QR package is installed, and a link is short.

Byte mode, error correction level M (15 % of the symbol may be lost: a projector's glare), versions 1 to 10 (up to
213 bytes). The construction follows ISO/IEC 18004:2015 as Project Nayuki's reference encoder lays it out:
data bits → Reed-Solomon blocks over GF(256) (x⁸+x⁴+x³+x²+1) interleaved → function patterns (finders, timing,
alignment, format and version bits) → the zig-zag of codewords → the mask with the lowest penalty (rules 1, 2
and 4 of the standard's eight-mask evaluation; a reader reads whichever mask the format bits name).
"""

from __future__ import annotations

from html import escape

MAX_VERSION = 10
ECC_M_PER_BLOCK = (0, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26)  # by version: error-correction codewords per block
ECC_M_BLOCKS = (0, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5)  # by version: blocks
FORMAT_M = 0  # level M's two format bits (L 1, M 0, Q 3, H 2)

Grid = list[list[bool]]


def _gf_mul(x: int, y: int) -> int:
    """Product in GF(2⁸) modulo x⁸+x⁴+x³+x²+1."""
    z = 0
    for i in reversed(range(8)):
        z = (z << 1) ^ ((z >> 7) * 0x11D)
        z ^= ((y >> i) & 1) * x
    return z


def rs_ecc(data: list[int], degree: int) -> list[int]:
    """The `degree` Reed-Solomon error-correction codewords of `data` (generator roots α⁰ … α^(degree−1))."""
    divisor = [0] * (degree - 1) + [1]
    root = 1
    for _ in range(degree):
        for j in range(degree):
            divisor[j] = _gf_mul(divisor[j], root)
            if j + 1 < degree:
                divisor[j] ^= divisor[j + 1]
        root = _gf_mul(root, 0x02)
    remainder = [0] * degree
    for byte in data:
        factor = byte ^ remainder.pop(0)
        remainder.append(0)
        for i, coefficient in enumerate(divisor):
            remainder[i] ^= _gf_mul(coefficient, factor)
    return remainder


def format_bits(mask: int, level: int = FORMAT_M) -> int:
    """The 15 format bits: level and mask, BCH(15, 5) with generator 0x537, XOR 0x5412."""
    data = level << 3 | mask
    rem = data
    for _ in range(10):
        rem = (rem << 1) ^ ((rem >> 9) * 0x537)
    return (data << 10 | rem) ^ 0x5412


def version_bits(version: int) -> int:
    """The 18 version bits of versions 7 and above: Golay(18, 6) with generator 0x1F25."""
    rem = version
    for _ in range(12):
        rem = (rem << 1) ^ ((rem >> 11) * 0x1F25)
    return version << 12 | rem


def _raw_modules(version: int) -> int:
    """Modules left for data and error correction once the function patterns are drawn."""
    result = (16 * version + 128) * version + 64
    if version >= 2:
        count = version // 7 + 2
        result -= (25 * count - 10) * count - 55
        if version >= 7:
            result -= 36
    return result


def _data_codewords(version: int) -> int:
    return _raw_modules(version) // 8 - ECC_M_PER_BLOCK[version] * ECC_M_BLOCKS[version]


def _alignment_positions(version: int) -> list[int]:
    if version == 1:
        return []
    count = version // 7 + 2
    step = (version * 8 + count * 3 + 5) // (count * 4 - 4) * 2
    size = version * 4 + 17
    return [6] + sorted(size - 7 - i * step for i in range(count - 1))


def codewords(data: bytes) -> tuple[int, list[int]]:
    """The smallest version that holds `data` in byte mode at level M, and its codewords, blocks interleaved."""
    for version in range(1, MAX_VERSION + 1):
        count_bits = 8 if version <= 9 else 16
        capacity = _data_codewords(version)
        if 4 + count_bits + 8 * len(data) <= 8 * capacity:
            break
    else:
        raise ValueError(f"a QR code here holds at most 213 bytes, not {len(data)}: shorten the link")
    bits = [0, 1, 0, 0] + [(len(data) >> i) & 1 for i in reversed(range(count_bits))]
    bits += [(byte >> i) & 1 for byte in data for i in reversed(range(8))]
    bits += [0] * min(4, 8 * capacity - len(bits))  # the terminator
    bits += [0] * (-len(bits) % 8)
    words = [int("".join(map(str, bits[i : i + 8])), 2) for i in range(0, len(bits), 8)]
    words += [0xEC, 0x11] * ((capacity - len(words)) // 2 + 1)
    words = words[:capacity]
    n_blocks, ecc_len = ECC_M_BLOCKS[version], ECC_M_PER_BLOCK[version]
    raw = _raw_modules(version) // 8
    short_len = raw // n_blocks  # a short block's data and ecc; the long ones hold one data codeword more
    n_short = n_blocks - raw % n_blocks
    blocks, start = [], 0
    for i in range(n_blocks):
        length = short_len - ecc_len + (0 if i < n_short else 1)
        block = words[start : start + length]
        start += length
        blocks.append((block, rs_ecc(block, ecc_len)))
    out = [b[i] for i in range(short_len - ecc_len + 1) for b, _ in blocks if i < len(b)]
    out += [e[i] for i in range(ecc_len) for _, e in blocks]
    return version, out


def _function_patterns(version: int) -> tuple[Grid, Grid]:
    size = version * 4 + 17
    dark = [[False] * size for _ in range(size)]
    fixed = [[False] * size for _ in range(size)]

    def put(x: int, y: int, on: bool) -> None:
        dark[y][x], fixed[y][x] = on, True

    for i in range(size):
        put(6, i, i % 2 == 0)
        put(i, 6, i % 2 == 0)
    for cx, cy in ((3, 3), (size - 4, 3), (3, size - 4)):
        for dy in range(-4, 5):
            for dx in range(-4, 5):
                if 0 <= cx + dx < size and 0 <= cy + dy < size:
                    put(cx + dx, cy + dy, max(abs(dx), abs(dy)) not in (2, 4))
    positions = _alignment_positions(version)
    last = len(positions) - 1
    for i, ax in enumerate(positions):
        for j, ay in enumerate(positions):
            if (i, j) in ((0, 0), (0, last), (last, 0)):
                continue  # under a finder
            for dy in range(-2, 3):
                for dx in range(-2, 3):
                    put(ax + dx, ay + dy, max(abs(dx), abs(dy)) != 1)
    _draw_format(dark, fixed, 0)  # reserved now, written once the mask is chosen
    if version >= 7:
        bits = version_bits(version)
        for i in range(18):
            a, b = size - 11 + i % 3, i // 3
            put(a, b, (bits >> i) & 1 == 1)
            put(b, a, (bits >> i) & 1 == 1)
    return dark, fixed


def _draw_format(dark: Grid, fixed: Grid, mask: int) -> None:
    size = len(dark)
    bits = format_bits(mask)

    def put(x: int, y: int, i: int) -> None:
        dark[y][x], fixed[y][x] = (bits >> i) & 1 == 1, True

    for i in range(6):
        put(8, i, i)
    put(8, 7, 6)
    put(8, 8, 7)
    put(7, 8, 8)
    for i in range(9, 15):
        put(14 - i, 8, i)
    for i in range(8):
        put(size - 1 - i, 8, i)
    for i in range(8, 15):
        put(8, size - 15 + i, i)
    dark[size - 8][8], fixed[size - 8][8] = True, True  # the dark module


MASKS = (
    lambda x, y: (x + y) % 2 == 0,
    lambda x, y: y % 2 == 0,
    lambda x, y: x % 3 == 0,
    lambda x, y: (x + y) % 3 == 0,
    lambda x, y: (x // 3 + y // 2) % 2 == 0,
    lambda x, y: x * y % 2 + x * y % 3 == 0,
    lambda x, y: (x * y % 2 + x * y % 3) % 2 == 0,
    lambda x, y: ((x + y) % 2 + x * y % 3) % 2 == 0,
)


def _penalty(dark: Grid) -> int:
    """Rules 1 (runs of five or more), 2 (2×2 blocks) and 4 (balance of dark and light) of the standard."""
    size, score = len(dark), 0
    for lines in (dark, [list(col) for col in zip(*dark, strict=True)]):
        for line in lines:
            run = 1
            for a, b in zip(line, line[1:], strict=False):
                run = run + 1 if a == b else 1
                score += 3 if run == 5 else 1 if run > 5 else 0
    score += 3 * sum(
        dark[y][x] == dark[y][x + 1] == dark[y + 1][x] == dark[y + 1][x + 1]
        for y in range(size - 1)
        for x in range(size - 1)
    )
    total = sum(map(sum, dark))
    score += 10 * (abs(total * 20 - size * size * 10) // (size * size))
    return score


def matrix(text: str) -> Grid:
    """The QR symbol of `text` (UTF-8, byte mode, level M): rows of modules, True for dark."""
    version, words = codewords(text.encode("utf-8"))
    dark, fixed = _function_patterns(version)
    size = len(dark)
    i, right = 0, size - 1
    while right >= 1:
        if right == 6:
            right = 5  # the vertical timing pattern
        for vert in range(size):
            for j in range(2):
                x = right - j
                y = size - 1 - vert if (right + 1) & 2 == 0 else vert
                if not fixed[y][x] and i < len(words) * 8:
                    dark[y][x] = (words[i >> 3] >> (7 - (i & 7))) & 1 == 1
                    i += 1
        right -= 2
    best: Grid | None = None
    for mask, rule in enumerate(MASKS):
        masked = [[dark[y][x] ^ (not fixed[y][x] and rule(x, y)) for x in range(size)] for y in range(size)]
        _draw_format(masked, [row[:] for row in fixed], mask)
        if best is None or _penalty(masked) < _penalty(best):
            best = masked
    return best


def svg(text: str, label: str, module_px: int = 8) -> str:
    """The QR symbol of `text` as an SVG image with a four-module quiet zone; `label` is its accessible name."""
    grid = matrix(text)
    quiet, size = 4, len(grid)
    side = (size + 2 * quiet) * module_px
    path = "".join(
        f"M{(x + quiet) * module_px},{(y + quiet) * module_px}h{module_px}v{module_px}h-{module_px}z"
        for y, row in enumerate(grid)
        for x, on in enumerate(row)
        if on
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(label, quote=True)}" '
        f'width="{side}" height="{side}" viewBox="0 0 {side} {side}" shape-rendering="crispEdges">'
        f'<rect width="100%" height="100%" fill="#fff"/><path d="{path}" fill="#000"/></svg>'
    )
