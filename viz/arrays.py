"""Compact arrays for the browser: block-averaged thumbnails and uint8 quantisation."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

THUMBNAIL = 64  # largest side of one head's thumbnail in the all-heads grid


def check_attention(weights: np.ndarray, query_labels: Sequence[str], key_labels: Sequence[str]) -> np.ndarray:
    """`weights` as a float32 (Tq, Tk) array, or a ValueError saying how it disagrees with the tokens."""
    arr = np.asarray(weights, dtype=np.float32)
    if arr.ndim != 2:
        raise ValueError(f"attention must be a 2-D (queries, keys) matrix, got shape {arr.shape}")
    if arr.shape != (len(query_labels), len(key_labels)):
        raise ValueError(
            f"attention of shape {arr.shape} does not match {len(query_labels)} query tokens "
            f"× {len(key_labels)} key tokens"
        )
    return arr


def _bounds(n: int, size: int) -> np.ndarray:
    return np.linspace(0, n, size + 1).round().astype(int)[:-1]


def block_of(n: int, max_size: int, index: int) -> int:
    """The block of `block_average` (shrinking an axis of `n` to at most `max_size`) that holds position `index`."""
    if n <= max_size:
        return index
    return int(np.searchsorted(_bounds(n, max_size), index, side="right")) - 1


def block_average(a: np.ndarray, max_size: int = THUMBNAIL) -> np.ndarray:
    """Shrink the last two axes to at most `max_size` each by averaging contiguous blocks (keeps row sums' mean).

    A 256×256 matrix becomes 64×64 means of 4×4 blocks; smaller matrices are returned unchanged.
    """
    a = np.asarray(a, dtype=np.float32)
    rows, cols = a.shape[-2:]
    out = a
    if rows > max_size:
        starts = _bounds(rows, max_size)
        counts = np.diff(np.append(starts, rows))
        out = np.add.reduceat(out, starts, axis=-2) / counts[:, None]
    if cols > max_size:
        starts = _bounds(cols, max_size)
        counts = np.diff(np.append(starts, cols))
        out = np.add.reduceat(out, starts, axis=-1) / counts
    return out.astype(np.float32)


def quantize(a: np.ndarray) -> np.ndarray:
    """Values in [0, 1] → uint8 0–255 (1/255 resolution: plenty for a colour, 4× smaller than float32)."""
    return np.clip(np.rint(np.asarray(a, dtype=np.float64) * 255.0), 0, 255).astype(np.uint8)
