"""Paper view: the picture of the Transformer paper's Figures 3–5, a line from each query token to each key token."""

from __future__ import annotations

import streamlit as st

from inference import catalog
from ui import cache, charts, errors, sidebar, state
from ui.says import figure_says
from ui.widgets import head_picker, open_on_head, show_chart, weighting_picker
from viz.heads import NORMS
from viz.labels import indexed_labels, safe_filename
from viz.paper import BUCKET_WIDTH, MIN_THRESHOLD, THRESHOLD, lines_above, opening_threshold, paper_view

ALL = -1  # the token picker's "every query token"
ALL_HEADS = "all heads"  # the head picker's AVERAGE: the Paper view overlays every head, one colour each
PAPER_QUERY = state.url_index("paper_query", "paper_q", words=(("all", ALL),))  # or ALL
PAPER_THRESHOLD = state.url_key("paper_threshold", float)


def _pick_query(n_queries: int, labels: list[str]) -> int:
    options = [ALL, *range(n_queries)]
    state.keep_valid(PAPER_QUERY, options, ALL)
    return st.selectbox(
        "Lines of", options, key=PAPER_QUERY, format_func=lambda i: "every query token" if i == ALL else labels[i]
    )


@state.fragment
@errors.safe
def lines_of_the_layer(source: cache.Source) -> None:
    """Everything that changes with the attention type, layer, head, token and threshold: reruns alone."""
    shown = cache.redrawn(source)  # the fragment holds its analysis weakly (cache.held)
    analysis, model = shown.analysis, shown.name
    figure = st.container()  # the figure and its sentence first, the pickers that choose it under them
    attention, layer, head = head_picker(analysis, with_average=True, all_heads=ALL_HEADS)
    norms = weighting_picker(analysis)
    state.sync_url()  # first: the address bar follows the choice before the chart is drawn
    sublayer = charts.as_drawn(analysis.sublayer(attention, layer), norms)
    cols = st.columns([3, 2])
    with cols[0]:
        query = _pick_query(len(sublayer.query_pieces), indexed_labels(sublayer.query_pieces))
    heads = None if head == charts.AVERAGE else [head]
    chosen = None if query == ALL else query
    weights = sublayer.weights if heads is None else sublayer.weights[heads]
    with cols[1]:
        # Seeded in session state, not as the slider's default: ui.state.keep_state re-assigns it on every page.
        state.keep_valid(
            PAPER_THRESHOLD,
            state.Between(MIN_THRESHOLD, 1.0),
            opening_threshold(weights, chosen, THRESHOLD, MIN_THRESHOLD),
        )
        threshold = st.slider("Hide weights below", MIN_THRESHOLD, 1.0, step=0.01, key=PAPER_THRESHOLD, format="%.2f")
    drawn = len(lines_above(weights, threshold, chosen))
    label = analysis.attention_label(attention) + (f", {NORMS}" if norms else "")
    fig = paper_view(sublayer, label, layer, None if heads is None else head, chosen, threshold)
    parts = ("paper", model, attention, f"L{layer + 1}", "all" if heads is None else f"H{head + 1}")
    name = safe_filename(*parts, "" if chosen is None else f"q{chosen + 1}")
    if drawn == 0:
        figure.info(f"No weight reaches {threshold:.2f} here: lower the threshold to see lines.")
    show_chart(fig, "paper_chart", name, where=figure)
    figure_says(
        f"**{drawn:,} lines**, one for every weight ≥ {threshold:.2f}: each joins a query token (left) to the key "
        "token it attends to (right); the darker the line, the larger the weight.",
        figure,
    )
    st.caption(
        f"A line's opacity is its weight (within {BUCKET_WIDTH / 2:.3f}). One colour per head: click a head "
        "in the legend to hide or show it. A query's weights sum to 1, so it draws at most 1 / threshold lines "
        "per head."
    )


def body() -> None:
    st.title("Paper view")
    shown = sidebar.chosen(trace=True)
    if shown is None:
        return
    if shown.has_model and (head := catalog.default_head(shown.ckpt.card)) and head[0] in shown.analysis.sublayers:
        open_on_head(*head)  # the head Explore opens on, measured on the card (python -m atlas defaults)
    lines_of_the_layer(cache.held(shown))
    st.caption(
        'The picture of Figures 3–5 of "Attention Is All You Need" (Vaswani et al., 2017): two columns of '
        "tokens, a line for each attention weight. Pick “all heads” as the head to overlay every head of the layer, "
        "one colour each."
    )


errors.guarded(body)
