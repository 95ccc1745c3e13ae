"""Logit attribution: which heads wrote the model's prediction, and the logit lens: each layer's guess."""

from __future__ import annotations

from functools import partial

import streamlit as st

from ui import cache, errors, sidebar, state
from ui.downloads import table_downloads
from ui.markdown import literal
from ui.widgets import POSITION, show_chart, token_picker
from viz.attribution import (
    attribution_title,
    heads_heatmap,
    lens_frame,
    lens_heatmap,
    other_parts,
    parts_bars,
    parts_frame,
)
from viz.labels import display_piece, safe_filename
from viz.tables import heads_frame, position_labels

TOKEN = state.url_key("dla_token", longest=200)  # a piece among the position's top predictions
VERSUS = state.url_key("dla_versus", longest=200)  # another of them, or NO_CONTRAST
NO_CONTRAST = ""  # no piece is empty (viz.labels.display_piece shows one as ∅)


def body() -> None:
    st.title("Logit attribution")
    st.caption(
        "Which parts of the model wrote its prediction. Every head adds its output to the residual stream; the "
        "prediction's score (its logit) is read from the stream at the end. With each normalisation's scale held at "
        "the value it had in this pass, the logit splits exactly into what each head, each feed-forward layer, the "
        "embeddings and the biases wrote: their parts sum to it. This is what a head writes directly; what it "
        "changes through later layers is not counted here."
    )
    ctx = sidebar.chosen()
    if ctx is None:
        return
    analysis = ctx.analysis
    if not analysis.has_decoder:
        st.info(
            "Logit attribution reads a decoder's stream: this model's output is not a sum of what its parts wrote. "
            "Choose a language model or a translator in the sidebar."
        )
        return
    labels = position_labels(analysis)
    translator = analysis.has_cross_attention
    cols = st.columns(3)
    with cols[0]:
        # a translator opens on its first output word; a language model on the text's next token
        pos = token_picker("Next token after", POSITION, labels, analysis, start=0 if translator else -1)
    candidates = analysis.predictions[pos]
    ids = {p.piece: p.id for p in candidates}
    shown = {p.piece: f"{display_piece(p.piece)} (p = {p.prob:.3f})" for p in candidates}
    shown[NO_CONTRAST] = "nothing"
    pieces = list(ids)
    state.keep_valid(TOKEN, pieces, pieces[0])
    token = cols[1].selectbox("Token", pieces, key=TOKEN, format_func=shown.get)
    others = [NO_CONTRAST] + [p for p in pieces if p != token]
    state.keep_valid(VERSUS, others, NO_CONTRAST)
    versus = cols[2].selectbox("Versus", others, key=VERSUS, format_func=shown.get)
    state.sync_url()
    parts = cache.logit_attribution(ctx, pos, ids[token], ids.get(versus))
    names = {a: analysis.attention_label(a) for a in parts.heads}
    title = attribution_title(display_piece(token), labels[pos], display_piece(versus) if versus else None)
    name = safe_filename("attribution", ctx.name, f"pos{pos + 1}")
    what = "the difference of the two logits" if versus else "the logit"
    st.caption(
        literal(
            f"Blue cells push toward {literal(display_piece(token))}"
            + (f" and away from {literal(display_piece(versus))}" if versus else "")
            + f", red ones against; the numbers are in units of {what}."
        )
    )
    show_chart(heads_heatmap(parts.heads, names, title), "attribution_heads", name)
    heads = heads_frame(parts.heads, names, "contribution")
    table_downloads(heads, f"{name}-heads", "attribution_heads", "the heads' contributions")
    st.header("Every part, layer by layer")
    bars = other_parts(parts.heads, parts.feed_forward, parts.embeddings, parts.positions, parts.biases, names)
    show_chart(parts_bars(bars, parts.logit, f"What each part wrote toward {what}"), "attribution_parts", name)
    every = (parts.heads, parts.feed_forward, parts.embeddings, parts.positions, parts.biases, names)
    table_downloads(partial(parts_frame, *every), f"{name}-parts", "attribution_parts", "every part's contribution")
    with st.expander("Every head, the largest push first"):
        st.dataframe(heads, hide_index=True, key="attribution_table")
    st.header("Logit lens")
    st.caption(
        "The stream after each layer read as if it were the last (through the final normalisation and the output "
        "layer): each layer's top guess for the next token, coloured by its probability. The top row is the "
        "model's own prediction."
    )
    lens = cache.logit_lens(ctx)
    readable = [[display_piece(p) for p in row] for row in lens.pieces]
    lens_title = "The logit lens: each layer's guess for the next token"
    lens_name = safe_filename("lens", ctx.name)
    show_chart(lens_heatmap(readable, lens.prob, labels, lens_title), "logit_lens", lens_name)
    st.caption(
        "The lower rows often read back the token at that position itself, nearly sure of it: the stream after a "
        "low layer still holds mostly that token's embedding, and the unembedding (the same matrix, tied) reads it "
        "back. Only higher layers write enough over it to turn it into a guess for the next token."
    )
    table_downloads(partial(lens_frame, readable, lens.prob, labels), lens_name, "logit_lens", "the logit lens")


errors.guarded(body)
