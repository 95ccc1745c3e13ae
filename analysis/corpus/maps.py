"""A corpus profile's head read as pictures need it: its sampled query and key vectors in two dimensions (PCA), and
the sampled positions nearest a position by that head's query (exact search: the sample is bounded)."""

from __future__ import annotations

import numpy as np


def pca_2d(queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, d) queries and keys → their (N, 2) coordinates on the two principal axes of both together (one joint map,
    as AttentionViz draws it), signs fixed so that the largest coordinate of each axis is positive."""
    both = np.concatenate([queries, keys]).astype(np.float64)
    centred = both - both.mean(0)
    _, _, axes = np.linalg.svd(centred, full_matrices=False)
    points = centred @ axes[:2].T
    if points.shape[1] < 2:
        points = np.pad(points, ((0, 0), (0, 2 - points.shape[1])))
    signs = np.sign(points[np.abs(points).argmax(0), np.arange(2)])
    points = points * np.where(signs == 0, 1, signs)
    return points[: len(queries)], points[len(queries) :]


def nearest(queries: np.ndarray, index: int, k: int) -> list[tuple[int, float]]:
    """The `k` rows of `queries` (N, d) nearest row `index` by cosine similarity, itself left out, nearest first
    (equal ones by row): (row, similarity)."""
    unit = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    similarity = unit @ unit[index]
    order = [i for i in np.lexsort((np.arange(len(unit)), -similarity)) if i != index][:k]
    return [(int(i), float(similarity[i])) for i in order]
