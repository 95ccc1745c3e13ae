"""Generate: the model writes, and a step slider shows each decoding step: the token chosen with its top-k, the
decoder's self-attention (and cross-attention) row of that step, and the key/value cache growing."""

from __future__ import annotations

import streamlit as st

from analysis.fork import Fork
from analysis.record import Analysis, DecodingSteps
from inference import catalog
from inference.decoding import Sampling
from inference.text import InputError
from model.names import parse_attention_type
from ui import cache, errors, player, reference, sidebar, state
from ui.cache import Source
from ui.markdown import literal
from ui.says import figure_says
from ui.widgets import data_table, layer_and_head, show_chart
from viz.fork import fork_frame, fork_shown
from viz.generation import attention_row, cache_growth, kv_cache_numbers
from viz.labels import display_piece, safe_filename
from viz.style import COLUMN_LABELS
from viz.tables import top_k_frame

PROB = st.column_config.ProgressColumn("probability", min_value=0.0, max_value=1.0, format="%.3f")
MODES = ["sampling", "greedy"]
DEFAULT_TOKENS = 60  # about 45 English words: enough for a continuation to read as text, not a phrase
# Sampling as the page opens: a little sharper than the model's own distribution, from its 40 likeliest tokens; both
# shown beside the text. Seed 0: every visit writes the same text.
DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_SEED = 0.8, 40, 0
SAMPLING_NOTE = (
    "Sampling draws each token from the model's probabilities, divided by the temperature (below 1: sharper) and "
    "cut to the top-k likeliest; the seed fixes the draws, so the same settings write the same text on every visit."
)
GREEDY_NOTE = (
    "Greedy decoding takes the single likeliest token at every step. Text written so soon repeats itself: once a "
    "phrase has been written, writing it again is often the likeliest continuation, and greedy never leaves that "
    "loop (Holtzman et al. 2020, “The Curious Case of Neural Text Degeneration”). Sampling, the page's default, "
    "writes as people do: not always the likeliest word."
)
GEN_TOKENS = state.url_key("gen_tokens", int)
GEN_MODE = state.url_key("gen_mode")
GEN_TEMPERATURE = state.url_key("gen_temperature", float)
GEN_TOP_K = state.url_key("gen_top_k", int)
GEN_SEED = state.url_key("gen_seed", int)
GEN_STEP = state.url_key("gen_step", int, across_pages=False)  # in the URL; dropped when another page shows
FORK = state.url_key("gen_fork", int, across_pages=False)  # the candidate written instead at the step; 0: none
FORK_AT = state.url_key("gen_fork_at", int, across_pages=False)  # the step whose heads the two branches compare
FORK_TOKENS = 20  # what each branch writes from the fork on: enough for the two texts to part and often meet again


def continuation(source: Source) -> Analysis | None:
    """The language model's text and what it wrote after it, with the controls for how it writes."""
    cols = st.columns(5)
    most = min(64, source.ckpt.config.max_len // 2)
    vocab = source.ckpt.config.vocab_size
    state.keep_valid(GEN_TOKENS, state.Between(1, most), min(DEFAULT_TOKENS, most))
    state.keep_valid(GEN_MODE, MODES, MODES[0])
    state.keep_valid(GEN_TEMPERATURE, state.Between(0.1, 2.0), DEFAULT_TEMPERATURE)
    state.keep_valid(GEN_TOP_K, state.Between(0, vocab), min(DEFAULT_TOP_K, vocab))
    state.keep_valid(GEN_SEED, state.Between(0, 2**31 - 1), DEFAULT_SEED)
    tokens = cols[0].number_input("Tokens to write", 1, most, key=GEN_TOKENS)
    mode = cols[1].radio("Decoding", MODES, key=GEN_MODE, horizontal=True)
    if mode == "sampling":
        cols[2].slider("Temperature", 0.1, 2.0, step=0.1, key=GEN_TEMPERATURE)
        cols[3].number_input("Top-k (0: all)", 0, vocab, key=GEN_TOP_K)
        cols[4].number_input("Seed", 0, 2**31 - 1, key=GEN_SEED)
    st.caption(SAMPLING_NOTE if mode == "sampling" else GREEDY_NOTE)
    try:
        return cache.analysis(source, continuation=int(tokens), sampling=sampling())
    except InputError as exc:
        st.error(errors.shown(str(exc)))
        return None


def body() -> None:
    st.title("Generate")
    shown = sidebar.chosen()
    if shown is None:
        return
    analysis = shown.analysis
    cfg = shown.ckpt.config
    if not analysis.has_decoder:
        st.info(
            f"{literal(shown.entry.name)} is an encoder: it reads the whole text at once, every token seeing every "
            "other, and writes none. Generating needs a language model or a translator: pick one in the sidebar."
        )
        return
    translates = analysis.has_encoder
    given, found, why = reference.asked(shown, translates)
    if not translates:
        figure = st.container()  # what the model wrote first, with its sentence; the controls under it
        written = continuation(shown)
        if written is None:
            return
        analysis = written
        with figure:
            st.markdown("**Text, then what the model wrote**")
            st.code(
                f"{written.text} ⟶ {written.continuation or '(nothing: it ended the text at once)'}",
                language=None,
                wrap_lines=True,
            )
            figure_says(
                "After the arrow, what the language model wrote: one token at a time, each time feeding its own "
                "choice back in. The steps below show each one."
            )
        ids = written.target_ids
        reference.certainty(
            shown, reference.own(shown, ids, len(ids) - written.generated), "what it wrote", "certainty"
        )
        reference.reference_box(shown, translates, found, why)
        if written.generated == 0:
            return
    else:
        caption = "The decoder writes the output one token at a time, reading the encoder's keys and values."
        if (beam := catalog.decoding_beam(shown.ckpt.card)) > 1:
            caption += (
                f" It keeps the {literal(beam)} likeliest outputs so far at every step (beam search, which this "
                "model's card measured better than taking the likeliest token each time), so a step's written token "
                "is not always the top one in its table."
            )
        st.markdown("**Output**")
        st.code(analysis.output_text or "(empty)", language=None, wrap_lines=True)
        figure_says(caption)
        reference.certainty(shown, reference.own(shown, analysis.target_ids, 1), "its output", "certainty")
        reference.reference_box(shown, translates, found, why)
        if found is not None:  # the steps below: the decoder reading the reference (teacher forcing)
            reference.certainty(shown, found.rows, "the reference translation", "certainty_forced")
            analysis = cache.analysed(shown.source.with_reference(given)).analysis
            st.caption("The steps below follow the decoder as it reads the reference, not its own output.")
    decoding = DecodingSteps.of(analysis, cfg.eos_id, st.session_state.get(GEN_TOKENS))
    if decoding.count < 1:
        st.info("The model wrote nothing: there is no decoding step to show.")
        return
    source = shown.source.with_reference(given) if translates and found is not None else shown.source
    written_tokens = 0 if translates else int(st.session_state[GEN_TOKENS])
    player.player(GEN_STEP, decoding_steps, source, written_tokens, None if translates else sampling())


def sampling() -> Sampling | None:
    """How the language model writes, as the controls above say (the session holds their values): None for greedy."""
    if st.session_state.get(GEN_MODE) != "sampling":
        return None
    return Sampling(
        float(st.session_state[GEN_TEMPERATURE]), int(st.session_state[GEN_TOP_K]), int(st.session_state[GEN_SEED])
    )


@errors.safe
def decoding_steps(source: Source, written_tokens: int, sampling: Sampling | None) -> None:
    """The step controls and what the chosen decoding step shows: a fragment (ui.player) that reruns alone on a
    step or head change and while playing, and reads the analysis the page drew from the worker's results."""
    if written_tokens:
        analysis = cache.analysis(source, continuation=written_tokens, sampling=sampling)
    else:
        analysis = cache.analysed(source).analysis
    cfg = source.ckpt.config
    pieces = analysis.target_pieces
    decoding = DecodingSteps.of(analysis, cfg.eos_id, written_tokens or None)
    steps = decoding.count
    step = 1
    if steps > 1:
        options = list(range(1, steps + 1))
        state.keep_valid(GEN_STEP, options, steps, owner=(analysis.checkpoint, analysis.text))
        player.controls(GEN_STEP, options, "decoding step")
        step = st.slider(
            "Decoding step",
            1,
            steps,
            key=GEN_STEP,
            on_change=player.slid,
            args=(GEN_STEP,),
            disabled=player.playing(GEN_STEP),
        )
    position = decoding.query(step)
    wrote = repr(display_piece(pieces[position + 1])) if position + 1 < len(pieces) else "the end of the output"
    st.markdown(f"**Step {step} of {steps:d}**")
    st.text(f"fed {display_piece(pieces[position])!r} at position {position + 1}, wrote {wrote}")
    left, right = st.columns([2, 3])
    with left:
        data_table(top_k_frame(analysis, position), hide_index=True, column_config={"probability": PROB})
        n_layers = len(analysis.layers("decoder.self_attn"))
        held = [kv_cache_numbers(n_layers, cfg.d_model, decoding.keys_held(s)) for s in range(1, steps + 1)]
        show_chart(cache_growth(held, step), "gen_cache", "kv-cache")
        keys = decoding.keys_held(step)
        note = (
            f"After step {step} the self-attention cache holds a key and a value for {keys:d} positions in each of "
            f"{n_layers} layers: 2 × {n_layers} × {keys:d} × {cfg.d_model} = {held[step - 1]:,} numbers "
            f"({held[step - 1] * 4 / 1024:.1f} KiB). With it, step {step} computes 1 new position; without it, "
            f"{keys:d}."
        )
        if analysis.source_pieces is not None:
            cross = kv_cache_numbers(n_layers, cfg.d_model, len(analysis.source_pieces))
            note += f" Cross-attention's keys and values ({cross:,} numbers) are computed once from the encoder."
        st.caption(note)
    with right:
        cols = st.columns(2)
        layer, head = layer_and_head(analysis, "decoder.self_attn", cols)  # the choice every page shares
        sublayer = analysis.sublayer("decoder.self_attn", layer)
        name = safe_filename("step", source.name, f"L{layer + 1}", f"H{head + 1}", f"s{step}")
        row = sublayer.weights[head, position, : position + 1]
        title = f"Self-attention of step {step}, layer {layer + 1}, head {head + 1}"
        fig = attention_row(row, sublayer.key_pieces[: position + 1], title, own=position, most=COLUMN_LABELS)
        show_chart(fig, "gen_self_row", name)
        if "decoder.cross_attn" in analysis.attentions:
            cross_sublayer = analysis.sublayer("decoder.cross_attn", layer)
            title = f"Cross-attention of step {step}, layer {layer + 1}, head {head + 1}"
            fig = attention_row(
                cross_sublayer.weights[head, position], cross_sublayer.key_pieces, title, most=COLUMN_LABELS
            )
            show_chart(fig, "gen_cross_row", f"{name}-cross")
    state.sync_url()  # a rerun of this fragment alone: the address bar follows the step
    fork_view(source, analysis, step, position, layer, head)


def fork_view(source: Source, analysis: Analysis, step: int, position: int, layer: int, head: int) -> None:
    """The section "Fork here": at this step the likeliest token and another candidate, each continued greedily
    (analysis.fork, the cache of what came before shared), side by side, and one head of both at one step."""
    st.header("Fork here")
    st.caption(
        "What if the model had written another word at this step? Choose a candidate: the model writes it instead "
        "of the likeliest one, and both continue greedily (the likeliest token each time) from there, reading the "
        "same keys and values for everything before the fork."
    )
    candidates = analysis.predictions[position]
    labels = {0: "nothing (no fork)"}
    labels |= {c: f"candidate {c}: {display_piece(p.piece)} (p = {p.prob:.3f})" for c, p in enumerate(candidates, 1)}
    options = [0, *range(2, len(candidates) + 1)]
    state.keep_valid(FORK, options, 0, owner=(analysis.checkpoint, analysis.text, step))
    choice = st.selectbox("Write instead", options, key=FORK, format_func=labels.get)
    state.sync_url()
    if not choice:
        return
    prompt = analysis.target_ids[: position + 1]
    try:
        found = cache.forked(source, prompt, choice, FORK_TOKENS)
    except ValueError as exc:
        st.error(errors.shown(str(exc)))
        return
    tokenizer = source.ckpt.tokenizer
    branches = {"the likeliest": found.greedy, labels[choice]: found.forked}
    for column, (what, branch) in zip(st.columns(2), branches.items()):
        column.markdown(f"**After {literal(what)}**")
        text = tokenizer.decode(list(branch.ids)) or "(nothing: it ended the text)"
        column.code(text, language=None, wrap_lines=True)
    pieces = [tokenizer.pieces(list(b.ids)) for b in branches.values()]
    table = fork_frame(step, pieces[0], found.greedy.probs, pieces[1], found.forked.probs)
    data_table(fork_shown(table), hide_index=True, key="fork_table")
    fed = [tokenizer.pieces([*prompt, *b.ids]) for b in branches.values()]  # every branch's keys, the last step's too
    fork_heads(analysis, found, step, layer, head, fed)


def fork_heads(analysis: Analysis, found: Fork, step: int, layer: int, head: int, fed: list[list[str]]) -> None:
    """Both branches' attention rows at one step from the fork on, the page's layer and head, side by side."""
    steps = min(len(found.greedy.attention), len(found.forked.attention))
    at = step
    if steps > 1:
        state.keep_valid(FORK_AT, range(step, step + steps), step + 1, owner=(analysis.checkpoint, analysis.text, step))
        at = st.slider("Compare the heads at step", step, step + steps - 1, key=FORK_AT)
    s = at - step  # steps after the fork
    types = [t for t in ("decoder.self_attn", "decoder.cross_attn") if t in analysis.attentions]
    for column, branch, pieces in zip(st.columns(2), (found.greedy, found.forked), fed):
        for attention in types:
            sublayer = analysis.sublayer(attention, layer).name
            row = branch.attention[s][sublayer][head]
            keys = pieces[: len(row)] if attention == "decoder.self_attn" else analysis.source_pieces
            title = f"{analysis.attention_label(attention)} of step {at}, layer {layer + 1}, head {head + 1}"
            own = len(row) - 1 if attention == "decoder.self_attn" else None
            key = f"fork_{'greedy' if branch is found.greedy else 'forked'}_{parse_attention_type(attention)[1]}"
            show_chart(attention_row(row, keys, title, own=own, most=COLUMN_LABELS), key, key, where=column)


errors.guarded(body)
