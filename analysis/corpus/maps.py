"""A corpus profile read as pictures need it: one head's sampled query and key vectors in two dimensions (PCA), the
sampled positions nearest a position by that head's query (exact search: the sample is bounded), and every head
clustered by its profile (hierarchical clustering) and placed on a map (UMAP when umap-learn is installed, else
PCA)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

PATTERN_COLUMNS = ("previous_token", "first_token", "current_token", "same_token", "induction")
MAX_CLUSTERS = 8


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


@dataclass(frozen=True)
class HeadClusters:
    """Every head clustered by its profile: `features` (N, F) a row a head (`heads`: (layer, head), from 1) and a
    column a feature (`names`); `order` the rows in the dendrogram's leaf order; `cluster` each row's cluster,
    from 1, numbered in that order; `points` (N, 2) each head on a map made by `method` ("UMAP" or "PCA")."""

    heads: list[tuple[int, int]]
    names: list[str]
    features: np.ndarray
    order: list[int]
    cluster: list[int]
    points: np.ndarray
    method: str


def head_profiles(heads: pd.DataFrame, offsets: pd.DataFrame) -> tuple[list[tuple[int, int]], list[str], np.ndarray]:
    """Each head's profile: its five pattern shares, then its mean attention at each offset query − key that any
    head uses (an encoder's negative offsets; a language model has none); all are shares of attention, one scale.
    Returns (layer, head) a row, the feature names and the (N, F) features."""
    heads = heads.sort_values(["layer", "head"], kind="stable")
    cells = list(zip(heads["layer"].astype(int), heads["head"].astype(int)))
    grid = offsets.pivot_table(index=["layer", "head"], columns="offset", values="weight").reindex(cells)
    grid = grid.loc[:, (grid.to_numpy() > 0).any(axis=0)]
    names = [c.replace("_", " ") for c in PATTERN_COLUMNS] + [f"offset {int(o)}" for o in grid.columns]
    features = np.concatenate([heads[list(PATTERN_COLUMNS)].to_numpy(float), grid.to_numpy(float)], axis=1)
    return cells, names, features


def cluster_heads(features: np.ndarray, most: int = MAX_CLUSTERS) -> tuple[list[int], list[int]]:
    """Average-linkage clustering of the rows of `features` (N, F) by Euclidean distance, leaves in the optimal
    order: (rows in leaf order, each row's cluster from 1, numbered in leaf order). The tree is cut where the gap
    between one merge's height and the next is widest, into 2 to `most` clusters (the fewest at equal gaps)."""
    from scipy.cluster.hierarchy import fcluster, leaves_list, linkage, optimal_leaf_ordering

    n = len(features)
    if n < 3:
        return list(range(n)), list(range(1, n + 1))
    tree = optimal_leaf_ordering(linkage(features, method="average", metric="euclidean"), features)
    order = [int(i) for i in leaves_list(tree)]
    heights = np.concatenate([[0.0], tree[:, 2]])  # k clusters: the cut between heights[n − k] and heights[n − k + 1]
    ks = np.arange(2, min(most, n) + 1)
    gaps = heights[n - ks + 1] - heights[n - ks]
    labels = fcluster(tree, t=int(ks[int(np.argmax(gaps))]), criterion="maxclust")
    renumber: dict[int, int] = {}
    for row in order:
        renumber.setdefault(int(labels[row]), len(renumber) + 1)
    return order, [renumber[int(label)] for label in labels]


def embed_2d(features: np.ndarray) -> tuple[np.ndarray, str]:
    """(N, F) → (N, 2) and its method: UMAP (seeded) when umap-learn is installed and there are heads enough for
    its neighbourhoods, else the two principal axes."""
    if len(features) >= 8:
        try:
            import umap  # optional: not in the requirements
        except ImportError:
            pass
        else:
            reducer = umap.UMAP(n_neighbors=min(15, len(features) - 1), random_state=0)
            return np.asarray(reducer.fit_transform(features), dtype=np.float64), "UMAP"
    points, _ = pca_2d(features, features[:0])
    return points, "PCA"


def head_clusters(heads: pd.DataFrame, offsets: pd.DataFrame) -> HeadClusters:
    """Every head of a corpus profile (Corpus.heads, Corpus.offsets) clustered and mapped by its profile."""
    cells, names, features = head_profiles(heads, offsets)
    order, cluster = cluster_heads(features)
    points, method = embed_2d(features)
    return HeadClusters(cells, names, features, order, cluster, points, method)
