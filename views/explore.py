"""Explore: one head beside the model's predictions, then the grid of every head."""

from __future__ import annotations

from functools import partial

import streamlit as st

from inference import catalog
from ui import cache, charts, class_live, errors, reference, sidebar, state
from ui.cache import Shown, export_bytes
from ui.markdown import literal
from ui.says import figure_says
from ui.widgets import (
    HEAD,
    LAYER,
    POSITION,
    data_table,
    folded_controls,
    head_chosen,
    head_picker,
    open_on_head,
    projector,
    show_chart,
    small_table,
    token_picker,
    token_pointer,
    weighting_picker,
)
from viz.heads import grid_pick, head_frame, outlined
from viz.highlight import point_at, pointed
from viz.labels import display_piece, reading_note, safe_filename
from viz.style import standalone_html
from viz.tables import position_labels

HOW_TO_READ = "Each row is a token reading the text; the yellower a cell, the more it attends to that column's token."


def _on_grid_select(n_heads: int) -> None:
    pick = grid_pick(st.session_state["grid"]["selection"], n_heads)
    if pick is not None:
        st.session_state[LAYER], st.session_state[HEAD] = pick
        head_chosen()


def predictions(shown: Shown) -> None:
    """LM: top-k after the chosen position (default: the last); encoder-decoder: output and top-k per step. A
    trace shows the predictions it holds (attention imported from elsewhere holds none)."""
    analysis = shown.analysis
    card = shown.ckpt.card if shown.has_model else {}
    if not analysis.predictions:
        st.caption(literal(f"The trace file {shown.name} holds attention only, no predictions."))
    elif not analysis.has_encoder:  # a language model: the next token after any position
        labels = position_labels(analysis)
        pos = token_picker("Next token after", POSITION, labels, analysis)
        after = f"The model's guesses for the token after {labels[pos]} (position {pos + 1} of {len(labels)})."
        st.caption(literal(after))
        table = charts.predictions_table(shown, pos)
        small_table(table, wrap=False)  # ids and pieces whole: "▁conduct", never "▁cond / uct"
    elif analysis.blank:
        st.markdown("**The model's guesses for the blank**")
        half = len(analysis.source_pieces or ()) // 2
        before, after = (display_piece(p) for p in (analysis.source_pieces or ())[half - 1 : half + 1])
        st.caption(literal(f"The word between “{before}” and “{after}”: {card.get('predictions', '')}"))
        small_table(charts.predictions_table(shown, 0))
    elif not analysis.has_decoder:
        st.markdown("**Each position's output, scored against the vocabulary**")
        st.caption(literal(card.get("predictions", "What the model's output at each position scores highest.")))
        data_table(charts.predictions_table(shown, None), hide_index=True, key="encoder_topk")
    else:
        fed = shown.reference is not None  # teacher forcing: the decoder read the reference, not its own output
        st.markdown("**Reference, fed to the decoder**" if fed else "**Model output**")
        st.code(analysis.output_text or "(empty)", language=None, wrap_lines=True)
        st.caption("Each step: the token fed in, the one that came next, and the model's guesses there.")
        small_table(charts.predictions_table(shown, None))  # wraps beside the heatmap, every guess shown


@state.fragment
@errors.safe
def heads_view(source: cache.Source) -> None:
    """Everything that changes with the attention type, layer and head: reruns alone, and runs the model only
    when the byte budget let the text's analysis go; the charts come built from ui.charts' cache."""
    shown = cache.redrawn(source)  # the fragment holds its analysis weakly (cache.held)
    model, analysis = shown.name, shown.analysis
    # The figure first, the pickers that choose it under it: the heatmap and its sentence open the first view on a
    # projector and on a phone. In projector mode the heatmap takes the page's width, the predictions go below it.
    left, right = (st.container(), st.container()) if projector() else st.columns([2, 1])
    with folded_controls():  # folded for a class's follower
        attention, layer, head = head_picker(analysis, with_average=True)
        top = st.columns(2)
        norms = weighting_picker(analysis, top[0])
        point = token_pointer(analysis, top[1])  # (stack, position) or None
    outline = pointed(attention, *point) if point is not None else None  # its (row, column) in these heads
    state.sync_url()  # first: the address bar follows the choice before the charts are drawn
    sublayer = charts.as_drawn(analysis.sublayer(attention, layer), norms)
    chosen = "avg" if head == charts.AVERAGE else f"H{head + 1}"
    name = safe_filename("attention", model, attention, f"L{layer + 1}", chosen)  # 1-based, as the labels
    with left:
        spec = charts.head_chart(shown, attention, layer, head, norms)
        show_chart(spec if outline is None else point_at(spec, outline), "head_chart", name)  # frozen: not copied
        figure_says(HOW_TO_READ)
        st.caption(literal(reading_note(sublayer.key_pieces)))

        def csv() -> str:  # built on click
            weights = charts.head_weights(sublayer, head)
            return head_frame(weights, sublayer.query_pieces, sublayer.key_pieces).to_csv()

        st.download_button("CSV of this head", csv, f"{name}.csv", "text/csv", key="dl_csv", on_click="ignore")
    with right:
        st.header("Predictions")
        predictions(shown)
    st.header("All heads")
    st.caption("Every head of this attention type: rows are layers, columns heads. Click a tile to open it.")
    spec = charts.grid_chart(shown, attention, norms)
    spec = spec if outline is None else point_at(spec, outline)
    show_chart(
        spec if head == charts.AVERAGE else outlined(spec, (layer, head)),
        "grid",
        safe_filename("heads", model, attention),
        on_select=partial(_on_grid_select, sublayer.n_heads),
        selection_mode="points",
    )
    st.download_button(
        "All heads as one HTML file (opens offline)",
        partial(standalone_html, spec),  # built on click, from the cached figure
        f"{safe_filename('heads', model, attention)}.html",
        "text/html",
        key="dl_grid_html",
        on_click="ignore",
        help="Every head of this attention type in one interactive page, plotly.js inside: no network needed.",
    )


def way_in() -> None:
    """The Lesson's link and the box where a student types a class's code."""
    st.page_link("views/lesson.py", label="New to attention? The Lesson walks through these views step by step →")
    class_live.join_box()  # a student types the code the projector shows


def body() -> None:
    st.title("Explore")
    # The way in for a first visit: one line, above everything the page draws; on a projector, below the figure,
    # which opens the first view (a class joins from its phones, not from the projector).
    if not projector():
        way_in()
    shown = sidebar.chosen(trace=True)
    if shown is None:
        return
    if shown.has_model and (head := catalog.default_head(shown.ckpt.card)) and head[0] in shown.analysis.sublayers:
        open_on_head(*head)  # the head that shows most, measured on the card (python -m atlas defaults)
    decodes = shown.has_model and shown.analysis.has_decoder
    translates = shown.analysis.has_encoder
    given, found, why = reference.asked(shown, translates) if decodes else (None, None, None)
    if found is not None and translates:  # every head of the page drawn on the forced run
        shown = cache.analysed(shown.source.with_reference(given))
    heads_view(cache.held(shown))
    if projector():
        way_in()
    if decodes:
        st.header("How sure was the model?")
        if found is not None:
            reference.certainty(shown, found.rows, f"the {reference.label(translates, shown).lower()}", "certainty")
        else:
            rows = reference.own(shown, shown.analysis.target_ids, 1)
            reference.certainty(shown, rows, "its output" if translates else "each token of the text", "certainty")
        reference.reference_box(shown, translates, found, why)
    st.header("Export and share")
    if not shown.has_model:
        st.caption(
            "The address bar keeps the layer and head, not the trace file: share the file itself (the buttons write "
            "it as it was read)."
        )
    elif state.in_url(sidebar.TEXT):
        st.caption("The address bar keeps the model, text, layer and head: copy it to share this view.")
    else:
        st.caption(
            f"The address bar keeps the model, layer and head, not this text: its {len(shown.text):,} characters are "
            f"too long for a link, even compressed (at most {state.URL_LONGEST:,} characters of address). Share the "
            "text itself with the link, or the JSON below."
        )
    cols = st.columns(2)
    for col, fmt, mime in ((cols[0], "json", "application/json"), (cols[1], "npz", "application/octet-stream")):
        data = partial(export_bytes, shown.source, fmt)  # the source only: the session keeps this
        file_name = f"{safe_filename('analysis', shown.name)}.{fmt}"
        label = f"Whole analysis as {fmt.upper()}"
        col.download_button(label, data, file_name, mime, key=f"dl_{fmt}", on_click="ignore")


errors.guarded(body)
