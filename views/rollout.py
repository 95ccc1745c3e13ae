"""Attention rollout: a token × token map of what each output position draws from the input, through the layers."""

from __future__ import annotations

import streamlit as st

from analysis.record import Analysis
from analysis.rollout import RESIDUAL, analysis_rollout
from ui import errors, sidebar, state
from ui.says import figure_says
from ui.widgets import ATTENTION, show_chart, weighting_picker
from viz.heads import NORMS
from viz.labels import safe_filename
from viz.rollout import rollout_label, rollout_view

ROWS = {
    "encoder.self_attn": "Row i: where the encoder's output at source token i gets its information from, among the "
    "source tokens",
    "decoder.self_attn": "Row i: where decoder position i's information comes from, among the decoder's own input "
    "tokens (its self-attention alone; the source is left out). Cells above the diagonal are future tokens: "
    "masked, exactly 0",
    "decoder.cross_attn": "Row i: of what output position i draws from the source text, the part from each source "
    "token, through the encoder and the decoder",
}
LM_ROWS = "Row i: where position i's information comes from, among the tokens up to it. Cells above the diagonal "
LM_ROWS += "are future tokens: masked, exactly 0"
ROLLOUT_LAYER = state.url_index("rollout_layer", "rollout_L")  # the last one multiplied
ROLLOUT_RESIDUAL = state.url_switch("rollout_residual")
ROLLOUT_HEADS = state.url_list("rollout_heads", "rollout_H", state.FromOne(), write=state.ToOne())  # averaged


def _pickers(analysis: Analysis) -> tuple[str, bool, int, list[int]]:
    """Attention (a language model has one), residual, through which layer (0-based) and heads, validated against
    the analysis."""
    attentions = analysis.attentions
    state.keep_valid(ATTENTION, attentions, attentions[0])  # the attention type chosen on any page
    attention = attentions[0]
    if len(attentions) > 1:
        labels = {a: rollout_label(analysis, a) for a in attentions}  # not a closure over the analysis (ui.widgets)
        attention = st.radio("Rollout of", attentions, key=ATTENTION, format_func=labels.get, horizontal=True)
    cols = st.columns([2, 3], gap="medium")
    help_ = "Each layer as 0.5·A + 0.5·I: the residual connection keeps half of each position's own state "
    help_ += "(Abnar & Zuidema). Off: the raw product of the attention matrices."
    state.keep_valid(ROLLOUT_RESIDUAL, [True, False], True)  # seeded here, not as the toggle's default (keep_state)
    residual = cols[0].toggle("Residual", key=ROLLOUT_RESIDUAL, help=help_)
    layers = list(range(len(analysis.layers(attention))))
    layer = 0
    if len(layers) > 1:
        state.keep_valid(ROLLOUT_LAYER, layers, layers[-1])
        layer = cols[1].select_slider("Through layer", layers, key=ROLLOUT_LAYER, format_func=lambda i: f"{i + 1}")
    heads = list(range(analysis.sublayer(attention, 0).n_heads))
    state.keep_valid(ROLLOUT_HEADS, heads, heads)
    # A row of its own: eight or nine pills do not fit a third of the page at 1024 px, and pills do not wrap.
    chosen = st.pills(
        "Heads averaged", heads, selection_mode="multi", key=ROLLOUT_HEADS, format_func=lambda h: f"{h + 1}"
    )
    return attention, residual, layer, list(chosen)


def body() -> None:
    st.title("Attention rollout")
    shown = sidebar.chosen(trace=True)
    if shown is None:
        return
    analysis = shown.analysis
    figure = st.container()  # the figure first, with its sentence; the pickers that choose it under it
    attention, residual, layer, heads = _pickers(analysis)
    norms = weighting_picker(analysis)
    if norms:  # norm-based rollout: each layer's value-weighted shares in place of its weights
        analysis = analysis.value_weighted()
    if not heads:
        st.error("No head is chosen: pick at least one head to average.")
        return
    n_heads = analysis.sublayer(attention, 0).n_heads
    result = analysis_rollout(analysis, attention, residual, None if len(heads) == n_heads else heads)
    rows = ROWS[attention] if analysis.has_encoder else LM_ROWS
    upto = "layer 1" if layer == 0 else f"layers 1–{layer + 1}"
    text = f"{rows}, through {upto}."
    if attention == "decoder.cross_attn" and residual:
        text += (
            f" With the residual, every output position takes the same {1 - RESIDUAL ** (layer + 1):.0%} of its "
            "information from the source and the rest from the decoder's own earlier tokens; the map splits that "
            "source part among the source tokens."
        )
    if not residual:
        text += " Raw product, without the residual: it often piles everything onto a few tokens."
    label = rollout_label(analysis, attention) + (f", {NORMS}" if norms else "")
    fig = rollout_view(result.maps, result.query_pieces, result.key_pieces, label, layer, result.heads, residual)
    file_name = safe_filename("rollout", shown.name, attention, f"L{layer + 1}", "res" if residual else "raw")
    show_chart(fig, "rollout_chart", file_name, where=figure)
    figure_says(text, figure)
    st.caption(
        "Attention rollout (Abnar & Zuidema, 2020) follows attention through the layers: each layer's attention, "
        "averaged over heads, is multiplied into the layers below it, R = Ā_L ⋯ Ā_1, so that each row sums to 1."
    )


errors.guarded(body)
