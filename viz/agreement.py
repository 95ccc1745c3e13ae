"""Do the explanations agree (analysis.agreement), as tables and figures: each head's importance by each method,
their ranks, the methods' Spearman rank correlations, and the heads the methods disagree on most. Layers and heads
count from 1."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz.style import COLORSCALE, DIVERGING, finish_layout, unvalidated

SIGNED = ("direct logit attribution", "activation patching", "attribution patching")  # analysis.agreement.SIGNED
MARK = " ◀"  # after a head's label on the ranks figure: one of the heads the methods disagree on most


def agreement_frame(scores: dict[str, np.ndarray]) -> pd.DataFrame:
    """method → (L, H) scores as one table: a row per head, indexed by (layer, head) from 1, a column per method in
    the order given."""
    first = next(iter(scores.values()))
    layers, heads = first.shape
    index = pd.MultiIndex.from_product([range(1, layers + 1), range(1, heads + 1)], names=["layer", "head"])
    return pd.DataFrame({m: np.asarray(s, dtype=np.float64).reshape(-1) for m, s in scores.items()}, index=index)


def importance_ranks(frame: pd.DataFrame) -> pd.DataFrame:
    """Each method's ranking of the heads, 1 the most important: by the value, by its magnitude for a signed method
    (a head that pushes against the answer matters as one that pushes for it); ties share their mean rank, NaN
    stays NaN."""
    magnitude = frame.copy()
    for column in frame.columns.intersection(SIGNED):
        magnitude[column] = frame[column].abs()
    return magnitude.rank(ascending=False, method="average")


def rank_correlations(frame: pd.DataFrame) -> pd.DataFrame:
    """Spearman's rank correlation of every two methods: the Pearson correlation of their ranks
    (`importance_ranks`), over the heads both scored; NaN for a method without scores."""
    return importance_ranks(frame).corr(method="pearson")


def disagreements(frame: pd.DataFrame, n: int = 3) -> pd.DataFrame:
    """The `n` heads whose ranks spread the widest across the methods: layer, head, the spread (highest rank −
    lowest), and the methods that rank it highest and lowest with those ranks; the widest first."""
    ranks = importance_ranks(frame).dropna(axis=1, how="all")
    spread = ranks.max(axis=1) - ranks.min(axis=1)
    order = spread.sort_values(ascending=False, kind="stable").index[:n]
    rows = []
    for layer, head in order:
        row = ranks.loc[(layer, head)]
        high, low = row.idxmin(), row.idxmax()
        rows.append((layer, head, float(spread[(layer, head)]), high, float(row[high]), low, float(row[low])))
    columns = ["layer", "head", "spread", "ranked highest by", "rank", "ranked lowest by", "lowest rank"]
    return pd.DataFrame(rows, columns=columns)


def _rank(value: float) -> str:
    return f"{value:g}"


def disagreement_line(frame: pd.DataFrame) -> str:
    """One sentence: the head the methods disagree on most, and the two methods least alike."""
    worst = disagreements(frame, 1)
    if worst.empty:
        return "No method scored any head."
    top = worst.iloc[0]
    line = (
        f"They disagree most on layer {top['layer']} head {top['head']}: ranked {_rank(top['rank'])} of "
        f"{len(frame)} by {top['ranked highest by']} and {_rank(top['lowest rank'])} by {top['ranked lowest by']}."
    )
    corr = rank_correlations(frame)
    pairs = [(corr.loc[a, b], a, b) for i, a in enumerate(corr.columns) for b in corr.columns[i + 1 :]]
    pairs = [p for p in pairs if np.isfinite(p[0])]
    if pairs:
        rho, a, b = min(pairs)
        line += f" The least alike: {a} and {b} (Spearman ρ = {rho:.2f})."
    return line


def head_label(layer: int, head: int) -> str:
    return f"layer {layer} head {head}"


def ranks_heatmap(frame: pd.DataFrame, title: str, marked: int = 3) -> go.Figure:
    """Heads (rows) × methods (columns), each cell the head's rank by that method (1 the most important, bright);
    the `marked` heads the methods disagree on most end their label with ◀."""
    ranks = importance_ranks(frame)
    flagged = {(int(r.layer), int(r.head)) for r in disagreements(frame, marked).itertuples()}
    rows = [head_label(*key) + (MARK if key in flagged else "") for key in ranks.index]
    z = np.where(np.isfinite(ranks.to_numpy()), ranks.to_numpy(), None)
    heatmap: dict[str, Any] = {"z": z.tolist(), "x": list(ranks.columns), "y": rows, "zmin": 1, "zmax": len(ranks)}
    heatmap |= {"colorscale": COLORSCALE, "reversescale": True}
    heatmap["colorbar"] = {"title": {"text": "rank"}, "thickness": 12}
    heatmap["hovertemplate"] = "%{y}, %{x}: rank %{z}<extra></extra>"
    layout = {
        "xaxis": {"title": {"text": "method"}, "tickangle": -30, "type": "category", "side": "top"},
        "yaxis": {"autorange": "reversed", "type": "category"},
        **finish_layout(title, height=min(1400, max(360, 14 * len(rows) + 220))),
    }
    return unvalidated([{"type": "heatmap", **heatmap}], layout)


def correlation_heatmap(corr: pd.DataFrame, title: str) -> go.Figure:
    """The methods' rank correlations (`rank_correlations`), −1 to 1, each cell's value written in it."""
    values = corr.to_numpy()
    z = np.where(np.isfinite(values), values, None)
    text = [[f"{v:.2f}" if np.isfinite(v) else "" for v in row] for row in values]
    heatmap: dict[str, Any] = {"z": z.tolist(), "x": list(corr.columns), "y": list(corr.index), "zmin": -1, "zmax": 1}
    heatmap |= {"colorscale": DIVERGING, "text": text, "texttemplate": "%{text}", "colorbar": {"thickness": 12}}
    heatmap["hovertemplate"] = "%{y} and %{x}: ρ = %{z:.2f}<extra></extra>"
    layout = {
        "xaxis": {"tickangle": -30, "type": "category"},
        "yaxis": {"autorange": "reversed", "type": "category"},
        **finish_layout(title, height=460),
    }
    return unvalidated([{"type": "heatmap", **heatmap}], layout)
