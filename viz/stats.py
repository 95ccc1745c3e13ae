"""Per-head statistics: entropy, mean attention distance, previous-token, first-token (sink) and diagonal scores."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.record import Analysis
from model.names import parse_attention_type, sublayer_name

COLUMNS = ("entropy_bits", "mean_distance", "previous_token", "first_token", "diagonal")


def _valid_rows(mask: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    """Queries that may attend somewhere (padding queries have all-False mask rows and all-zero weights)."""
    if mask is None:
        return np.ones(shape[-2], dtype=bool)
    return np.asarray(mask, dtype=bool).any(axis=-1)


def entropy_bits(weights: np.ndarray) -> np.ndarray:
    """Shannon entropy in bits over the last axis, 0·log 0 = 0."""
    w = np.asarray(weights, dtype=np.float64)
    logs = np.log2(np.where(w > 0, w, 1.0))
    return -(w * logs).sum(axis=-1)


def head_scores(weights: np.ndarray, mask: np.ndarray | None = None, self_attention: bool = True) -> pd.DataFrame:
    """One row per head of (H, Tq, Tk) weights, averaged over the queries that may attend.

    entropy_bits: how spread out each query's attention is (0 = one key only).
    mean_distance: Σ_k w·|q − k| in positions, averaged over queries (self-attention only).
    previous_token: weight on key q − 1 (queries q ≥ 1); 1.0 for a pure previous-token head.
    first_token: weight on key 0 (a "sink" head parks its attention there).
    diagonal: weight on key q itself (self-attention only).
    Distance, previous-token and diagonal scores are NaN for cross-attention, whose keys are another sequence.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 3:
        raise ValueError(f"expected (heads, queries, keys) weights, got shape {w.shape}")
    _, tq, tk = w.shape
    if mask is not None and np.asarray(mask).shape != (tq, tk):
        raise ValueError(f"mask of shape {np.asarray(mask).shape} does not match weights (…, {tq}, {tk})")
    rows = _valid_rows(mask, w.shape)
    if not rows.any():
        rows = np.ones(tq, dtype=bool)
    q = np.arange(tq)[:, None]
    k = np.arange(tk)[None, :]
    data = {
        "entropy_bits": entropy_bits(w)[:, rows].mean(axis=1),
        "first_token": w[:, rows, 0].mean(axis=1),
    }
    nan = np.full(w.shape[0], np.nan)
    if self_attention and tq == tk:
        data["mean_distance"] = (w * np.abs(q - k))[:, rows].sum(axis=-1).mean(axis=1)
        prev_rows = rows & (np.arange(tq) >= 1)
        prev = w[:, np.arange(1, tq), np.arange(0, tq - 1)] if tq > 1 else np.zeros((w.shape[0], 0))
        data["previous_token"] = prev[:, prev_rows[1:]].mean(axis=1) if prev_rows.any() else nan
        data["diagonal"] = np.diagonal(w, axis1=1, axis2=2)[:, rows].mean(axis=1)
    else:
        data |= {"mean_distance": nan, "previous_token": nan, "diagonal": nan}
    frame = pd.DataFrame({c: data[c] for c in COLUMNS})
    frame.insert(0, "head", np.arange(w.shape[0]))
    return frame


def head_table(analysis: Analysis) -> pd.DataFrame:
    """Every head of every attention sub-layer: attention, label, layer, head and the scores of `head_scores`."""
    frames = []
    for sublayer in analysis.sublayers.values():
        scores = head_scores(sublayer.weights, sublayer.mask, self_attention=sublayer.attention.endswith(".self_attn"))
        scores.insert(0, "layer", sublayer.layer)
        scores.insert(0, "label", analysis.attention_label(sublayer.attention))
        scores.insert(0, "attention", sublayer.attention)
        frames.append(scores)
    table = pd.concat(frames, ignore_index=True).astype({"layer": int, "head": int})
    order = {attention: i for i, attention in enumerate(analysis.attentions)}
    table = table.sort_values(
        ["attention", "layer", "head"], key=lambda c: c.map(order) if c.name == "attention" else c
    )
    return table.reset_index(drop=True)


def for_display(table: pd.DataFrame) -> pd.DataFrame:
    """The head table as people read it: layers and heads numbered from 1, the internal attention key
    dropped and its label shown under the name "attention"."""
    return (
        table.drop(columns=["attention"])
        .rename(columns={"label": "attention"})
        .assign(layer=table["layer"] + 1, head=table["head"] + 1)
    )


PROBE_COLUMNS = ("induction", "previous_token_probe")


def with_probe_scores(
    table: pd.DataFrame, induction: dict[str, list[float]], previous_token: dict[str, list[float]]
) -> pd.DataFrame:
    """The head table with each head's induction and previous-token score on the induction probe (a run of random
    tokens repeated: analysis.induction), by sub-layer name (`decoder.layers.1.self_attn`); NaN for sub-layers the probe
    did not score (cross-attention, an encoder)."""
    names = [
        sublayer_name(parse_attention_type(attention)[0], int(layer), parse_attention_type(attention)[1])
        for attention, layer in zip(table["attention"], table["layer"], strict=True)
    ]
    out = table.copy()
    for column, scores in zip(PROBE_COLUMNS, (induction, previous_token), strict=True):
        out[column] = [
            scores[name][head] if name in scores and head < len(scores[name]) else np.nan
            for name, head in zip(names, table["head"], strict=True)
        ]
    return out


def column_grid(table: pd.DataFrame, column: str) -> dict[str, np.ndarray]:
    """One column of the head table as attention type → (layers, heads) grid, for a heatmap of every head; the
    attention types the column leaves empty (a probe score on cross-attention) are left out."""
    grids = {}
    for attention, rows in table.groupby("attention", sort=False):
        grid = rows.pivot(index="layer", columns="head", values=column).sort_index().sort_index(axis=1)
        if not grid.isna().to_numpy().any():
            grids[str(attention)] = grid.to_numpy(dtype=float)
    return grids
