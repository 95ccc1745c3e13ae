"""Masks: the padding and no-peek masks of the actual input, and of a padded batch of two sentences."""

from __future__ import annotations

import streamlit as st

import ui
from inference.analyze import batch_masks
from inference.text import InputError
from viz.labels import safe_filename
from viz.masks import mask_heatmap, padding_heatmap, padding_note, reduced_note
from viz.style import chart_config


def body() -> None:
    st.title("Masks")
    chosen = ui.context_and_analysis()
    if chosen is None:
        return
    ctx, analysis = chosen
    st.caption("Yellow ✓: the query may attend to the key. Dark ✗: masked, its score becomes −∞ before softmax.")
    attentions = analysis.attentions
    for tab, attention in zip(st.tabs([analysis.attention_label(g) for g in attentions]), attentions):
        block = analysis.block(attention, analysis.layers(attention)[0])
        fig = mask_heatmap(
            block.mask, block.query_pieces, block.key_pieces, f"{analysis.attention_label(attention)} mask"
        )
        if note := reduced_note(block.mask.shape):
            tab.caption(note)
        tab.plotly_chart(
            fig,
            key=f"mask_{attention.replace('.', '_')}",
            config=chart_config(safe_filename("mask", ctx.entry.name, attention)),
        )
    st.subheader("Padding in a batch")
    st.caption("Sentences of different lengths are padded to one length; the mask keeps attention off the padding.")
    if "second_text" not in st.session_state:
        st.session_state["second_text"] = "Hi!"
    second = st.text_input("Second sentence", key="second_text")
    try:
        batch = batch_masks(ctx.ckpt, [ctx.text, second])
    except InputError as exc:
        st.error(f"Second sentence: {exc}")
        return
    if note := padding_note(batch):
        st.caption(note)
    st.plotly_chart(padding_heatmap(batch), key="mask_padding", config=chart_config("padding-mask"))
    kind = "no-peek + padding" if batch.causal else "padding"
    for i, (col, pieces) in enumerate(zip(st.columns(2), batch.pieces)):
        fig = mask_heatmap(batch.attention[i], pieces, pieces, f"Sentence {i + 1}: {batch.stack} {kind} mask")
        if note := reduced_note(batch.attention[i].shape):
            col.caption(note)
        col.plotly_chart(fig, key=f"mask_batch_{i}", config=chart_config(f"batch-mask-{i + 1}"))


ui.guarded(body)
