"""The model's own positional encoding: positions × dimensions, chosen dimensions as curves, and PE·PE similarity."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.style import AT_FIRST, COLORSCALE, DIVERGING, FIRST, finish, tick_step

METRICS = ("cosine", "dot product")


def _rows(table: np.ndarray, n_positions: int | None) -> np.ndarray:
    arr = np.asarray(table, dtype=np.float32)
    if arr.ndim != 2:
        raise ValueError(f"expected a (positions, dimensions) table, got shape {arr.shape}")
    n = arr.shape[0] if n_positions is None else max(1, min(int(n_positions), arr.shape[0]))
    return arr[:n]


def dimension_label(dim: int, d_model: int, sinusoidal: bool) -> str:
    """`dim 4 · sin, wavelength 2π·10000^(4/d)` for sinusoidal tables, `dim 4` for learned ones."""
    if not sinusoidal:
        return f"dim {dim + FIRST}"
    wave = 2 * np.pi * 10000 ** ((dim - dim % 2) / d_model)  # the paper's 2i counts from 0
    return f"dim {dim + FIRST} · {'cos' if dim % 2 else 'sin'}, wavelength {wave:,.1f}"


def encoding_heatmap(table: np.ndarray, n_positions: int | None = None, used: int | None = None) -> go.Figure:
    """Positions (rows) × dimensions (columns) of the encoding; a line marks the positions the input used."""
    rows = _rows(table, n_positions)
    bound = float(np.abs(rows).max()) or 1.0
    fig = go.Figure(
        go.Heatmap(
            z=rows,
            zmin=-bound,
            zmax=bound,
            colorscale=DIVERGING,
            hovertemplate="position %{y}, dim %{x}: %{z:.3f}<extra></extra>",
            colorbar={"thickness": 12},
            **AT_FIRST,
        )
    )
    if used is not None and 0 < used <= rows.shape[0]:
        fig.add_hline(y=used + FIRST - 0.5, line={"color": "black", "width": 2, "dash": "dash"})
    fig.update_xaxes(title_text="dimension", showgrid=False)
    fig.update_yaxes(title_text="position", autorange="reversed", showgrid=False)
    return finish(fig, "Positional encoding: positions × dimensions", height=min(480, 200 + 3 * rows.shape[0]))


def encoding_curves(
    table: np.ndarray, dims: Sequence[int], n_positions: int | None = None, sinusoidal: bool = True
) -> go.Figure:
    """The chosen dimensions as curves over position (sin/cos waves of growing wavelength when sinusoidal)."""
    rows = _rows(table, n_positions)
    d_model = rows.shape[1]
    bad = [d for d in dims if not 0 <= int(d) < d_model]
    if bad:
        raise ValueError(f"dimensions {bad} are outside 0..{d_model - 1}")
    x = np.arange(FIRST, rows.shape[0] + FIRST, dtype=np.int32)
    fig = go.Figure()
    for d in dims:
        name = dimension_label(int(d), d_model, sinusoidal)
        fig.add_trace(go.Scatter(x=x, y=rows[:, int(d)], mode="lines", name=name))
    fig.update_xaxes(title_text="position")
    fig.update_yaxes(title_text="value")
    fig.update_layout(legend={"orientation": "h", "y": -0.25})
    return finish(fig, "Chosen dimensions over position", height=420)


def similarity(table: np.ndarray, n_positions: int | None = None, metric: str = "cosine") -> np.ndarray:
    """(n, n) PE·PE between positions: the dot product, or the cosine when `metric == "cosine"`."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    rows = _rows(table, n_positions).astype(np.float64)
    if metric == "cosine":
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        rows = rows / np.where(norms > 0, norms, 1.0)
    return (rows @ rows.T).astype(np.float32)


def similarity_heatmap(sim: np.ndarray, metric: str = "cosine") -> go.Figure:
    """Heatmap of a position × position similarity matrix."""
    sim = np.asarray(sim, dtype=np.float32)
    if sim.ndim != 2 or sim.shape[0] != sim.shape[1]:
        raise ValueError(f"expected a square similarity matrix, got shape {sim.shape}")
    heatmap = {"z": sim, "colorscale": COLORSCALE, "colorbar": {"thickness": 12}}
    if metric == "cosine":
        heatmap |= {"zmin": -1.0, "zmax": 1.0, "colorscale": DIVERGING}
    hover = "position %{y} · position %{x}: %{z:.3f}<extra></extra>"
    fig = go.Figure(go.Heatmap(**heatmap, **AT_FIRST, hovertemplate=hover))
    step = tick_step(sim.shape[0], 16)
    # listed, so that a narrow chart shows every m-th (viz.ticks); both axes keep their range where the square
    # plot is narrower than the chart is tall (a phone): else the rows' axis ran from −79 to 201
    shown = list(range(FIRST, sim.shape[0] + FIRST, step))
    ticks = {"tickmode": "array", "tickvals": shown, "ticktext": [str(t) for t in shown], "showgrid": False}
    fig.update_xaxes(title_text="position", constrain="domain", **ticks)
    fig.update_yaxes(title_text="position", autorange="reversed", scaleanchor="x", constrain="domain", **ticks)
    return finish(fig, f"Similarity between positions ({metric})", height=560)
