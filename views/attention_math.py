"""Attention math: one head and one query, from raw scores to the weighted sum of the values."""

from __future__ import annotations

import streamlit as st

from analysis.record import Sublayer
from inference import catalog
from ui import cache, errors, sidebar, state
from ui.markdown import literal
from ui.says import figure_says
from ui.widgets import QUERY, data_table, head_picker, open_on_head, show_chart, token_picker
from viz.labels import indexed_labels, safe_filename
from viz.score_parts import largest_cells, score_parts_frame, score_parts_heatmap
from viz.steps import (
    FORMULA,
    WINDOW,
    attention_steps,
    key_window,
    opening_query,
    output_figure,
    steps_figure,
    steps_latex,
    steps_table,
    weights_overview,
    window_note,
)

FIRST_KEY = state.url_key("steps_first_key", int, url="first_key")  # the first key of the window shown, from 1
WHY = state.url_switch("why_split", url="why")  # the score split into the stream's parts: on demand (a model run)
WHY_KEY = state.url_index("why_key", "k")  # the key whose score is split, from 1 in the URL


@state.fragment
@errors.safe
def steps_view(source: cache.Source) -> None:
    shown = cache.redrawn(source)  # the fragment holds its analysis weakly (cache.held)
    analysis, model = shown.analysis, shown.entry.name
    figure = st.container()  # the figure and its sentence first, the pickers that choose it under them
    attention, layer, head = head_picker(analysis, with_average=False)
    sublayer = analysis.sublayer(attention, layer)
    labels = indexed_labels(sublayer.query_pieces)
    query = token_picker("Query token", QUERY, labels, analysis, start=opening_query(sublayer.mask))
    state.sync_url()  # first: the address bar follows the choice before the charts are drawn
    steps = attention_steps(sublayer, head, query, cache.head_detail(shown, sublayer.name, head))
    name = safe_filename("steps", model, attention, f"L{layer + 1}", f"H{head + 1}", f"q{query + 1}")  # as labelled
    n_keys = len(sublayer.key_pieces)
    window = key_window(steps)  # all keys when they fit, else the window around the largest weight
    if n_keys > WINDOW:
        # Kept and linked; back to the window around the largest weight when the head, query or text changes.
        owner = (analysis.checkpoint, analysis.text, sublayer.name, head, query)
        state.keep_valid(FIRST_KEY, state.Between(1, n_keys - WINDOW + 1), window.start + 1, owner=owner)
        first = st.slider("First key shown", 1, n_keys - WINDOW + 1, key=FIRST_KEY)
        window = key_window(steps, first - 1)
        overview = weights_overview(steps, window)
        show_chart(overview, "steps_overview", f"{name}-overview")
        st.caption(window_note(window, n_keys))
    show_chart(steps_figure(steps, window), "steps_chart", name, where=figure)
    figure_says(
        literal(
            f"One row per key, for the query {labels[query]}: its raw score, the score after the mask, the weight "
            "softmax makes of it (the weights sum to 1), and how much of that key's value goes into the output."
        ),
        figure,
    )
    st.latex(steps_latex(steps))
    show_chart(output_figure(steps), "output_chart", f"{name}-output")
    with st.expander("The numbers", expanded=len(labels) <= 16):
        data_table(steps_table(steps, window), hide_index=True, key="steps_table")
    why_view(shown, sublayer, head, query, name)


def why_view(shown: cache.Shown, sublayer: Sublayer, head: int, query: int, name: str) -> None:
    """The section "Why does query i attend to key j?": this head's raw score for the page's query and a chosen
    key, split into what wrote the stream on each side (analysis.score_parts): query parts × key parts."""
    st.header("Why does this query attend to a key?")
    if not shown.has_model:
        st.info("Splitting a score needs the model's weights: a trace file holds its attention only.")
        return
    st.caption(
        "The raw score q·k/√dₖ is a dot product of two projections of the residual stream, and the stream is a sum: "
        "the token embeddings, the positions, what each earlier head and feed-forward layer wrote, and biases. So "
        "the score splits into one number per pair of parts, query side × key side. Each normalisation is held "
        "at the scale (the per-position denominator σ) it had in this run, which makes it linear: every part is "
        "centred on its own, so the centring goes into the parts exactly, and the cells sum to the score."
    )
    if not st.toggle("Split the score into the stream's parts", key=WHY):
        return
    keys = indexed_labels(sublayer.key_pieces)
    weights = sublayer.weights[head, query]
    owner = (shown.analysis.checkpoint, shown.analysis.text, sublayer.name, head, query)
    state.keep_valid(WHY_KEY, range(len(keys)), int(weights.argmax()), owner=owner)
    key = st.selectbox("Key token", range(len(keys)), key=WHY_KEY, format_func=lambda i: keys[i])
    state.sync_url()
    parts = cache.score_split(shown, sublayer.name, head, query, key)
    frame = score_parts_frame(parts.query_parts, parts.key_parts, parts.table)
    query_label = indexed_labels(sublayer.query_pieces)[query]
    title = f"Why {query_label} attends to {keys[key]}"  # one line at 1024 px; the rest is said below
    show_chart(score_parts_heatmap(frame, title), "why_chart", f"{name}-why-k{key + 1}")
    said = f"Layer {sublayer.layer + 1}, head {head + 1}. Rows: the parts of query {query_label}; columns: the parts "
    said += f"of key {keys[key]}. The cells sum to {parts.total:+.4f}; the model's raw score is {parts.score:+.4f}"
    said += f", its weight {weights[key]:.3f}." if not parts.masked else ", but the mask forbids this key: weight 0."
    st.caption(literal(said))
    if not any(part.startswith("L") for part in parts.query_parts):  # names of heads and layers: `L1 H2`
        st.caption(
            "Nothing wrote into the stream before this layer's first sub-layer, so its parts are the embeddings, "
            "the positions and biases only: choose a later layer to see what earlier heads and feed-forward "
            "layers put into this score."
        )
    st.markdown("**The largest cells**, whichever way they push")
    data_table(largest_cells(frame), hide_index=True, key="why_cells")


def body() -> None:
    st.title("Attention math")
    shown = sidebar.chosen()
    if shown is None:
        return
    if shown.has_model and (head := catalog.default_head(shown.ckpt.card)) and head[0] in shown.analysis.sublayers:
        open_on_head(*head)  # the head Explore opens on, measured on the card (python -m atlas defaults)
    steps_view(cache.held(shown))
    st.latex(FORMULA)
    st.caption(
        "For one head and one query token: 1. the raw scores q·kⱼ/√dₖ, 2. the mask sets forbidden keys to −∞, "
        "3. softmax turns the row into weights that sum to 1, 4. each value vector vⱼ is scaled by its weight, "
        "5. their sum is the head's output for this token."
    )


errors.guarded(body)
