"""Lesson steps 1–11, the paper's ideas in order, each a live view of the loaded model on the lesson's sentence:
embeddings, positions, the padding and no-peek masks, scaled dot-product, the heads, the feed-forward, residual and
LayerNorm, cross-attention, the next token, the key/value cache."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from analysis.analyze import batch_masks, positions_used
from analysis.record import Analysis, DecodingSteps
from ui import cache, charts, state, widgets
from ui.cache import Shown, Source
from ui.markdown import literal
from ui.widgets import data_table
from views.lesson_steps.layout import PROB, chart, figure_place, side_by_side
from viz.generation import attention_row, cache_growth, kv_cache_numbers
from viz.labels import display_piece
from viz.lesson import MOST_COLUMNS, cache_work, masked_head, residual_figure, shift_frame, vectors_heatmap
from viz.masks import mask_heatmap, padding_heatmap, reduced_note
from viz.positional import encoding_curves, encoding_heatmap
from viz.steps import (
    FORMULA,
    attention_steps,
    key_window,
    opening_query,
    output_figure,
    steps_figure,
    steps_latex,
)
from viz.style import thaw
from viz.tables import top_k_frame

SHORT = "Hi!"  # the short sentence padded beside the lesson's
WRITE = 12  # tokens the language model writes for the key/value cache step
MAX_OUTPUT = 64  # an encoder-decoder's output, as the analysis decodes it (analysis.analyze.Request.max_tokens)
KV_STEP = state.url_key("lesson_kv_step", int, url="kv_step")  # the key/value cache step's decoding step, from 1


ACTIVATIONS = {"relu": "ReLU", "gelu": "GELU", "gelu_tanh": "GELU", "swiglu": "SwiGLU"}
NORMS = {"layer": "LayerNorm", "rms": "RMSNorm"}


def activation_name(source: Source) -> str:
    return ACTIVATIONS.get(source.ckpt.config.switches.activation, source.ckpt.config.switches.activation)


def norm_name(source: Source) -> str:
    return NORMS.get(source.ckpt.config.switches.norm_type, source.ckpt.config.switches.norm_type)


def embeddings(source: Source, analysis: Analysis) -> None:
    w = cache.stream(source.path, source.stamp, source.text)
    cfg = source.ckpt.config
    if cfg.switches.embed_scale:
        row = f"one token's embedding × √{cfg.d_model} = {math.sqrt(cfg.d_model):.1f}"
    else:
        row = "one token's embedding as learned (this model does not multiply it by √d_model)"
    if cfg.positional == "rotary":
        then = "no position is ever added: rotary positions turn each query and key inside attention instead"
    else:
        then = "before its position is added"
    st.caption(
        f"{literal(source.entry.name)}: {cfg.vocab_size:,} pieces in the vocabulary, d_model = {cfg.d_model}. Each row "
        f"below is {row}, {then}."
    )
    left, right = side_by_side(2, [1, 3])
    frame = pd.DataFrame({"token": [display_piece(p) for p in w.pieces], "id": list(w.ids)})
    data_table(frame, left, hide_index=True, key="lesson_ids")
    title = "Token embeddings × √d_model" if cfg.switches.embed_scale else "Token embeddings"
    with right:
        chart(vectors_heatmap(w.embedded, w.pieces, title), "embeddings", source.entry.name)


def positional(source: Source, analysis: Analysis) -> None:
    cfg = source.ckpt.config
    sinusoidal = cfg.positional == "sinusoidal"
    if not sinusoidal:
        st.markdown(
            f"For contrast, the table {literal(source.entry.name)} **learned** instead, one trained vector per "
            "position:"
        )
    table = cache.positional_table(source.path, source.stamp)
    used = positions_used(source.ckpt, source.text)
    n = min(cfg.max_len, max(64, 2 * (used or 0)))
    chart(encoding_heatmap(table, n, used), "positional", source.entry.name)
    if used:
        st.caption(f"The dashed line ends the {used:d} positions the sentence uses.")
    d = cfg.d_model
    dims = sorted({0, d // 8 // 2 * 2, d // 4 // 2 * 2})
    chart(encoding_curves(table, dims, n, sinusoidal), "positional_curves", source.entry.name)


def padding(source: Source, analysis: Analysis) -> None:
    batch = batch_masks(source.ckpt, [source.text, SHORT])
    st.caption(f"The sentence and “{SHORT}” in one batch, as the model's {literal(batch.stack)} reads them.")
    chart(padding_heatmap(batch), "padding", source.entry.name)
    kind = "no-peek + padding" if batch.causal else "padding"
    pad = source.ckpt.tokenizer.pieces([source.ckpt.config.pad_id])[0]
    padded = next((i for i, pieces in enumerate(batch.pieces) if pad in pieces), 1)  # the sentence that was filled up
    pieces = batch.pieces[padded]
    st.caption(
        f"The {literal(batch.stack)}'s mask for sentence {padded + 1}, the padded one: no query may attend to a pad."
    )
    if note := reduced_note(batch.attention[padded].shape):
        st.caption(note)
    fig = mask_heatmap(batch.attention[padded], pieces, pieces, f"Sentence {padded + 1}: {batch.stack} {kind} mask")
    chart(fig, "padding_mask", source.entry.name)


def no_peek(source: Source, analysis: Analysis) -> None:
    sublayer = analysis.sublayer("decoder.self_attn", 0)
    fed = "<s> and the output it wrote" if analysis.has_encoder else "the text"
    st.caption(f"The decoder's self-attention in layer 1, over {fed}. Rows are queries, columns keys.")
    title = "No-peek mask of the decoder"
    chart(
        mask_heatmap(sublayer.mask, sublayer.query_pieces, sublayer.key_pieces, title), "nopeek_mask", source.entry.name
    )
    title = "Decoder layer 1, head 1 (grey ✗: masked, weight 0)"
    fig = masked_head(sublayer.weights[0], sublayer.mask, sublayer.query_pieces, sublayer.key_pieces, title)
    chart(fig, "nopeek_head", source.entry.name)


def scaled_dot(source: Source, analysis: Analysis) -> None:
    full = cache.analysis(source, full=True)
    attention = full.attentions[0]
    sublayer = full.sublayer(attention, 0)
    query = opening_query(sublayer.mask)  # a query whose row the mask changes, as Attention math opens on
    steps = attention_steps(sublayer, 0, query)
    st.latex(FORMULA)
    piece = display_piece(sublayer.query_pieces[query])
    st.caption(
        f"{literal(full.attention_label(attention))}, layer 1, head 1, for token {query + 1} ({literal(piece)}) as "
        "the query:"
    )
    st.latex(steps_latex(steps))
    chart(steps_figure(steps, key_window(steps)), "steps", source.entry.name)
    chart(output_figure(steps), "steps_output", source.entry.name)
    st.page_link("views/attention_math.py", label="Any head and query: the Attention math page")


LESSON_GRID_ROW = 72  # px: one layer's row of the Lesson's grid of heads


def multi_head(shown: Shown, analysis: Analysis) -> None:
    cfg = shown.ckpt.config
    attention = analysis.attentions[0]
    d_head = cfg.d_model // cfg.n_heads
    st.caption(
        f"{literal(shown.entry.name)}: d_model = {cfg.d_model} split into {cfg.n_heads} heads of d_k = {d_head}; each "
        f"head's {d_head} output numbers per token are concatenated back to {cfg.n_heads} × {d_head} = {cfg.d_model} "
        "and multiplied by W^O. Below, every head of every layer on the sentence: each attends in its own way."
    )
    grid = thaw(charts.grid_chart(shown, attention))
    # rows of LESSON_GRID_ROW px: the grid, the step's heading and the sentence under it fit a phone's 844 px
    grid.update_layout(height=min(grid.layout.height, 60 + len(grid.layout.yaxis.tickvals) * LESSON_GRID_ROW))
    chart(grid, "heads", shown.entry.name)


def feed_forward(source: Source, analysis: Analysis) -> None:
    w = cache.stream(source.path, source.stamp, source.text)
    cfg = source.ckpt.config
    attn, ffn = w.weights
    act = activation_name(source)
    if act == "ReLU":
        zeros = f"In layer 1, {w.zero_share:.0%} of the units are exactly 0 after the ReLU on this sentence."
    else:  # GELU and SiLU let small negative values through: hardly a unit is exactly 0
        zeros = f"Its {act} lets small negative values through, so few units are exactly 0; most stay near it."
    st.caption(
        f"{literal(source.entry.name)}: {cfg.d_model} → {cfg.d_ff} → {cfg.d_model}, with {act}. In each layer the "
        f"feed-forward network has {ffn:,} weights and the self-attention {attn:,}. {zeros} Below, the "
        f"{min(MOST_COLUMNS, cfg.d_ff)} units most active on it (white: 0)."
    )
    units = w.active_units(MOST_COLUMNS)
    title = f"Layer 1 feed-forward units, after the {act}"
    fig = vectors_heatmap(w.hidden[:, units], w.pieces, title, x_title="unit", columns=units.tolist())
    chart(fig, "ffn", source.entry.name)


def residual(source: Source, analysis: Analysis) -> None:
    w = cache.stream(source.path, source.stamp, source.text)
    norm = norm_name(source)
    style = f"pre-norm: x + Sublayer({norm}(x))" if w.pre_norm else f"post-norm, as the paper: {norm}(x + Sublayer(x))"
    d = source.ckpt.config.d_model
    layer = norm == "LayerNorm"
    unit, learned = ("mean 0 and variance 1", "gain and bias") if layer else ("a mean square of 1", "gain")
    st.caption(
        f"{literal(source.entry.name)} is {style}. The mean length of the token vectors at each sub-layer of the "
        f"{literal(w.stack)}: what comes in, what the sub-layer adds, what goes out. Right after a {norm}, before its "
        f"{learned}, every vector has {unit} over its {d} numbers, so a length of about √{d} = {math.sqrt(d):.1f}."
    )
    chart(residual_figure(w.norms, w.pre_norm, norm), "residual", source.entry.name)


def cross(shown: Shown, analysis: Analysis) -> None:
    last = analysis.layers("decoder.cross_attn")[-1]
    st.markdown("**Output**")
    st.code(analysis.output_text or "(empty)", language=None, wrap_lines=True)
    st.caption(
        f"Rows are the decoder's steps: the step that reads a token is writing the next one, and looks for it in the "
        f"source (columns). Layer {last + 1}, the average of its heads."
    )
    chart(charts.head_chart(shown, "decoder.cross_attn", last, charts.AVERAGE), "cross", shown.entry.name)


def next_token(source: Source, analysis: Analysis) -> None:
    st.caption(
        "Each position reads its token and is trained to predict the next one: the target column is the input "
        "shifted by one. The model's own first guess at each position, and whether it is the text's next token:"
    )
    shift = shift_frame(analysis)  # the step's figure: first on a projector (layout.figure_place)
    # in a projector's large type ten rows and the sentence under them overrun 768 px: nine show, the rest scroll
    size = {"height": 480} if widgets.projector() else {}
    widgets.data_table(
        shift, figure_place(), hide_index=True, column_config={"probability": PROB}, key="lesson_shift", **size
    )
    st.markdown("**After the last token, it would write**")
    top = top_k_frame(analysis, -1)
    widgets.data_table(top, hide_index=True, column_config={"probability": PROB}, key="lesson_next")


def kv_cache(source: Source, analysis: Analysis) -> None:
    cfg = source.ckpt.config
    asked = None
    if not analysis.has_encoder:  # a language model writes on after its text
        asked = min(WRITE, cfg.max_len // 2)
        analysis = cache.analysis(source, continuation=asked)
        st.code(f"{analysis.text} ⟶ {analysis.continuation or '(nothing)'}", language=None, wrap_lines=True)
    else:
        st.code(analysis.output_text or "(empty)", language=None, wrap_lines=True)
    pieces = analysis.target_pieces
    decoding = DecodingSteps.of(analysis, cfg.eos_id, asked)
    first, steps = decoding.first, decoding.count
    if steps < 1:
        st.info("The model wrote nothing: there is no decoding step to show. Try a sentence it can go on with.")
        return
    step = 1
    if steps > 1:
        state.keep_valid(KV_STEP, state.Between(1, steps), steps)  # seeded here: a kept value, not a default
        step = st.slider("Decoding step", 1, steps, key=KV_STEP)
    position = decoding.query(step)  # the position fed at this step; it writes position + 1
    n_layers = len(analysis.layers("decoder.self_attn"))
    held = [kv_cache_numbers(n_layers, cfg.d_model, decoding.keys_held(s)) for s in range(1, steps + 1)]
    wrote = repr(display_piece(pieces[position + 1])) if position + 1 < len(pieces) else "the end of the text"
    st.text(f"Step {step} of {steps}: fed {display_piece(pieces[position])!r}, wrote {wrote}")
    st.caption("Its new token's query against every key in the cache (the new token's own in orange):")
    sublayer = analysis.sublayer("decoder.self_attn", 0)
    row = sublayer.weights[0, position, : position + 1]
    title = f"Self-attention of step {step}, layer 1, head 1"
    chart(attention_row(row, sublayer.key_pieces[: position + 1], title, own=position), "kv_row", source.entry.name)
    left, right = side_by_side(2)
    with left:
        chart(cache_growth(held, step, "Cache size"), "cache", source.entry.name)
    with right:
        chart(cache_work(first, steps, step), "work", source.entry.name)
    st.caption(
        f"After step {step} the cache holds a key and a value for {position + 1} positions in each of {n_layers} "
        f"layers: 2 × {n_layers} × {position + 1} × {cfg.d_model} = {held[step - 1]:,} numbers. With it, step {step} "
        f"ran {literal(first if step == 1 else 1)} position(s) through the decoder; without it, {position + 1}."
    )
    timing = cache.cache_timing(source.path, source.stamp, source.text, analysis.generated or MAX_OUTPUT)
    clock = "CPU time" if timing.clock == "CPU" else "elapsed time"
    cols = st.columns(3)
    cols[0].metric(f"Writing {timing.tokens:d} tokens with the cache", f"{timing.with_cache * 1000:.1f} ms")
    cols[1].metric("without it", f"{timing.without_cache * 1000:.1f} ms")
    cols[2].metric("saved", f"{1 - timing.with_cache / timing.without_cache:.0%}" if timing.without_cache else "–")
    st.caption(f"Measured on the machine running this app ({clock}, the faster of two runs each): the same tokens.")
