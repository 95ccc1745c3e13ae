"""Lesson steps 13 and 14: the induction heads (Olsson et al. 2022) and the induction circuit end to end."""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from analysis.circuit_told import ONE_HEAD, Told, tell
from analysis.induction import PROBE_BATCH, SENTENCES, second_copy, sentence_scores
from analysis.lesson import (
    INDUCTION_AT,
    Copying,
    formation,
)
from analysis.record import Analysis
from inference import catalog
from model.names import sublayer_layer
from ui import cache, sidebar
from ui.cache import Source
from ui.markdown import literal
from ui.widgets import data_table
from views.lesson_steps.layout import chart
from views.lesson_steps.models import HEAD_STEPS, induction_score, preference
from viz.attribution import attribution_title, heads_heatmap
from viz.heads import head_heatmap
from viz.labels import display_piece
from viz.patching import patching_heatmap, patching_title
from viz.training import copying_curve, head_over_steps

TRAINING_STEP = "step"  # the URL parameter of views/training.py's snapshot slider
CLASS_SENTENCE = SENTENCES[0]  # the step's sentence with a repeat, as a class types one


def layer_of(sublayer: str) -> int:
    """The layer of sub-layer `decoder.layers.1.self_attn` as a person counts it: 2."""
    return sublayer_layer(sublayer) + 1


def head_label(sublayer: str, head: int) -> str:
    """`layer 2, head 1` for sub-layer `decoder.layers.1.self_attn` and head 0."""
    return f"layer {layer_of(sublayer)}, head {head + 1}"


def heads_label(heads: tuple[tuple[str, int], ...]) -> str:
    """`layer 2, heads 1, 2, 4; layer 3, head 1` for (sub-layer name, head) pairs, in the order given; – for none."""
    layers: dict[str, list[str]] = {}
    for sublayer, head in heads:
        layers.setdefault(sublayer, []).append(str(head + 1))
    parts = [f"layer {layer_of(b)}, head{'s' * (len(hs) > 1)} {', '.join(hs)}" for b, hs in layers.items()]
    return "; ".join(parts) or "–"


def copying_models(but: str) -> list[str]:
    """The listed checkpoints other than `but` whose card records an induction head scoring INDUCTION_AT or more,
    the most fitting first (FAMILY_ORDER: a model of real English before the random-word one)."""
    root = catalog.checkpoints_dir()
    entries = cache.checkpoints(root)
    copying = [e for e in entries if e.ok and e.name != but and induction_score(e.card) >= INDUCTION_AT]
    return [e.name for e in sorted(copying, key=lambda e: preference(HEAD_STEPS[0], e))]


def class_sentence(source: Source) -> Source:
    """The step's sentence with a repeat: CLASS_SENTENCE, or, where the model's tokenizer does not read it whole, the
    text its card says the induction head shows on (Explore opens on it)."""
    chosen = source.with_text(CLASS_SENTENCE)
    if cache.analysis(chosen).unknown_pieces:
        text = (catalog.card_defaults(source.ckpt.card, "head") or {}).get("text")
        chosen = source.with_text(text) if isinstance(text, str) else chosen
    return chosen


def on_sentence(analysis: Analysis, sublayer: str, head: int) -> tuple[float, float]:
    """Head `head` of `sublayer` on a sentence: its mean weight on the token after the earlier copy over the second
    copy (analysis.induction.sentence_scores), and its mean weight on `<s>` there."""
    tokens = analysis.target_ids
    weights = analysis.sublayers[sublayer].weights[head]
    rest = [float(weights[q, 0]) for q, _ in second_copy(tokens)]
    return float(sentence_scores(weights, tokens)), (sum(rest) / len(rest) if rest else 0.0)


SWITCHED = {
    "intact": "nothing (the intact model)",
    "induction": "the induction head",
    "previous": "the best previous-token head",
    "every": f"every head scoring {INDUCTION_AT} or more",
}


def induction(source: Source) -> None:
    seen = cache.copying(source.path, source.stamp)
    name, n = source.entry.name, seen.length
    best = head_label(seen.sublayer, seen.head)
    st.markdown(f"**The repeated run**: `<s>`, {n:d} random tokens, then the same {n:d} again")
    run = [display_piece(p) for p in seen.pieces]
    st.code(f"{run[0]}\n{' '.join(run[1 : n + 1])}\n{' '.join(run[n + 1 :])}", language=None, wrap_lines=True)
    st.markdown(f"**The induction head of {literal(name)}: {best}** (induction score {seen.score:.2f} on this run)")
    if seen.score < INDUCTION_AT:
        st.info(
            f"No head of {literal(name)} scores {INDUCTION_AT:g} or more: it has not learned to copy from its "
            "context, and its best head draws no offset diagonal."
        )
        for other in copying_models(name)[:2]:
            st.button(
                f"Switch to {literal(other)}, which has one",
                key=f"lesson_switch_{other}",
                on_click=sidebar.switch_model,
                args=(other,),
                type="primary",
            )
    title = f"Decoder {best}"  # the markdown above says what it reads
    chart(head_heatmap(seen.weights, seen.pieces, seen.pieces, title), "induction_head", name)
    st.caption(
        f"Its score: its weight, from a token of the second copy, on the token after that token's first occurrence, "
        f"{n - 1} places back (averaged over {PROBE_BATCH:d} such runs; Head statistics lists every head's score). "
        f"An induction head draws that as a bright diagonal {n - 1} places left of the main one, from row {n + 2} on."
    )
    _on_a_sentence(source, seen)
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
    data_table(table, hide_index=True, column_config=config, key="lesson_induction_off")
    off = {r.what: r for r in seen.runs}
    without, with_ = off["induction"].loss, intact.loss
    if f"{without:.2f}" == f"{with_:.2f}":  # other heads copy as well without it: said so, not "0.00 instead of 0.00"
        said = (
            f"Without {best} the second copy still costs {without:.3f} nats, as with it ({with_:.3f}): the model's "
            "other heads copy just as well without this one"
        )
    else:
        said = f"Without {best} the second copy costs {without:.2f} nats instead of {with_:.2f}: " + (
            "the model copies worse without it" if without > with_ else "the model copies no worse without it"
        )
    if "every" in off:
        every = off["every"]
        said += f"; without all {len(every.heads)} heads that score {INDUCTION_AT:g} or more, {every.loss:.2f}"
    st.caption(
        f"Switched off, a head's output becomes 0 before W^O. The loss is the mean over the second copies' tokens "
        f"(nats); the first copies, which nothing can predict, cost {seen.first_copy_loss:.2f}: a second copy that "
        f"costs as much is no longer copied. {said}."
    )
    st.page_link("views/ablation.py", label="Any heads, on your own text: the Head ablation page")
    _formation(source, seen)


def _on_a_sentence(source: Source, seen: Copying) -> None:
    """The same head on a sentence a class types, why the app names it, and where the probe's best head rests."""
    chosen = class_sentence(source)
    analysis = cache.analysis(chosen)
    if seen.sublayer not in analysis.sublayers:
        return
    best = head_label(seen.sublayer, seen.head)
    st.markdown("**On a sentence a class types**")
    st.text(f"The sentence: {chosen.text}")  # plain text: never markdown
    here, _ = on_sentence(analysis, seen.sublayer, seen.head)
    pieces = analysis.target_pieces
    chart(
        head_heatmap(analysis.sublayers[seen.sublayer].weights[seen.head], pieces, pieces, f"Decoder {best}"),
        "induction_sentence",
        source.entry.name,
    )
    named = seen.named or {}
    said = (
        f"Over the second copy, {best} puts {here:.2f} of its weight on the word after the earlier copy. The app "
        "calls it the induction head (here, on Explore, in Head ablation and in a class's question) because it "
        "copies most on ordinary sentences with a repeat, not only on random tokens"
    )
    if isinstance(named.get("score"), float):
        said += f": {named['score']:.2f} on the sentences it was chosen on"
    st.caption(said + ".")
    probe = named.get("probe")
    if not isinstance(probe, dict):
        return
    sublayer = probe.get(catalog.SUBLAYER_KEY)
    if (sublayer, probe.get("head")) == (seen.sublayer, seen.head + 1):
        return
    other = head_label(sublayer, probe["head"] - 1)
    if sublayer not in analysis.sublayers:
        return
    copies, rests = on_sentence(analysis, sublayer, probe["head"] - 1)
    st.caption(
        f"On repeated random tokens the best head is {other} (score {probe['score']:.2f}); on this sentence it "
        f"puts {copies:.2f} of its weight on the copied word and {rests:.2f} on <s>. That is the attention sink: "
        "a head's weights must add up to 1, so where it finds nothing to do it rests them on the first token, "
        "which writes almost nothing."
    )


def _formation(source: Source, seen: Copying) -> None:
    """The run that trained the model: the probe at every evaluation, and the best head at a few snapshots."""
    name = source.entry.name
    st.markdown("**How it formed in training**")
    saved = cache.snapshots(source.path, source.stamp)
    training = source.ckpt.card.get("training")
    formed = formation(training.get("history") if isinstance(training, dict) else None, [s.step for s in saved])
    if formed is None:
        st.info(
            f"The card of {literal(name)} records no induction probe at the evaluations of the run that trained it "
            "(`python -m atlas train` records one for a decoder-only model)."
        )
        if saved:
            st.page_link("views/training.py", label=f"{literal(name)}'s training snapshots: the Training steps page")
        return
    fig = copying_curve(formed.steps, formed.induction, formed.first_copy_loss, formed.second_copy_loss, formed.formed)
    chart(fig, "induction_curve", name)
    if formed.formed is None:
        when = f"No head reached {INDUCTION_AT:g} in this run: no induction head formed."
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
            w, score = cache.snapshot_head(source.path, source.stamp, step, seen.length, seen.sublayer, seen.head)
            weights.append(w)
            labels.append(f"step {step:,} · score {score:.2f}")
        title = f"{head_label(seen.sublayer, seen.head).capitalize()} in training"
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


def induction_circuit(source: Source) -> None:
    """The previous-token head, the K-composition into the induction head, patching, and what the heads write."""
    seen = cache.circuit(source.path, source.stamp)
    if seen is None:
        st.info("The circuit is traced in a decoder-only language model: choose one in the sidebar.")
        return
    name = source.entry.name
    (prev_sublayer, prev_head, prev_score), ind_score = seen.previous, seen.induction[2]
    if ind_score < INDUCTION_AT:
        st.info(
            f"No head of {literal(name)} scores {INDUCTION_AT:g} or more as an induction head: the figures below "
            "trace a circuit it has not grown, and show little."
        )
        for other in copying_models(name)[:2]:
            switch = {"on_click": sidebar.switch_model, "args": (other,), "type": "primary"}
            st.button(f"Switch to {literal(other)}, which has one", key=f"lesson_switch_{other}", **switch)
    clean, corrupted = [display_piece(p) for p in seen.clean_pieces], [display_piece(p) for p in seen.corrupted_pieces]
    n = seen.length
    copied = display_piece(source.ckpt.tokenizer.pieces([seen.patching.answer])[0])
    st.markdown(
        f"**The run**: `<s>`, {n:d} tokens, then the same again up to “{literal(copied)}”, which the model should copy"
    )
    st.code(f"{' '.join(clean[1 : n + 1])}\n{' '.join(clean[n + 1 :])} …", language=None, wrap_lines=True)
    st.caption(
        f"{literal(name)} gives “{literal(copied)}” probability {seen.probability:.3f} there, after the run's last "
        "token."
    )
    prev = head_label(prev_sublayer, prev_head)
    st.markdown(f"**1. The previous-token head: {prev}** (previous-token score {prev_score:.2f} on the probe)")
    previous_view = head_heatmap(seen.previous_weights, seen.clean_pieces, seen.clean_pieces, f"Decoder {prev}")
    chart(previous_view, "circuit_previous", name)
    told = tell(seen)
    st.caption(literal(told.previous))
    st.markdown(f"**2. {literal(told.keys_heading)}** (induction score {ind_score:.2f})")
    if seen.sources:
        rows = [
            (rank + 1, f"layer {layer + 1}, head {head + 1}", score)
            for rank, (layer, head, score) in enumerate(seen.sources)
        ]
        shown = rows[:5] + [r for r in rows[5:] if r[0] == seen.previous_rank]  # the previous-token head's row always
        table = pd.DataFrame(shown, columns=["rank", "earlier head", "K-composition"])
        data_table(table, hide_index=True, key="circuit_sources")
        st.caption(
            "From the weights (Head statistics draws every pair): ‖W_OV(earlier) · W_QK(induction)ᵀ‖ over their "
            f"norms. {literal(told.keys)}"
        )
    else:
        st.caption(literal(told.keys))
    st.markdown("**3. Patching**: the second half changed, then each head taken from the run above")
    st.code(f"{' '.join(corrupted[n + 1 :])} …", language=None, wrap_lines=True)
    versus = display_piece(source.ckpt.tokenizer.pieces([seen.patching.versus])[0])
    labels = [str(i + 1) for i in range(len(seen.clean_pieces))]
    title = patching_title("heads", copied, versus, False)
    chart(patching_heatmap(seen.patching.scores, "heads", labels, title), "circuit_patching", name)
    if told.shares:
        shares = pd.DataFrame(told.shares, columns=["induction head", "induction score", "restores alone"])
        two = {c: st.column_config.NumberColumn(c, format="%.2f") for c in ("induction score", "restores alone")}
        data_table(shares, hide_index=True, column_config=two, key="circuit_shares")
    st.caption(
        f"1: the changed run answers “{literal(copied)}” again, as strongly as the original; 0: no change. "
        f"{literal(told.patching)}"
    )
    st.markdown(f"**4. What the heads write toward “{literal(copied)}”**")
    parts = seen.attribution
    heads = parts.heads["decoder.self_attn"]
    labels_ = {"decoder.self_attn": "Self-attention (masked)"}
    title = attribution_title(copied, f"{len(clean)}:{clean[-1]}", None)
    chart(heads_heatmap({"decoder.self_attn": heads}, labels_, title), "circuit_attribution", name)
    st.caption(
        f"Each head's direct contribution to the logit of “{literal(copied)}” ({parts.logit:.2f} in all; the Logit "
        f"attribution page shows every part). {literal(told.writes)}"
    )
    st.markdown(f"**What to take away**: {literal(takeaway(told, prev))}")


def takeaway(told: Told, prev: str) -> str:
    """The step's last sentence, in plain words, from what the figures found: whether the keys read the
    previous-token head (`told.textbook_keys`) and whether the copying is shared out (`told.spread`)."""
    keys = (
        f"the induction head finds the word to copy through {prev}, as the textbook says"
        if told.textbook_keys
        else "the induction head does not get its clue mostly from one previous-token head: several earlier heads "
        "feed it"
    )
    if told.spread:
        share = "several heads share the copying, so no one of them carries it alone"
    elif told.shares and told.shares[0][2] >= ONE_HEAD:
        share = f"one head, {told.shares[0][0]}, carries most of the copying"
    else:
        share = "no induction head carries the copying alone (part 3 says which head does, if any)"
    return (
        f"This model copies a repeated word, and in this model {keys}; {share}. The idea holds, a head that looks "
        "back to copy what came next last time, but a trained model builds it its own way: measure it, never assume "
        "the textbook picture."
    )
