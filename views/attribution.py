"""Logit attribution: which heads wrote the model's prediction, and the logit lens: each layer's guess."""

from __future__ import annotations

from functools import partial

import streamlit as st

from ui import cache, errors, progress, sidebar, state
from ui.downloads import table_downloads
from ui.markdown import literal
from ui.says import figure_says
from ui.widgets import POSITION, data_table, show_chart, token_picker
from viz.agreement import agreement_frame, correlation_heatmap, disagreement_line, rank_correlations, ranks_heatmap
from viz.attribution import (
    attribution_title,
    heads_heatmap,
    lens_frame,
    lens_heatmap,
    other_parts,
    parts_bars,
    parts_frame,
)
from viz.labels import display_piece, marks_note, safe_filename
from viz.tables import heads_frame, position_labels
from viz.token_attribution import token_attribution_frame, token_attribution_heatmap

TOKEN = state.url_key("dla_token", longest=200)  # a piece among the position's top predictions
VERSUS = state.url_key("dla_versus", longest=200)  # another of them, or NO_CONTRAST
NO_CONTRAST = ""  # no piece is empty (viz.labels.display_piece shows one as ∅)


def body() -> None:
    st.title("Logit attribution")
    shown = sidebar.chosen()
    if shown is None:
        return
    analysis = shown.analysis
    if not analysis.has_decoder:
        st.info(
            "Logit attribution reads a decoder's stream: this model's output is not a sum of what its parts wrote. "
            "Choose a language model or a translator in the sidebar."
        )
        return
    labels = position_labels(analysis)
    translator = analysis.has_cross_attention
    figure = st.container()  # the figure and its sentence first, the pickers that choose it under them
    cols = st.columns(3)
    with cols[0]:
        # a translator opens on its first output word; a language model on the text's next token
        pos = token_picker("Next token after", POSITION, labels, analysis, start=0 if translator else -1)
    candidates = analysis.predictions[pos]
    ids = {p.piece: p.id for p in candidates}
    label_of = {p.piece: f"{display_piece(p.piece)} (p = {p.prob:.3f})" for p in candidates}
    label_of[NO_CONTRAST] = "nothing"
    pieces = list(ids)
    state.keep_valid(TOKEN, pieces, pieces[0])
    token = cols[1].selectbox("Token", pieces, key=TOKEN, format_func=label_of.get)
    others = [NO_CONTRAST] + [p for p in pieces if p != token]
    state.keep_valid(VERSUS, others, NO_CONTRAST)
    versus = cols[2].selectbox("Versus", others, key=VERSUS, format_func=label_of.get)
    state.sync_url()
    parts = cache.logit_attribution(shown, pos, ids[token], ids.get(versus))
    names = {a: analysis.attention_label(a) for a in parts.heads}
    title = attribution_title(display_piece(token), labels[pos], display_piece(versus) if versus else None)
    name = safe_filename("attribution", shown.name, f"pos{pos + 1}")
    what = "the difference of the two logits" if versus else "the logit"
    show_chart(heads_heatmap(parts.heads, names, title), "attribution_heads", name, where=figure)
    figure_says(
        literal(
            f"Each square is one head. Blue heads push the model toward {display_piece(token)}"
            + (f" and away from {display_piece(versus)}" if versus else "")
            + f", red ones against; the numbers are in units of {what}. "
            + marks_note([token, versus, analysis.target_pieces[pos]])
        ),
        figure,
    )
    st.caption(
        "Which parts of the model wrote its prediction. Every head adds its output to the residual stream; the "
        "prediction's score (its logit) is read from the stream at the end. With each normalisation's scale held at "
        "the value it had in this pass, the logit splits exactly into what each head, each feed-forward layer, the "
        "embeddings and the biases wrote: their parts sum to it. This is what a head writes directly; what it "
        "changes through later layers is not counted here."
    )
    heads = heads_frame(parts.heads, names, "contribution")
    table_downloads(heads, f"{name}-heads", "attribution_heads", "the heads' contributions")
    st.header("Every part, layer by layer")
    bars = other_parts(parts.heads, parts.feed_forward, parts.embeddings, parts.positions, parts.biases, names)
    show_chart(parts_bars(bars, parts.logit, f"What each part wrote toward {what}"), "attribution_parts", name)
    every = (parts.heads, parts.feed_forward, parts.embeddings, parts.positions, parts.biases, names)
    table_downloads(partial(parts_frame, *every), f"{name}-parts", "attribution_parts", "every part's contribution")
    with st.expander("Every head, the largest push first"):
        data_table(heads, hide_index=True, key="attribution_table")
    tokens_section(shown, pos, ids[token], labels)
    st.header("Logit lens")
    st.caption(
        "The stream after each layer read as if it were the last (through the final normalisation and the output "
        "layer): each layer's top guess for the next token, coloured by its probability. The top row is the "
        "model's own prediction."
    )
    lens = cache.logit_lens(shown)
    readable = [[display_piece(p) for p in row] for row in lens.pieces]
    lens_title = "The logit lens: each layer's guess for the next token"
    lens_name = safe_filename("lens", shown.name)
    show_chart(lens_heatmap(readable, lens.prob, labels, lens_title), "logit_lens", lens_name)
    st.caption(
        "The lower rows often read back the token at that position itself, nearly sure of it: the stream after a "
        "low layer still holds mostly that token's embedding, and the unembedding (the same matrix, tied) reads it "
        "back. Only higher layers write enough over it to turn it into a guess for the next token."
    )
    table_downloads(partial(lens_frame, readable, lens.prob, labels), lens_name, "logit_lens", "the logit lens")
    agreement_section(shown, pos, labels)


TOKENS_ASKED = "_tokens_asked"  # session: the (model, text, position, token) traced back to its input tokens


def tokens_section(shown: cache.Shown, pos: int, token: int, labels: list[str]) -> None:
    """Which input tokens the prediction rests on: five per-token attributions side by side
    (analysis.token_attribution), computed when asked (tens of passes with gradients)."""
    st.header("Which input tokens it rests on")
    named = display_piece(shown.ckpt.tokenizer.pieces([token])[0])
    st.caption(
        literal(
            f"Every input token's share in the prediction {named} after {labels[pos]}, by five methods. Integrated "
            "gradients fade every token's embedding in from nothing and add up what each one changed on the way "
            "(the numbers sum to the logit against no embeddings at all); gradient × input is the same read at the "
            "embeddings only; saliency is how much the logit moves for a small change of the token, either way; "
            "rollout and attention flow follow the attention weights down through the layers (the residual "
            "connection counted as half of each layer)."
        )
    )
    asked = (shown.path, shown.text, pos, token)
    if st.button(literal(f"Trace {named} back to each input token"), key="tokens_run"):
        st.session_state[TOKENS_ASKED] = asked
    if st.session_state.get(TOKENS_ASKED) != asked:
        return
    with progress.running("tokens_run", TOKENS_ASKED, first="Following the prediction back to each token…"):
        found = cache.token_attribution(shown, pos, token)
    for note in found.notes:
        st.info(literal(note))
    name = safe_filename("tokens", shown.name, f"pos{pos + 1}")
    title = f"Which input tokens {named} after {labels[pos]} rests on"
    show_chart(token_attribution_heatmap(found.pieces, found.stacks, found.scores, title), "tokens_back", name)
    st.caption(
        literal(
            f"Each row is one method, coloured against its own largest number (blue toward {named}, red against). "
            f"Integrated gradients sum to {found.logit - found.baseline:+.3f} within {found.gap:.3f}."
        )
    )
    table = token_attribution_frame(found.pieces, found.stacks, found.scores)
    table_downloads(table, name, "tokens_back", "every token's numbers")
    with st.expander("Every token's numbers"):
        data_table(table, hide_index=True, key="tokens_table")


AGREEMENT_ASKED = "_agreement_asked"  # session: the (model, text, position) whose methods were asked to be compared


def agreement_section(shown: cache.Shown, pos: int, labels: list[str]) -> None:
    """Do the explanations agree: every head ranked by seven methods for the prediction after `pos`, the methods'
    rank correlations, and the heads they disagree on most (analysis.agreement)."""
    st.header("Do the explanations agree?")
    st.caption(
        "Every head's importance for this prediction (the model's top guess), by seven methods: attention (the "
        "largest weight this position gives any token but the first, the start of text, where heads park unused "
        "attention), value-weighted attention (the same, scaled by what each key's value moves), direct logit "
        "attribution (above), switching the head off alone (its output zero, or its mean over the positions; the "
        "KL divergence of the prediction), activation patching and attribution patching (the share of the logit "
        "difference a head restores in a corrupted text). Signed methods are ranked by magnitude."
    )
    if shown.analysis.has_encoder:
        st.info("The methods are compared on a language model's next-token prediction: choose one in the sidebar.")
        return
    config = shown.ckpt.config
    passes = 2 * config.n_decoder_layers * config.n_heads
    asked = (shown.path, shown.text, pos)
    if st.button(f"Compare the methods (about {passes} passes)", key="agreement_run"):
        st.session_state[AGREEMENT_ASKED] = asked
    if st.session_state.get(AGREEMENT_ASKED) != asked:
        return
    with progress.running("agreement_run", AGREEMENT_ASKED, first="Scoring every head by each method…") as show:
        found = cache.agreement(shown, pos, lambda done, total: show(done / total, f"Chunk {done + 1} of {total}"))
    frame = agreement_frame(found.scores)
    where = labels[pos]
    st.markdown(literal(disagreement_line(frame)))
    pieces = shown.ckpt.tokenizer.pieces
    if found.corrupted is None:
        st.caption(literal(f"No patching: {found.note}."))
    else:
        corrupted = " ".join(display_piece(p) for p in pieces(list(found.corrupted[1:])))
        st.caption(
            literal(
                f"The corrupted text ({found.corrupted_from}): {corrupted}. Patching's logit "
                f"difference: {display_piece(pieces([found.answer])[0])} − {display_piece(pieces([found.versus])[0])}."
            )
        )
    name = safe_filename("agreement", shown.name, f"pos{pos + 1}")
    title = f"Each head's rank by each method, next token after {where}"
    show_chart(ranks_heatmap(frame, title), "agreement_ranks", f"{name}-ranks")
    st.caption("Rank 1 is the most important head; ◀ marks the heads whose ranks spread the widest.")
    alike = correlation_heatmap(rank_correlations(frame), "How alike the methods rank the heads (Spearman)")
    show_chart(alike, "agreement_corr", f"{name}-correlations")
    table = frame.reset_index()
    table_downloads(table, name, "agreement", "every head's scores")
    with st.expander("Every head's scores"):
        data_table(table, hide_index=True, key="agreement_table")


errors.guarded(body)
