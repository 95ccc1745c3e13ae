"""Lesson step 12: attention's O(n²) cost, measured on the loaded model at growing lengths."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis.lesson import (
    Cost,
)
from ui import cache
from ui.cache import Source
from ui.markdown import literal
from ui.widgets import data_table
from views.lesson_steps.layout import chart, side_by_side
from viz.lesson import cost_figure


def growth_sentence(cost: Cost, d: int) -> str:
    """What the cost step's measurements say: how the measured time and memory grow from n/2 to n (the table's
    medians, so the sentence matches the figure on every visit), set against what counting multiply-adds predicts
    for width `d`, whichever way the measurement falls."""
    low, high, grew = cost.growth(cost.seconds)
    memory = cost.growth(tuple(float(b) for b in cost.bytes))[2]
    counted = (4 * high * d + 2 * high**2) / (4 * low * d + 2 * low**2)  # (4·n·d² + 2·n²·d) at n over at n/2, ÷ d
    if grew < 3:
        reads = "nearer the 2× of a linear cost than the 4× of a pure n² one"
    elif grew < 4:
        reads = "between the 2× of a linear cost and the 4× of a pure n² one, nearer the n²"
    else:
        reads = "as much as a pure n² cost, 4×, or more"
    return (
        f"From n = {low} to n = {high} the measured time grows {grew:.1f}× and the memory {memory:.1f}×: the time "
        f"{reads}. The sub-layer's four projections cost 4·n·d² multiply-adds against 2·n²·d for QKᵀ and the weighted "
        f"sum (d = {d}): equal at n = 2d = {2 * d}, with the n² part taking over beyond it; counted so, the work "
        f"grows {counted:.1f}×."
    )


def quadratic(source: Source) -> None:
    cost = cache.attention_cost(source.path, source.stamp)
    ms = [s * 1000 for s in cost.seconds]
    kib = [b / 1024 for b in cost.bytes]
    left, right = side_by_side(2)
    with left:
        fit = [c * 1000 for c in cost.time_fit]
        chart(cost_figure(cost.lengths, ms, fit, "Time of one attention sub-layer", "ms"), "time", source.entry.name)
    with right:
        fit = [c / 1024 for c in cost.bytes_fit]
        chart(cost_figure(cost.lengths, kib, fit, "Memory: scores + weights", "KiB"), "memory", source.entry.name)
    heads, d = source.ckpt.config.n_heads, source.ckpt.config.d_model
    clock = "CPU time of the thread running it" if cost.clock == "CPU" else "elapsed time"
    st.caption(
        f"{literal(cost.sublayer)}, measured on the machine running this app when the step was first opened ({clock}), "
        f"the median of {cost.repeats:d} runs at each of {len(cost.lengths)} lengths. {growth_sentence(cost, d)} "
        f"Memory: {cost.bytes_fit[0]:.0f} bytes per n² = 2 matrices (scores, weights) × {heads} heads × 4 bytes."
    )
    table = pd.DataFrame({"n": list(cost.lengths), "time (ms)": ms, "scores + weights (KiB)": kib})
    data_table(table, hide_index=True, key="lesson_cost")
