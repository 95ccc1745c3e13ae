"""Masks: the padding and no-peek masks of the actual input, and of a padded batch of two sentences."""

from __future__ import annotations

import streamlit as st

from analysis.analyze import batch_masks
from inference.text import InputError
from ui import errors, sidebar, state
from ui.markdown import literal
from ui.says import figure_says
from ui.widgets import show_chart
from viz.labels import safe_filename
from viz.masks import mask_heatmap, mask_view, padding_heatmap, padding_note, reduced_note

SECOND_TEXT = state.url_text("second_text")  # the sentence padded beside the sidebar's


def body() -> None:
    st.title("Masks")
    shown = sidebar.chosen(trace=True)
    if shown is None:
        return
    analysis = shown.analysis
    # The first tab is a mask that forbids something (a decoder's no-peek mask): an encoder's own text, unpadded, is
    # all ✓ and shows nothing to a first visit.
    first = {a: analysis.sublayer(a, analysis.layers(a)[0]) for a in analysis.attentions}
    attentions = sorted(analysis.attentions, key=lambda a: bool(first[a].mask.all()))
    for tab, attention in zip(st.tabs([literal(analysis.attention_label(g)) for g in attentions]), attentions):
        sublayer = first[attention]
        fig = mask_view(sublayer.mask, sublayer.query_pieces, sublayer.key_pieces, analysis.attention_label(attention))
        if note := reduced_note(sublayer.mask.shape):
            tab.caption(note)
        key = f"mask_{attention.replace('.', '_')}"
        show_chart(fig, key, safe_filename("mask", shown.name, attention), where=tab)
    figure_says("Yellow ✓: the query (row) may attend to the key (column). Dark ✗: masked, its weight is 0.")
    st.caption("A masked score becomes −∞ before softmax, which turns it into a weight of exactly 0.")
    st.header("Padding in a batch")
    if not shown.has_model:
        st.caption(
            f"Padding a second sentence beside yours needs the model's tokenizer; the trace file {literal(shown.name)} "
            "holds one input's attention. Turn off “Draw the trace file” in the sidebar to pad two sentences."
        )
        return
    if shown.ckpt.config.switches.sum_outputs:
        st.caption(
            f"{literal(shown.entry.name)} always reads the same {shown.ckpt.config.max_len} words, the ones around the "
            "blank: a batch of its inputs never needs padding, so there is no padding mask to see here."
        )
        return
    st.caption("Sentences of different lengths are padded to one length; the mask keeps attention off the padding.")
    st.session_state.setdefault(SECOND_TEXT, "Hi!")
    second = st.text_input("Second sentence", key=SECOND_TEXT)
    try:
        batch = batch_masks(shown.ckpt, [shown.text, second])
    except InputError as exc:
        st.error(errors.shown(f"Second sentence: {exc}"))
        return
    if note := padding_note(batch):
        st.caption(note)
    show_chart(padding_heatmap(batch), "mask_padding", "padding-mask")
    kind = "no-peek + padding" if batch.causal else "padding"
    for i, (col, pieces) in enumerate(zip(st.columns(2), batch.pieces)):
        fig = mask_heatmap(batch.attention[i], pieces, pieces, f"Sentence {i + 1}: {batch.stack} {kind} mask")
        if note := reduced_note(batch.attention[i].shape):
            col.caption(note)
        show_chart(fig, f"mask_batch_{i}", f"batch-mask-{i + 1}", where=col)


errors.guarded(body)
