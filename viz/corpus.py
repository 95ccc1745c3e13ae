"""The Corpus page's figures: every head coloured by one corpus score, one head's scores over the texts, and one
head's sampled queries and keys on a map. Layers and heads count from 1."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viz.labels import escape
from viz.style import COLORSCALE, category_axis


def head_map(grid: np.ndarray, label: str, chosen: tuple[int, int]) -> go.Figure:
    """(L, H) one score a head → a heatmap, a row a layer; `chosen` (layer, head from 1) outlined."""
    layers, heads = grid.shape
    fig = go.Figure(
        go.Heatmap(
            z=grid.tolist(),
            x=list(range(1, heads + 1)),
            y=list(range(1, layers + 1)),
            colorscale=COLORSCALE,
            colorbar={"title": {"text": escape(label)}, "thickness": 12},
            texttemplate="%{z:.2f}" if layers * heads <= 16 * 12 else None,
            hovertemplate=f"layer %{{y}} · head %{{x}}: {escape(label)} %{{z:.3f}}<extra></extra>",
        )
    )
    layer, head = chosen
    fig.add_shape(type="rect", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5, y1=layer + 0.5, line={"width": 3})
    fig.update_layout(
        title={"text": f"Every head over the corpus: {escape(label)}"},
        xaxis={"title": {"text": "head"}, "dtick": 1},
        yaxis={"title": {"text": "layer"}, "dtick": 1, "autorange": "reversed"},
        height=max(260, 60 + 40 * layers),
        margin={"t": 50, "b": 40, "l": 50, "r": 20},
    )
    return fig


def distribution(values: np.ndarray, label: str, layer: int, head: int) -> go.Figure:
    """One head's score of each text, as a histogram."""
    fig = go.Figure(go.Histogram(x=values.tolist(), nbinsx=30, hovertemplate="%{x}: %{y} texts<extra></extra>"))
    fig.update_layout(
        title={"text": f"Layer {layer}, head {head}: {escape(label)} of each text"},
        xaxis={"title": {"text": escape(label)}},
        yaxis={"title": {"text": "texts"}},
        height=300,
        margin={"t": 50, "b": 40, "l": 50, "r": 20},
    )
    return fig


def vector_map(queries: np.ndarray, keys: np.ndarray, pieces: list[str], layer: int, head: int) -> go.Figure:
    """(N, 2) queries and keys of one head's sampled positions, one joint map, the piece on hover."""
    hover = [escape(p) for p in pieces]
    fig = go.Figure()
    for name, points, symbol in (("query", queries, "circle"), ("key", keys, "x")):
        fig.add_trace(
            go.Scatter(
                x=points[:, 0].tolist(),
                y=points[:, 1].tolist(),
                mode="markers",
                name=name,
                marker={"symbol": symbol, "size": 7},
                text=hover,
                hovertemplate=f"{name} %{{text}}<extra></extra>",
            )
        )
    fig.update_layout(
        title={"text": f"Layer {layer}, head {head}: sampled queries and keys (PCA)"},
        xaxis={"title": {"text": "axis 1"}},
        yaxis={"title": {"text": "axis 2"}},
        height=380,
        margin={"t": 50, "b": 40, "l": 50, "r": 20},
    )
    return fig


CLUSTER_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")  # Okabe–Ito


def cluster_heatmap(
    features: np.ndarray, names: list[str], heads: list[tuple[int, int]], order: list[int], cluster: list[int]
) -> go.Figure:
    """Every head's profile (N, F), a row a head in the dendrogram's order, its cluster in its label; layers and
    heads from 1."""
    rows = [f"L{heads[i][0]} H{heads[i][1]} · c{cluster[i]}" for i in order]
    columns = [escape(n) for n in names]
    fig = go.Figure(
        go.Heatmap(
            z=features[order].tolist(),
            x=columns,
            y=rows,
            colorscale=COLORSCALE,
            zmin=0,
            zmax=1,
            colorbar={"title": {"text": "share"}, "thickness": 12},
            hovertemplate="%{y} · %{x}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": "Heads clustered by their profiles"},
        # its labels listed (category_axis), so that a narrow chart shows every m-th of them (viz.ticks)
        xaxis={"title": {"text": "pattern share, then mean attention by offset"}, "tickangle": -60}
        | category_axis(columns),
        yaxis={"autorange": "reversed", "type": "category"},
        height=min(1600, 190 + 20 * len(rows)),  # a row: its label box (16 px) and a gap, under turned x labels
        margin={"t": 50, "b": 110, "l": 90, "r": 20},
    )
    return fig


# A head's name on the cluster map, as a share of the plot's width and height (about "L1 H2" in projector type on a
# chart of ~900 × 300 px): a name is drawn only where it covers no name drawn before it.
LABEL_WIDTH, LABEL_HEIGHT, SAME_PLACE = 0.085, 0.11, 0.04
PAD = 0.12  # each axis's range past its farthest points: the names above the top and end points stay on the chart


def _spans(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    low, high = points.min(axis=0), points.max(axis=0)
    return low, np.where(high > low, high - low, 1.0)


def head_labels(points: np.ndarray, heads: list[tuple[int, int]], cluster: list[int]) -> list[str]:
    """Each head's name on the cluster map, "" where it would cover another: heads of one cluster at one place share
    one name ("L1 H2, H3"); then, from the heads farthest from the middle (the map's outliers) inwards, a name is
    kept where its box, above its point, overlaps no name kept before it. Every head keeps its name on hover."""
    low, span = _spans(points)
    unit = (points - low) / span
    labels = [""] * len(heads)
    placed: list[tuple[float, float, float]] = []  # (x, y, half width) of each name kept
    order = np.argsort(-np.linalg.norm(unit - unit.mean(axis=0), axis=1), kind="stable")
    taken = set()
    for i in order:
        if i in taken:
            continue
        together = [
            j
            for j in range(len(heads))
            if j not in taken and cluster[j] == cluster[i] and np.abs(unit[j] - unit[i]).max() < SAME_PLACE
        ]
        taken.update(together)
        together.sort(key=lambda j: heads[j])
        name = f"L{heads[together[0]][0]} H{heads[together[0]][1]}"
        for j in together[1:]:
            layer, head = heads[j]
            name += f", H{head}" if layer == heads[together[0]][0] else f", L{layer} H{head}"
        half = LABEL_WIDTH * len(name) / 10
        x, y = unit[i]
        if all(abs(x - px) >= half + ph or abs(y - py) >= LABEL_HEIGHT for px, py, ph in placed):
            placed.append((x, y, half))
            labels[i] = name
    return labels


def cluster_map(points: np.ndarray, heads: list[tuple[int, int]], cluster: list[int], method: str) -> go.Figure:
    """(N, 2) every head on a map by its profile, a colour a cluster, a head's name where there is room for it
    (`head_labels`)."""
    labels = head_labels(points, heads, cluster)
    fig = go.Figure()
    for c in sorted(set(cluster)):
        rows = [i for i, k in enumerate(cluster) if k == c]
        fig.add_trace(
            go.Scatter(
                x=points[rows, 0].tolist(),
                y=points[rows, 1].tolist(),
                mode="markers+text",
                name=f"cluster {c}",
                marker={"size": 10, "color": CLUSTER_COLOURS[(c - 1) % len(CLUSTER_COLOURS)]},
                text=[labels[i] for i in rows],
                customdata=[f"L{heads[i][0]} H{heads[i][1]}" for i in rows],
                textposition="top center",
                cliponaxis=False,
                hovertemplate="%{customdata}<extra>cluster " + str(c) + "</extra>",
            )
        )
    low, span = _spans(points)
    fig.update_layout(
        title={"text": f"Heads by their profiles ({escape(method)})"},
        xaxis={"title": {"text": "axis 1"}, "range": [low[0] - PAD * span[0], low[0] + (1 + PAD) * span[0]]},
        yaxis={"title": {"text": "axis 2"}, "range": [low[1] - PAD * span[1], low[1] + (1 + 2 * PAD) * span[1]]},
        height=420,
        margin={"t": 50, "b": 40, "l": 50, "r": 20},
    )
    return fig
