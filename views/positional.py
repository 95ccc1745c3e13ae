"""Positional encoding: the model's own table as a heatmap, chosen dimensions as curves, and PE·PE similarity."""

from __future__ import annotations

import streamlit as st

from analysis.analyze import positions_used
from ui import cache, errors, sidebar, state
from ui.says import figure_says
from ui.widgets import show_chart
from viz.labels import safe_filename
from viz.positional import METRICS, encoding_curves, encoding_heatmap, similarity, similarity_heatmap

PE_POSITIONS = state.url_key("pe_positions", int)  # how many positions the charts show
PE_DIMS = state.url_list("pe_dims", "pe_dims", state.FromOne(), write=state.ToOne())  # 1-based, as labelled
PE_METRIC = state.url_key("pe_metric")  # one of viz.positional.METRICS


SAYS = {  # what to look at in the table
    "sinusoidal": "Each row is one position's vector: the first dimensions change fast down the rows, the last slowly.",
    "learned": "Each row is the vector the model learned for one position: no two rows are the same.",
    "rotary": "Each row is one position's angles: the first change fast from row to row, the last ones slowly.",
}


def body() -> None:
    st.title("Positional encoding")
    source = sidebar.context()
    if source is None:
        return
    cfg = source.ckpt.config
    sinusoidal = cfg.positional == "sinusoidal"
    captions = {
        "sinusoidal": "Sinusoidal (fixed): PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(pos/10000^(2i/d)), "
        "added to the token embedding.",
        "learned": "Learned: one trained vector per position, added to the token embedding.",
        "rotary": "Rotary (RoPE, fixed): nothing is added to the token. Each head's query and key are turned instead: "
        "their dimensions i and i + d_head/2 rotate together by the angle pos · base^(−2i/d_head), so the score "
        "q·k depends on how far apart two tokens are. Shown: each position's cos | sin of those angles "
        f"(d_head = {cfg.d_model // cfg.n_heads}: {cfg.d_model // cfg.n_heads // 2} angles), the same in every "
        "head and layer.",
    }
    figure = st.container()  # the figure and its sentence first, the slider that sizes it under them
    st.caption(captions.get(cfg.positional, f"{cfg.positional} positions."))
    if cfg.positional == "sinusoidal":
        st.caption("Positions and dimensions count from 1 here: position 1 is pos = 0 in the formula, dim 1 is 2i = 0.")
    table = cache.positional_table(source.path, source.stamp)
    used = positions_used(source.ckpt, source.text)
    top = min(cfg.max_len, 128)
    # Each value is seeded in session state, not as its widget's default: ui.state.keep_state re-assigns it.
    n = cfg.max_len
    if cfg.max_len > 2:
        state.keep_valid(PE_POSITIONS, state.Between(2, cfg.max_len), top)
        n = st.slider("Positions shown", 2, cfg.max_len, key=PE_POSITIONS)
    name = safe_filename("positional", source.entry.name)
    show_chart(encoding_heatmap(table, n, used), "pe_heatmap", name, where=figure)
    says = SAYS.get(cfg.positional, "Each row is one position's vector: no two rows are the same.")
    if used:
        says += f" The dashed line ends the {used:d} positions the current input uses."
    figure_says(says, figure)
    d = table.shape[1]  # d_model added to the embeddings; rotary: the cos | sin columns of one head
    default = sorted({0, 1, min(d - 1, d // 4 * 2), min(d - 1, d // 4 * 2 + 1)})
    state.keep_valid(PE_DIMS, list(range(d)), default)
    dims = st.multiselect("Dimensions", list(range(d)), key=PE_DIMS, format_func=lambda i: f"{i + 1}")
    if dims:
        curves = encoding_curves(table, dims, n, sinusoidal)
        show_chart(curves, "pe_curves", f"{name}-curves")
    state.keep_valid(PE_METRIC, list(METRICS), METRICS[0])
    metric = st.radio("Similarity", METRICS, key=PE_METRIC, horizontal=True)
    sim = similarity_heatmap(similarity(table, n, metric), metric)
    show_chart(sim, "pe_similarity", f"{name}-similarity")


errors.guarded(body)
