"""Head ablation: switch heads off and see what the model predicts without them."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from analysis.ablation import Effect
from analysis.record import Analysis
from inference import catalog
from inference.prediction import Prediction
from model.names import parse_sublayer_name
from ui import cache, errors, progress, sidebar, state
from ui.downloads import table_downloads
from ui.markdown import literal
from ui.says import figure_says
from ui.widgets import data_table, head_from_url, head_to_url
from viz.labels import display_piece, safe_filename
from viz.tables import ranking_frame

PROB = st.column_config.ProgressColumn("probability", min_value=0.0, max_value=1.0, format="%.3f")
MODES = {"zero": "zero (the head's output becomes 0)", "mean": "mean (its output becomes its mean over the positions)"}
# `sublayer name:head` options, 0-based; in the URL 1-based as labelled (decoder.self_attn-L1-H2)
ABLATE_HEADS = state.url_list("ablate_heads", "ablate_heads", head_from_url, write=head_to_url)
ABLATE_MODE = state.url_key("ablate_mode")
RANK_METHOD = state.url_key("rank")  # RANK_METHODS
RANK_METHODS = {"exact": "exact (one pass per head)", "approximate": "approximate (one backward pass)"}
APPROXIMATE_COLUMN = "log p drop (approx.)"


def head_options(analysis: Analysis) -> list[str]:
    """Every head as `sublayer name:head` (the widget's values), in model order."""
    return [f"{name}:{h}" for name, sublayer in analysis.sublayers.items() for h in range(sublayer.n_heads)]


SHORT_ATTENTION = {"encoder.self_attn": "encoder", "decoder.self_attn": "decoder", "decoder.cross_attn": "cross"}


def where_label(option: str) -> str:
    """`option` (`sublayer name:head`) as "layer 3 · head 7", counted from 1."""
    name, head = option.rsplit(":", 1)
    _, layer, _ = parse_sublayer_name(name)
    return f"layer {layer + 1} · head {int(head) + 1}"


def head_label(analysis: Analysis, option: str) -> str:
    """A head as its chip in the list reads: "layer 3 · head 7", its attention type first in a few letters where the
    model has several ("cross · layer 2 · head 1"). Short: a chip is cut at about 220 px at 1024 × 768."""
    if len(analysis.attentions) == 1:
        return where_label(option)
    stack, _, type_ = parse_sublayer_name(option.rsplit(":", 1)[0])
    attention = f"{stack}.{type_}"
    return f"{SHORT_ATTENTION.get(attention, attention)} · {where_label(option)}"


def measured_heads(card: dict) -> list[str]:
    """The heads the card measured switching off shows most (python -m atlas defaults), as `sublayer name:head`
    options: one head, or every head of one layer (`heads`) where no one head alone moves the prediction."""
    found = catalog.card_defaults(card, "ablation") or {}
    head = catalog.default_head(card, "ablation")
    if head is None:
        return []
    listed = found.get("heads")
    if isinstance(listed, list) and listed and all(isinstance(h, int) and not isinstance(h, bool) for h in listed):
        return [f"{head[0]}:{h - 1}" for h in listed]
    return [f"{head[0]}:{head[1]}"]


def measured_note(card: dict, opening: list[str], text: str) -> str:
    """What the card measured about the opening heads: where switching them off shows, or that no one head does."""
    found = catalog.card_defaults(card, "ablation") or {}
    option = opening[0]
    where = where_label(option)
    if len(opening) > 1:
        layer = where.rpartition(" · ")[0]
        return (
            f"Opened with all {len(opening)} heads of {layer} switched off: no one head of this model changes its "
            f"answer when removed alone (it spreads its work over its heads), these together do. On this text the "
            f"first token goes from “{found.get('top_before', '')}” to “{found.get('top_after', '')}”."
        )
    if not found.get("shows"):
        return (
            f"Opened with {where} switched off, the head that moves this model most when removed alone; even so, on "
            f"each of its preset texts the KL stays at most {found.get('kl', 0):.4f} and the top guess stays: the "
            "model spreads its work over several heads. Switch several off to see it fail."
        )
    if text != found.get("text"):
        return f"Opened with {where} switched off: its loss shows on the text it was measured on ({found.get('text')})."
    return (
        f"Opened with {where} switched off: on this text, switching it off alone moves the prediction by KL "
        f"{found.get('kl', 0):.4f} (measured by python -m atlas defaults). Remove it from the list to see the "
        "intact model alone."
    )


def top_table(predictions: Sequence[Prediction]) -> pd.DataFrame:
    return pd.DataFrame(
        {"token": [display_piece(p.piece) for p in predictions], "probability": [p.prob for p in predictions]}
    )


def side_by_side(effect: Effect, switched_off: int, column_config: dict) -> None:
    """The intact model's top tokens beside the ablated model's."""
    left, right = st.columns(2)
    left.caption("Intact model")
    data_table(top_table(effect.before_top), left, hide_index=True, column_config=column_config)
    right.caption(f"{switched_off} head(s) switched off")
    data_table(top_table(effect.after_top), right, hide_index=True, column_config=column_config)


def body() -> None:
    st.title("Head ablation")
    shown = sidebar.chosen()
    if shown is None:
        return
    analysis = shown.analysis
    options = head_options(analysis)
    # A first visit opens with the head measured on the card switched off (python -m atlas defaults: the head whose
    # loss moves the prediction on the text the sidebar opens on), else the head the model's run recorded forming
    # (the induction head, else the previous-token head); none when the card names neither.
    card = shown.ckpt.card
    measured = measured_heads(card)
    recorded = catalog.recorded_head(card)
    opening = measured or ([f"{recorded[0]}:{recorded[1]}"] if recorded else [])
    opening = opening if all(o in options for o in opening) else []
    state.keep_valid(ABLATE_HEADS, options, opening)
    note = ""  # why the page opened on its head: said below the figure, which comes first
    if measured and opening and st.session_state.get(ABLATE_HEADS) == opening:
        note = literal(measured_note(card, opening, shown.text))
    elif opening and st.session_state.get(ABLATE_HEADS) == opening:
        note = (
            f"Opened with the model's {literal(recorded[2])} head switched off "
            f"({literal(where_label(opening[0]))}), the head "
            "its training run recorded forming. Remove it from the list to see the intact model alone."
            + (
                " An induction head copies from an earlier occurrence: its loss shows on a text that repeats itself."
                if recorded[2] == "induction"
                else ""
            )
        )
    figure = st.container()  # the figure first: what the model predicts without the heads; the pickers under it
    cols = st.columns([3, 2])
    labels = {o: head_label(analysis, o) for o in options}  # not a closure over the analysis (ui.widgets)
    picked = cols[0].multiselect("Heads to switch off", options, key=ABLATE_HEADS, format_func=labels.get)
    state.keep_valid(ABLATE_MODE, list(MODES), "zero")
    mode = cols[1].radio("Ablation", list(MODES), key=ABLATE_MODE, format_func=MODES.get)
    heads: dict[str, tuple[int, ...]] = {}
    for option in picked:
        name, head = option.rsplit(":", 1)
        heads[name] = (*heads.get(name, ()), int(head))
    effect = cache.ablation(shown, tuple(sorted(heads.items())), mode)
    with figure:
        outcome(shown, effect, picked)
    if note:
        st.caption(note)
    st.caption(
        "Switch heads off and run the model again: what does it predict without them? The attention pictures stay "
        "what each head computed; only the chosen heads' outputs are cut before they are concatenated and "
        "projected (W^O)."
    )
    ranking(shown, mode)


KL_SAYS = "It measures how much the guesses changed: 0 when they are exactly as before; from about 0.05 it shows."


def outcome(shown: cache.Shown, effect: Effect, picked: list[str]) -> None:
    """The page's figure: how far the prediction moved, then the intact model's guesses (or output) beside the
    ablated one's, and the sentence that says how to read them."""
    analysis = shown.analysis
    st.metric("How far the prediction moved (KL divergence, nats)", f"{effect.kl:.4f}")
    figure_says(KL_SAYS)  # under the number it explains, above the guesses it sums up
    if analysis.blank:
        st.caption("The KL divergence of the model's one guess, the word for the blank.")
        st.markdown("**The guesses for the blank**")
        side_by_side(effect, len(picked), {"probability": PROB})
    elif not analysis.has_decoder:
        st.caption("The KL divergence is the mean over every position of the input.")
        st.markdown(f"**What the output at position 1 ({literal(analysis.prediction_pieces[0])}) scores highest**")
        st.caption(literal(shown.ckpt.card.get("predictions", "")))
        side_by_side(effect, len(picked), {})
    elif not analysis.has_encoder:
        st.markdown("**Next token after the text**")
        side_by_side(effect, len(picked), {"probability": PROB})
    else:
        left, right = st.columns(2)
        left.markdown("**Output, intact**")
        left.code(effect.before_output or "(empty)", language=None, wrap_lines=True)
        right.markdown(f"**Output, {len(picked)} head(s) switched off**")
        right.code(effect.after_output or "(empty)", language=None, wrap_lines=True)
        steps = pd.DataFrame(
            {
                "step": range(1, len(effect.steps) + 1),
                "token": [display_piece(t) for t, _, _ in effect.steps],
                "log p intact": [b for _, b, _ in effect.steps],
                "log p ablated": [a for _, _, a in effect.steps],
            }
        )
        steps["change"] = steps["log p ablated"] - steps["log p intact"]
        data_table(steps, hide_index=True, key="ablate_steps", height=min(35 * (len(steps) + 1) + 3, 220))
        st.caption("Each token of the intact output, and how probable the ablated model finds it in the same place.")


def ranking(shown: cache.Shown, mode: str) -> None:
    """The section "Most important heads": each head switched off alone, ranked, on request."""
    analysis = shown.analysis
    st.header("Most important heads")
    st.caption(
        "Each head switched off alone, ranked by how far the predictions move (KL divergence, at the last position "
        "for a language model, averaged over the output's steps for a translator, over every position for an "
        "encoder). Exact: every head switched off in a row of its own, many rows a pass, a layer at a time with a bar "
        "showing how far it has got. Approximate: "
        "one forward and one backward pass for every head at once (attribution patching): the first-order drop in "
        "the log-probability of the model's top prediction, a guide to which heads to switch off exactly."
    )
    state.keep_valid(RANK_METHOD, list(RANK_METHODS), "exact")
    method = st.radio("Ranking", list(RANK_METHODS), key=RANK_METHOD, format_func=RANK_METHODS.get, horizontal=True)
    asked = (shown.path, shown.text, mode, method)  # the ranking stays on the page for the same model, text and mode
    if st.button("Rank every head", key="ablate_rank"):
        st.session_state["_ablate_ranked"] = asked
    if st.session_state.get("_ablate_ranked") != asked:
        return
    name = safe_filename("ablation-ranking", shown.name, mode, method)
    if method == "approximate":
        frame = ranking_frame(analysis, cache.head_ranking_approximate(shown, mode), APPROXIMATE_COLUMN)
        data_table(frame, hide_index=True, key="ablate_ranking")
        table_downloads(frame, name, "ablate_ranking", "the ranking")
        return
    with progress.running("ablate_rank", "_ablate_ranked", first="Switching off each head in turn…") as show:

        def moved(done: int, sublayers: int, sublayer: str) -> None:
            stack, layer, type_ = parse_sublayer_name(sublayer)
            where = f"{analysis.attention_label(f'{stack}.{type_}')} · layer {layer + 1}"
            show(done / sublayers, f"Switching off each head in turn: {where} ({done + 1} of {sublayers})")

        table = cache.head_ranking(shown, mode, moved)
    frame = ranking_frame(analysis, table)
    data_table(frame, hide_index=True, key="ablate_ranking")
    table_downloads(frame, name, "ablate_ranking", "the ranking")


errors.guarded(body)
