"""Lesson: the ideas of the Transformer in order, each a short paragraph and a live view of the loaded model.

The step is kept in session state as its slug (`LESSON`, declared in the URL: ui.state), so a teacher can link to
one step (`?lesson=no-peek-mask`). The steps and their paragraphs are course.lesson's (course/steps/*.md), the
model work analysis.lesson's.
"""

from __future__ import annotations

import math
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from analysis.analyze import batch_masks, positions_used
from analysis.induction import PROBE_BATCH
from analysis.lesson import (
    INDUCTION_AT,
    Copying,
    Cost,
    formation,
)
from analysis.record import Analysis, DecodingSteps
from course.lesson import NEEDS, SENTENCES, SINUSOIDAL, SLUGS, STEPS, Step, step_index
from inference import catalog
from inference.checkpoint import CheckpointError, load_config
from model.names import block_layer
from ui import cache, charts, errors, sidebar, state
from ui.cache import Analysed, Context
from ui.widgets import projector, show_chart
from viz.attribution import attribution_title, heads_heatmap
from viz.generation import attention_row, cache_growth, kv_cache_numbers
from viz.heads import head_heatmap
from viz.labels import display_piece, safe_filename
from viz.lesson import MOST_COLUMNS, cache_work, cost_figure, masked_head, residual_figure, shift_frame, vectors_heatmap
from viz.masks import mask_heatmap, padding_heatmap, reduced_note
from viz.patching import patching_heatmap, patching_title
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
from viz.training import copying_curve, head_over_steps

SHORT = "Hi!"  # the short sentence padded beside the lesson's
WRITE = 12  # tokens the language model writes for the key/value cache step
MAX_OUTPUT = 64  # an encoder-decoder's output, as the analysis decodes it (analysis.analyze.Request.max_tokens)
PROB = st.column_config.ProgressColumn("probability", min_value=0.0, max_value=1.0, format="%.3f")
LESSON = state.url_key("lesson")  # the step shown, as its slug
SOURCE = state.url_key("lesson_source", url="sentence")  # "lesson": the lesson's sentence, "yours": the sidebar's
KV_STEP = state.url_key("lesson_kv_step", int, url="kv_step")  # the key/value cache step's decoding step, from 1
TRAINING_STEP = "step"  # the URL parameter of views/training.py's snapshot slider


def chart(fig, key: str, *parts: object) -> None:
    """A lesson chart, through ui.widgets.show_chart: large type in projector mode, cell numbers only where they fit."""
    show_chart(fig, f"lesson_{key}", safe_filename("lesson", key, *parts))


def side_by_side(n: int, spec: list[int] | None = None) -> list:
    """`n` columns, or `n` containers one below the other in projector mode (each chart the page's width)."""
    return [st.container() for _ in range(n)] if projector() else st.columns(spec or n)


# Navigation --------------------------------------------------------------------------------------------------------


@errors.safe  # a callback: runs outside the page's guard
def _go(index: int) -> None:
    st.session_state[LESSON] = SLUGS[index]


@errors.safe  # a callback: runs outside the page's guard
def _jump() -> None:
    st.session_state[LESSON] = st.session_state["lesson_jump"]


def current() -> int:
    """The step shown (0-based); a slug that names no step gets a message and step 1."""
    slug = st.session_state.get(LESSON)
    index = step_index(slug)
    if index is None:
        if slug is not None:
            shown = "".join(ch for ch in str(slug) if ch.isascii() and (ch.isalnum() or ch in "-_"))[:40]
            st.warning(
                f"There is no lesson step “{shown}”: the lesson starts at step 1. The steps: {', '.join(SLUGS)}."
            )
        index = 0
        st.session_state[LESSON] = SLUGS[0]
    return index


def navigation(index: int, where: str) -> None:
    """Previous / next buttons and, at the top, the list of steps to jump to."""
    cols = st.columns([3, 8, 3], vertical_alignment="bottom")  # room for the buttons' labels at 1024 px
    cols[0].button("← Previous", key=f"lesson_prev_{where}", on_click=_go, args=(index - 1,), disabled=index == 0)
    cols[2].button(
        "Next →", key=f"lesson_next_{where}", on_click=_go, args=(index + 1,), disabled=index == len(STEPS) - 1
    )
    if where == "top":
        st.session_state["lesson_jump"] = SLUGS[index]
        titles = {s.slug: f"{i + 1}. {s.title}" for i, s in enumerate(STEPS)}
        cols[1].selectbox(
            "Step", SLUGS, key="lesson_jump", on_change=_jump, format_func=titles.get, label_visibility="collapsed"
        )


# How the loaded model computes -----------------------------------------------------------------------------------

ACTIVATIONS = {"relu": "ReLU", "gelu": "GELU", "gelu_tanh": "GELU", "swiglu": "SwiGLU"}
NORMS = {"layer": "LayerNorm", "rms": "RMSNorm"}


def activation_name(ctx: Context) -> str:
    return ACTIVATIONS.get(ctx.ckpt.config.switches.activation, ctx.ckpt.config.switches.activation)


def norm_name(ctx: Context) -> str:
    return NORMS.get(ctx.ckpt.config.switches.norm_type, ctx.ckpt.config.switches.norm_type)


# Which model a step needs ------------------------------------------------------------------------------------------


# The order a step borrows a model in, best first. A step about the induction heads wants a model whose card records
# one; then by preset family (inference.catalog.preset_family): translators (their cross-attention reads best), then
# language models of real text (their guesses and heads read as English), then the rest: the reverser, and the
# random-word induction model, whose guesses on an English sentence are ~0.001 wherever nothing repeats.
FAMILY_ORDER = ("translate", "lm")
HEAD_STEPS = ("induction-heads", "induction-circuit")


def induction_score(card: object) -> float:
    """The best induction head's score a card records (training.evaluate writes
    metrics.induction.best_induction_head); 0 for a card without one."""
    try:
        return float(card["metrics"]["induction"]["best_induction_head"]["score"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return 0.0


def preference(slug: str, entry: catalog.Entry) -> tuple[bool, int, str]:
    """How fitting `entry` is to borrow for step `slug`: sorts best first, by FAMILY_ORDER, then by name."""
    family = catalog.preset_family(entry.name, entry.kind, entry.card)
    rank = FAMILY_ORDER.index(family) if family in FAMILY_ORDER else len(FAMILY_ORDER)
    return slug in HEAD_STEPS and induction_score(entry.card) < INDUCTION_AT, rank, entry.name


def fitting_models(step: Step) -> list[str]:
    """The readable checkpoints that can show `step`, the most fitting first (FAMILY_ORDER)."""
    root = catalog.checkpoints_dir()
    fitting = []
    for entry in cache.checkpoint_entries(str(root), catalog.folder_stamp(root)):
        try:
            if entry.ok and step.fits(load_config(entry.path)[0]):
                fitting.append(entry)
        except CheckpointError:
            continue
    return [e.name for e in sorted(fitting, key=lambda e: preference(step.slug, e))]


def borrowed(step: Step, ctx: Context) -> Context | None:
    """The step's own model, loaded for this step only (the app's model stays the sidebar's), with the same text;
    None when no readable checkpoint can show it."""
    root = catalog.checkpoints_dir()
    entries = {e.name: e for e in cache.checkpoint_entries(str(root), catalog.folder_stamp(root))}
    for name in fitting_models(step):
        stamp = catalog.stamp(entries[name].path)
        try:
            return Context(entries[name], cache.load_model(str(entries[name].path), stamp), stamp, ctx.text)
        except CheckpointError:
            continue
    return None


def model_check(step: Step, ctx: Context) -> Context | None:
    """The context the step is shown on: the loaded model where it fits, else a model that does, loaded for this
    step with a line saying so (and a button to switch the whole app to it); None when no model can show it."""
    if step.fits(ctx.ckpt.config):
        st.caption(f"Needs {NEEDS[step.needs]}: {ctx.entry.name} is one.")
        return ctx
    kind = f"{ctx.entry.kind}, {ctx.ckpt.config.positional} positions"
    other = borrowed(step, ctx)
    if other is None:
        st.info(f"This step needs {NEEDS[step.needs]}; the loaded model, {ctx.entry.name}, is not ({kind}).")
        st.warning(
            f"No checkpoint in `{catalog.checkpoints_dir()}` is {NEEDS[step.needs]}: add one to see this step live."
        )
        return None
    st.info(
        f"This step needs {NEEDS[step.needs]}; the loaded model, {ctx.entry.name}, is not ({kind}). Shown here on "
        f"{other.entry.name}, loaded for this step: the other pages keep {ctx.entry.name}."
    )
    st.button(
        f"Switch the app to {other.entry.name}",
        key=f"lesson_switch_{other.entry.name}",
        on_click=sidebar.switch_model,
        args=(other.entry.name,),
    )
    return other


# The views -------------------------------------------------------------------------------------------------------


def embeddings(ctx: Context, analysis: Analysis) -> None:
    w = cache.stream(ctx.path, ctx.stamp, ctx.text)
    cfg = ctx.ckpt.config
    if cfg.switches.embed_scale:
        row = f"one token's embedding × √{cfg.d_model} = {math.sqrt(cfg.d_model):.1f}"
    else:
        row = "one token's embedding as learned (this model does not multiply it by √d_model)"
    if cfg.positional == "rotary":
        then = "no position is ever added: rotary positions turn each query and key inside attention instead"
    else:
        then = "before its position is added"
    st.caption(
        f"{ctx.entry.name}: {cfg.vocab_size:,} pieces in the vocabulary, d_model = {cfg.d_model}. Each row below is "
        f"{row}, {then}."
    )
    left, right = side_by_side(2, [1, 3])
    frame = pd.DataFrame({"token": [display_piece(p) for p in w.pieces], "id": list(w.ids)})
    left.dataframe(frame, hide_index=True, key="lesson_ids")
    title = "Token embeddings × √d_model" if cfg.switches.embed_scale else "Token embeddings"
    with right:
        chart(vectors_heatmap(w.embedded, w.pieces, title), "embeddings", ctx.entry.name)


def positional(ctx: Context, analysis: Analysis) -> None:
    cfg = ctx.ckpt.config
    sinusoidal = cfg.positional == "sinusoidal"
    if not sinusoidal:
        st.markdown(f"For contrast, the table {ctx.entry.name} **learned** instead, one trained vector per position:")
    table = cache.positional_table(ctx.path, ctx.stamp)
    used = positions_used(ctx.ckpt, ctx.text)
    n = min(cfg.max_len, max(64, 2 * (used or 0)))
    chart(encoding_heatmap(table, n, used), "positional", ctx.entry.name)
    if used:
        st.caption(f"The dashed line ends the {used} positions the sentence uses.")
    d = cfg.d_model
    dims = sorted({0, d // 8 // 2 * 2, d // 4 // 2 * 2})
    chart(encoding_curves(table, dims, n, sinusoidal), "positional_curves", ctx.entry.name)


def padding(ctx: Context, analysis: Analysis) -> None:
    batch = batch_masks(ctx.ckpt, [ctx.text, SHORT])
    st.caption(f"The sentence and “{SHORT}” in one batch, as the model's {batch.stack} reads them.")
    chart(padding_heatmap(batch), "padding", ctx.entry.name)
    kind = "no-peek + padding" if batch.causal else "padding"
    pad = ctx.ckpt.tokenizer.pieces([ctx.ckpt.config.pad_id])[0]
    padded = next((i for i, pieces in enumerate(batch.pieces) if pad in pieces), 1)  # the sentence that was filled up
    pieces = batch.pieces[padded]
    st.caption(f"The {batch.stack}'s mask for sentence {padded + 1}, the padded one: no query may attend to a pad.")
    if note := reduced_note(batch.attention[padded].shape):
        st.caption(note)
    fig = mask_heatmap(batch.attention[padded], pieces, pieces, f"Sentence {padded + 1}: {batch.stack} {kind} mask")
    chart(fig, "padding_mask", ctx.entry.name)


def no_peek(ctx: Context, analysis: Analysis) -> None:
    block = analysis.block("decoder.self_attn", 0)
    fed = "the text" if analysis.kind == "decoder-only" else "<s> and the output it wrote"
    st.caption(f"The decoder's self-attention in layer 1, over {fed}. Rows are queries, columns keys.")
    title = "No-peek mask of the decoder"
    chart(mask_heatmap(block.mask, block.query_pieces, block.key_pieces, title), "nopeek_mask", ctx.entry.name)
    title = "Decoder layer 1, head 1 (grey ✗: masked, weight 0)"
    fig = masked_head(block.weights[0], block.mask, block.query_pieces, block.key_pieces, title)
    chart(fig, "nopeek_head", ctx.entry.name)


def scaled_dot(ctx: Context, analysis: Analysis) -> None:
    full = cache.analysis(ctx, full=True)
    attention = full.attentions[0]
    block = full.block(attention, 0)
    query = opening_query(block.mask)  # a query whose row the mask changes, as Attention math opens on
    steps = attention_steps(block, 0, query)
    st.latex(FORMULA)
    piece = display_piece(block.query_pieces[query])
    st.caption(f"{full.attention_label(attention)}, layer 1, head 1, for token {query + 1} ({piece}) as the query:")
    st.latex(steps_latex(steps))
    chart(steps_figure(steps, key_window(steps)), "steps", ctx.entry.name)
    chart(output_figure(steps), "steps_output", ctx.entry.name)
    st.page_link("views/attention_math.py", label="Any head and query: the Attention math page")


def multi_head(ctx: Analysed, analysis: Analysis) -> None:
    cfg = ctx.ckpt.config
    attention = analysis.attentions[0]
    d_head = cfg.d_model // cfg.n_heads
    st.caption(
        f"{ctx.entry.name}: d_model = {cfg.d_model} split into {cfg.n_heads} heads of d_k = {d_head}; each head's "
        f"{d_head} output numbers per token are concatenated back to {cfg.n_heads} × {d_head} = {cfg.d_model} and "
        "multiplied by W^O. Below, every head of every layer on the sentence: each attends in its own way."
    )
    chart(thaw(charts.grid_chart(ctx, attention)), "heads", ctx.entry.name)


def feed_forward(ctx: Context, analysis: Analysis) -> None:
    w = cache.stream(ctx.path, ctx.stamp, ctx.text)
    cfg = ctx.ckpt.config
    attn, ffn = w.weights
    act = activation_name(ctx)
    if act == "ReLU":
        zeros = f"In layer 1, {w.zero_share:.0%} of the units are exactly 0 after the ReLU on this sentence."
    else:  # GELU and SiLU let small negative values through: hardly a unit is exactly 0
        zeros = f"Its {act} lets small negative values through, so few units are exactly 0; most stay near it."
    st.caption(
        f"{ctx.entry.name}: {cfg.d_model} → {cfg.d_ff} → {cfg.d_model}, with {act}. In each layer the feed-forward "
        f"network has {ffn:,} weights and the self-attention {attn:,}. {zeros} Below, the "
        f"{min(MOST_COLUMNS, cfg.d_ff)} units most active on it (white: 0)."
    )
    units = w.active_units(MOST_COLUMNS)
    title = f"Layer 1 feed-forward units, after the {act}"
    fig = vectors_heatmap(w.hidden[:, units], w.pieces, title, x_title="unit", columns=units.tolist())
    chart(fig, "ffn", ctx.entry.name)


def residual(ctx: Context, analysis: Analysis) -> None:
    w = cache.stream(ctx.path, ctx.stamp, ctx.text)
    norm = norm_name(ctx)
    style = f"pre-norm: x + Sublayer({norm}(x))" if w.pre_norm else f"post-norm, as the paper: {norm}(x + Sublayer(x))"
    d = ctx.ckpt.config.d_model
    layer = norm == "LayerNorm"
    unit, learned = ("mean 0 and variance 1", "gain and bias") if layer else ("a mean square of 1", "gain")
    st.caption(
        f"{ctx.entry.name} is {style}. The mean length of the token vectors at each sub-layer of the {w.stack}: "
        f"what comes in, what the sub-layer adds, what goes out. Right after a {norm}, before its {learned}, "
        f"every vector has {unit} over its {d} numbers, so a length of about √{d} = {math.sqrt(d):.1f}."
    )
    chart(residual_figure(w.norms, w.pre_norm, norm), "residual", ctx.entry.name)


def cross(ctx: Analysed, analysis: Analysis) -> None:
    last = analysis.layers("decoder.cross_attn")[-1]
    st.markdown("**Output**")
    st.code(analysis.output_text or "(empty)", language=None, wrap_lines=True)
    st.caption(
        f"Rows are the decoder's steps: the step that reads a token is writing the next one, and looks for it in the "
        f"source (columns). Layer {last + 1}, the average of its heads."
    )
    fig = thaw(charts.head_chart(ctx, "decoder.cross_attn", last, charts.AVERAGE))
    chart(fig, "cross", ctx.entry.name)


def next_token(ctx: Context, analysis: Analysis) -> None:
    st.caption(
        "Each position reads its token and is trained to predict the next one: the target column is the input "
        "shifted by one. The model's own first guess at each position, and whether it is the text's next token:"
    )
    st.dataframe(shift_frame(analysis), hide_index=True, column_config={"probability": PROB}, key="lesson_shift")
    st.markdown("**After the last token, it would write**")
    st.dataframe(top_k_frame(analysis, -1), hide_index=True, column_config={"probability": PROB}, key="lesson_next")


def kv_cache(ctx: Context, analysis: Analysis) -> None:
    cfg = ctx.ckpt.config
    asked = None
    if analysis.kind == "decoder-only":
        asked = min(WRITE, cfg.max_len // 2)
        analysis = cache.analysis(ctx, continuation=asked)
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
    block = analysis.block("decoder.self_attn", 0)
    row = block.weights[0, position, : position + 1]
    title = f"Self-attention of step {step}, layer 1, head 1"
    chart(attention_row(row, block.key_pieces[: position + 1], title, own=position), "kv_row", ctx.entry.name)
    left, right = side_by_side(2)
    with left:
        chart(cache_growth(held, step, "Cache size"), "cache", ctx.entry.name)
    with right:
        chart(cache_work(first, steps, step), "work", ctx.entry.name)
    st.caption(
        f"After step {step} the cache holds a key and a value for {position + 1} positions in each of {n_layers} "
        f"layers: 2 × {n_layers} × {position + 1} × {cfg.d_model} = {held[step - 1]:,} numbers. With it, step {step} "
        f"ran {first if step == 1 else 1} position(s) through the decoder; without it, {position + 1}."
    )
    timing = cache.cache_timing(ctx.path, ctx.stamp, ctx.text, analysis.generated or MAX_OUTPUT)
    clock = "CPU time" if timing.clock == "CPU" else "elapsed time"
    cols = st.columns(3)
    cols[0].metric(f"Writing {timing.tokens} tokens with the cache", f"{timing.with_cache * 1000:.1f} ms")
    cols[1].metric("without it", f"{timing.without_cache * 1000:.1f} ms")
    cols[2].metric("saved", f"{1 - timing.with_cache / timing.without_cache:.0%}" if timing.without_cache else "–")
    st.caption(f"Measured on the machine running this app ({clock}, the faster of two runs each): the same tokens.")


def growth_sentence(cost: Cost, d: int) -> str:
    """What the cost step's measurements say: how the measured time and memory grow from n/2 to n (the table's
    medians, so the sentence matches the figure on every visit), set against what counting multiply-adds predicts
    for width `d`, whichever way the measurement falls."""
    low, high, grew = cost.growth(cost.seconds)
    memory = cost.growth(tuple(float(b) for b in cost.bytes))[2]
    counted = (4 * high * d + 2 * high**2) / (4 * low * d + 2 * low**2)  # (4·n·d² + 2·n²·d) at n over at n/2, ÷ d
    if grew < 3:
        reads = "nearer the 2× of a linear cost than the 4× of a pure n² one"
    elif grew < 4:
        reads = "between the 2× of a linear cost and the 4× of a pure n² one, nearer the n²"
    else:
        reads = "as much as a pure n² cost, 4×, or more"
    return (
        f"From n = {low} to n = {high} the measured time grows {grew:.1f}× and the memory {memory:.1f}×: the time "
        f"{reads}. The block's four projections cost 4·n·d² multiply-adds against 2·n²·d for QKᵀ and the weighted "
        f"sum (d = {d}): equal at n = 2d = {2 * d}, with the n² part taking over beyond it; counted so, the work "
        f"grows {counted:.1f}×."
    )


def quadratic(ctx: Context) -> None:
    cost = cache.attention_cost(ctx.path, ctx.stamp)
    ms = [s * 1000 for s in cost.seconds]
    kib = [b / 1024 for b in cost.bytes]
    left, right = side_by_side(2)
    with left:
        fit = [c * 1000 for c in cost.time_fit]
        chart(cost_figure(cost.lengths, ms, fit, "Time of one attention block", "ms"), "time", ctx.entry.name)
    with right:
        fit = [c / 1024 for c in cost.bytes_fit]
        chart(cost_figure(cost.lengths, kib, fit, "Memory: scores + weights", "KiB"), "memory", ctx.entry.name)
    heads, d = ctx.ckpt.config.n_heads, ctx.ckpt.config.d_model
    clock = "CPU time of the thread running it" if cost.clock == "CPU" else "elapsed time"
    st.caption(
        f"{cost.block}, measured on the machine running this app when the step was first opened ({clock}), the "
        f"median of {cost.repeats} runs at each of {len(cost.lengths)} lengths. {growth_sentence(cost, d)} Memory: "
        f"{cost.bytes_fit[0]:.0f} bytes per n² = 2 matrices (scores, weights) × {heads} heads × 4 bytes."
    )
    table = pd.DataFrame({"n": list(cost.lengths), "time (ms)": ms, "scores + weights (KiB)": kib})
    st.dataframe(table, hide_index=True, key="lesson_cost")


def layer_of(block: str) -> int:
    """The layer of block `decoder.layers.1.self_attn` as a person counts it: 2."""
    return block_layer(block) + 1


def head_label(block: str, head: int) -> str:
    """`layer 2, head 1` for block `decoder.layers.1.self_attn` and head 0."""
    return f"layer {layer_of(block)}, head {head + 1}"


def heads_label(heads: tuple[tuple[str, int], ...]) -> str:
    """`layer 2, heads 1, 2, 4; layer 3, head 1` for (block name, head) pairs, in the order given; – for none."""
    layers: dict[str, list[str]] = {}
    for block, head in heads:
        layers.setdefault(block, []).append(str(head + 1))
    parts = [f"layer {layer_of(b)}, head{'s' * (len(hs) > 1)} {', '.join(hs)}" for b, hs in layers.items()]
    return "; ".join(parts) or "–"


def copying_models(but: str) -> list[str]:
    """The listed checkpoints other than `but` whose card records an induction head scoring INDUCTION_AT or more,
    the most fitting first (FAMILY_ORDER: a model of real English before the random-word one)."""
    root = catalog.checkpoints_dir()
    entries = cache.checkpoint_entries(str(root), catalog.folder_stamp(root))
    copying = [e for e in entries if e.ok and e.name != but and induction_score(e.card) >= INDUCTION_AT]
    return [e.name for e in sorted(copying, key=lambda e: preference(HEAD_STEPS[0], e))]


SWITCHED = {
    "intact": "nothing (the intact model)",
    "induction": "the best induction head",
    "previous": "the best previous-token head",
    "every": f"every head scoring {INDUCTION_AT} or more",
}


def induction(ctx: Context) -> None:
    seen = cache.copying(ctx.path, ctx.stamp)
    name, n = ctx.entry.name, seen.length
    best = head_label(seen.block, seen.head)
    st.markdown(f"**The repeated run**: `<s>`, {n} random tokens, then the same {n} again")
    run = [display_piece(p) for p in seen.pieces]
    st.code(f"{run[0]}\n{' '.join(run[1 : n + 1])}\n{' '.join(run[n + 1 :])}", language=None, wrap_lines=True)
    st.markdown(f"**The best induction head of {name}: {best}** (induction score {seen.score:.2f})")
    if seen.score < INDUCTION_AT:
        st.info(
            f"No head of {name} scores {INDUCTION_AT} or more: it has not learned to copy from its context, and its "
            f"best head draws no offset diagonal."
        )
        for other in copying_models(name)[:2]:
            st.button(
                f"Switch to {other}, which has one",
                key=f"lesson_switch_{other}",
                on_click=sidebar.switch_model,
                args=(other,),
                type="primary",
            )
    title = f"Decoder {best}"  # the markdown above says what it reads
    chart(head_heatmap(seen.weights, seen.pieces, seen.pieces, title), "induction_head", name)
    st.caption(
        f"Found by the scores: of every self-attention head, the one with the most weight, from a token of the "
        f"second copy, on the token after that token's first occurrence, {n - 1} places back (averaged over "
        f"{PROBE_BATCH} such runs; Head statistics lists every head's score). An induction head draws that as a "
        f"bright diagonal {n - 1} places left of the main one, from row {n + 2} on."
    )
    intact = seen.runs[0]
    st.markdown("**Switching heads off**: how well the model predicts the second copy without them")
    table = pd.DataFrame(
        {
            "switched off": [SWITCHED[r.what] for r in seen.runs],
            "heads": [heads_label(r.heads) for r in seen.runs],
            "loss, second copy (nats)": [r.loss for r in seen.runs],
            "top-1, second copy": [r.top1 for r in seen.runs],
        }
    )
    top1 = st.column_config.ProgressColumn("top-1, second copy", min_value=0.0, max_value=1.0, format="percent")
    loss = st.column_config.NumberColumn("loss, second copy (nats)", format="%.2f")
    config = {"top-1, second copy": top1, "loss, second copy (nats)": loss}
    st.dataframe(table, hide_index=True, column_config=config, key="lesson_induction_off")
    off = {r.what: r for r in seen.runs}
    said = f"Without {best} the second copy costs {off['induction'].loss:.2f} nats instead of {intact.loss:.2f}"
    if "every" in off:
        every = off["every"]
        said += f"; without all {len(every.heads)} heads that score {INDUCTION_AT} or more, {every.loss:.2f}"
    st.caption(
        f"Switched off, a head's output becomes 0 before W^O. The loss is the mean over the second copies' tokens "
        f"(nats); the first copies, which nothing can predict, cost {seen.first_copy_loss:.2f}: a second copy that "
        f"costs as much is no longer copied. {said}."
    )
    st.page_link("views/ablation.py", label="Any heads, on your own text: the Head ablation page")
    _formation(ctx, seen)


def _formation(ctx: Context, seen: Copying) -> None:
    """The run that trained the model: the probe at every evaluation, and the best head at a few snapshots."""
    name = ctx.entry.name
    st.markdown("**How it formed in training**")
    saved = cache.snapshots(ctx.path, ctx.stamp)
    training = ctx.ckpt.card.get("training")
    formed = formation(training.get("history") if isinstance(training, dict) else None, [s.step for s in saved])
    if formed is None:
        st.info(
            f"The card of {name} records no induction probe at the evaluations of the run that trained it "
            "(`python -m atlas train` records one for a decoder-only model)."
        )
        if saved:
            st.page_link("views/training.py", label=f"{name}'s training snapshots: the Training steps page")
        return
    fig = copying_curve(formed.steps, formed.induction, formed.first_copy_loss, formed.second_copy_loss, formed.formed)
    chart(fig, "induction_curve", name)
    if formed.formed is None:
        when = f"No head reached {INDUCTION_AT} in this run: no induction head formed."
    else:
        when = (
            f"The score reached half its last value at step {formed.formed:,} (the dashed line), as the second "
            "copy's loss fell."
        )
    st.caption(
        "At every evaluation of the run, on the same kind of repeated run: the best head's induction score (orange) "
        f"and the loss on the first copy (dotted) and the second (solid). {when}"
    )
    if formed.shown:
        weights, labels = [], []
        for step in formed.shown:
            w, score = cache.snapshot_head(ctx.path, ctx.stamp, step, seen.length, seen.block, seen.head)
            weights.append(w)
            labels.append(f"step {step:,} · score {score:.2f}")
        title = f"{head_label(seen.block, seen.head).capitalize()} in training"
        fig = head_over_steps(weights, labels, seen.pieces, seen.pieces, title, columns=3)
        chart(fig, "induction_steps", name)
        st.caption(
            f"The same head on the same repeated run at {len(formed.shown)} of the run's snapshots (the last before "
            "the score rose, the first after it reached half its last value, the last), each with the head's own "
            "induction score at that step."
        )
    if saved:
        link = {sidebar.MODEL: name} | ({TRAINING_STEP: formed.forming} if formed.forming is not None else {})
        label = "Every snapshot of the run, on your own text: the Training steps page"
        st.markdown(f"[{label}](training?{urlencode(link)})")


def induction_circuit(ctx: Context) -> None:
    """The previous-token head, the K-composition into the induction head, patching, and what the heads write."""
    seen = cache.circuit(ctx.path, ctx.stamp)
    if seen is None:
        st.info("The circuit is traced in a decoder-only language model: choose one in the sidebar.")
        return
    name, cfg = ctx.entry.name, ctx.ckpt.config
    (prev_block, prev_head, prev_score), (ind_block, ind_head, ind_score) = seen.previous, seen.induction
    if ind_score < INDUCTION_AT:
        st.info(
            f"No head of {name} scores {INDUCTION_AT} or more as an induction head: the figures below trace a circuit "
            "it has not grown, and show little."
        )
        for other in copying_models(name)[:2]:
            switch = {"on_click": sidebar.switch_model, "args": (other,), "type": "primary"}
            st.button(f"Switch to {other}, which has one", key=f"lesson_switch_{other}", **switch)
    clean, corrupted = [display_piece(p) for p in seen.clean_pieces], [display_piece(p) for p in seen.corrupted_pieces]
    n = seen.length
    copied = display_piece(ctx.ckpt.tokenizer.pieces([seen.patching.answer])[0])
    st.markdown(f"**The run**: `<s>`, {n} tokens, then the same again up to “{copied}”, which the model should copy")
    st.code(f"{' '.join(clean[1 : n + 1])}\n{' '.join(clean[n + 1 :])} …", language=None, wrap_lines=True)
    st.caption(f"{name} gives “{copied}” probability {seen.probability:.3f} there, after the run's last token.")
    prev, ind = head_label(prev_block, prev_head), head_label(ind_block, ind_head)
    st.markdown(f"**1. The previous-token head: {prev}** (previous-token score {prev_score:.2f} on the probe)")
    previous_view = head_heatmap(seen.previous_weights, seen.clean_pieces, seen.clean_pieces, f"Decoder {prev}")
    chart(previous_view, "circuit_previous", name)
    st.caption("Each row's weight sits just left of the diagonal: every token reads the one before it.")
    st.markdown(f"**2. Its output feeds the keys of the induction head, {ind}** (induction score {ind_score:.2f})")
    if seen.sources:
        rows = [(f"layer {layer + 1}, head {head + 1}", score) for layer, head, score in seen.sources[:5]]
        table = pd.DataFrame(rows, columns=["earlier head", "K-composition"])
        st.dataframe(table, hide_index=True, key="circuit_sources")
        rank = seen.previous_rank
        where = "reads most from it" if rank == 1 else f"ranks it {rank} of {len(seen.sources)}"
        st.caption(
            f"From the weights (Head statistics draws every pair): ‖W_OV(earlier) · W_QK(induction)ᵀ‖ over their "
            f"norms. Of every earlier head, {ind} {where}."
        )
    else:
        st.caption(f"{ind} is in the first layer: no earlier head writes into its keys.")
    st.markdown("**3. Patching confirms it**: the second half changed, then each head taken from the run above")
    st.code(f"{' '.join(corrupted[n + 1 :])} …", language=None, wrap_lines=True)
    versus = display_piece(ctx.ckpt.tokenizer.pieces([seen.patching.versus])[0])
    labels = [str(i + 1) for i in range(len(seen.clean_pieces))]
    title = patching_title("heads", copied, versus, False)
    chart(patching_heatmap(seen.patching.scores, "heads", labels, title), "circuit_patching", name)
    best = float(seen.patching.scores.max())
    st.caption(
        f"1: the changed run answers “{copied}” again, as strongly as the original; 0: no change. Each head alone "
        f"restores at most {best:.2f}; the {len(seen.together)} heads that score {INDUCTION_AT} or more as induction "
        f"heads, patched together, restore {seen.restored:.2f}: they share the copying."
    )
    st.markdown(f"**4. What the heads write toward “{copied}”**")
    parts = seen.attribution
    heads = parts.heads["decoder.self_attn"]
    labels_ = {"decoder.self_attn": "Self-attention (masked)"}
    title = attribution_title(copied, f"{len(clean)}:{clean[-1]}", None)
    chart(heads_heatmap({"decoder.self_attn": heads}, labels_, title), "circuit_attribution", name)
    layer, head = divmod(int(heads.argmax()), cfg.n_heads)
    st.caption(
        f"Each head's direct contribution to the logit of “{copied}” ({parts.logit:.2f} in all; the Logit "
        f"attribution page shows every part). The largest is layer {layer + 1}, head {head + 1}'s: "
        f"{heads.max():.2f}; {ind} writes {heads[block_layer(ind_block), ind_head]:.2f}."
    )


VIEWS = {
    "embeddings": embeddings,
    "positional-encoding": positional,
    "padding-mask": padding,
    "no-peek-mask": no_peek,
    "scaled-dot-product": scaled_dot,
    "multi-head": multi_head,
    "feed-forward": feed_forward,
    "residual-layernorm": residual,
    "cross-attention": cross,
    "next-token": next_token,
    "kv-cache": kv_cache,
}


# steps that read no sentence
WITHOUT_SENTENCE = {"quadratic-cost": quadratic, "induction-heads": induction, "induction-circuit": induction_circuit}


def sentence(ctx: Context) -> Context:
    """The context with the lesson's sentence for this model, or the student's own text from the sidebar."""
    family = catalog.preset_family(ctx.entry.name, ctx.entry.kind, ctx.entry.card)
    ours = SENTENCES[family]
    options = {"lesson": "the lesson's", "yours": "yours (the sidebar's text)"}  # fixed labels: one widget
    state.keep_valid(SOURCE, list(options), "lesson")
    source = st.radio("Sentence", list(options), key=SOURCE, format_func=options.get, horizontal=True)
    text = ours if source == "lesson" else ctx.text
    st.text(f"The sentence: {text[:300]}{'…' if len(text) > 300 else ''}")  # plain text: never markdown
    return ctx.with_text(text)


@errors.safe
def show(step: Step, ctx: Context) -> None:
    """The step's live view, after checking the model can show it."""
    shown = model_check(step, ctx)
    if shown is None:
        if step.needs != SINUSOIDAL:  # the positions step still draws the loaded model's own table
            return
        shown = ctx
    ctx = shown
    if step.slug in WITHOUT_SENTENCE:
        WITHOUT_SENTENCE[step.slug](ctx)
        return
    chosen = sidebar.chosen(ctx=sentence(ctx))
    if chosen is not None:
        VIEWS[step.slug](chosen, chosen.analysis)


def body() -> None:
    st.title("Lesson")
    index = current()
    step = STEPS[index]
    st.progress((index + 1) / len(STEPS), text=f"Step {index + 1} of {len(STEPS)}: {step.title}")
    navigation(index, "top")
    st.header(f"{index + 1}. {step.title}", anchor=False)
    st.markdown(step.text)
    ctx = sidebar.context()
    if ctx is not None:
        show(step, ctx)
    navigation(index, "bottom")


errors.guarded(body)
