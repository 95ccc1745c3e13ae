"""Experiment: seed 003's table of 5-gram models run here, beside the report's own figures; heads pruned."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from inference import catalog, experiment
from model.names import sublayer_layer
from ui import cache, errors, sidebar, state
from ui.markdown import literal
from ui.says import figure_says
from ui.widgets import show_chart, small_table
from viz.experiment import accuracy_chart, pruning_chart, remaining_heads, time_chart

OPEN_MODEL = state.url_key("experiment_model")  # the model of the table to open on Explore
PRUNED_MODEL = state.url_key("pruned_model")
REMOVED = state.url_key("heads_removed", int)
OPENING = "_experiment_opening"  # set by the button's callback: the next run goes to Explore

INTRO = (
    "Seed 003 is a student report (“Assignment 2. Language models”, 2020): a Transformer guesses the centre word "
    "of a 5-gram from the two words on each side of it. The four context words and four learned positions go "
    "through encoder layers without a mask; the four outputs are summed and scored against every word. Its Table 1 "
    "compares single-head self-attention with 1, 2 shared and 3 layers, multi-head attention with 1–3 layers × 8 "
    "or 16 heads, and shared input/output embeddings, and concludes that more heads bought “little to no” "
    "accuracy. Here the same models are trained by one command, `python -m atlas experiment`, on our own English "
    "prose: every row the same steps, seed and settings."
)
LEAD = (
    "A student report's question, rerun on our own models: do more heads or more layers guess a 5-gram's centre "
    "word better? Its models beside ours, each panel on its own axis."
)
DIFFERENCES = (
    "Not the report's scale: d_model 64 (its 256), a feed-forward layer of 256 (its 512), a vocabulary of the "
    "2,000 most frequent words (5-grams whose centre word is another are left out), 3,500 steps of 512 5-grams on "
    "one CPU thread, no dropout (less than one pass over the data), and weights shipped in 4 bits (accuracy measured "
    "on them). Its data and vocabulary are not ours, so compare the shape of the two tables, not their numbers."
)


@errors.safe  # a callback: runs outside the page's guard
def _open(name: str) -> None:
    sidebar.switch_model(name)
    st.session_state[OPENING] = True


def our_table(rows: list[dict]) -> pd.DataFrame:
    def seed(value: float | None, digits: int) -> str:
        return "—" if value is None else f"{value:.{digits}f}"

    return pd.DataFrame(
        {
            "model": [r["name"] for r in rows],
            "layers × heads": [_shape(r) for r in rows],
            "parameters": [f"{r['parameters']:,}" for r in rows],
            "training (s)": [f"{r['seconds']:.0f}" for r in rows],
            "accuracy": [f"{r['accuracy']:.4f}" for r in rows],
            "loss": [f"{r['loss']:.3f}" for r in rows],
            "seed 003 accuracy": [seed(r["seed_accuracy"], 4) for r in rows],
            "seed 003 loss": [seed(r["seed_loss"], 2) for r in rows],
        }
    )


def _shape(row: dict) -> str:
    """ "3 × 8", with what the row shares: "2 (shared) × 1", "3 × 8, embeddings shared"."""
    layers = f"{row['layers']} (shared)" if row["shared_layers"] else str(row["layers"])
    return f"{layers} × {row['heads']}" + (", embeddings shared" if row["shared_embeddings"] else "")


def seed_frame() -> pd.DataFrame:
    rows = experiment.seed_table()
    return pd.DataFrame(
        {
            "architecture": [r["architecture"] for r in rows],
            "dim": [r["dim"] for r in rows],
            "layers": [f"{r['layers']}{' (shared)' if r['shared_layers'] else ''}" for r in rows],
            "heads": ["—" if r["heads"] == 1 else r["heads"] for r in rows],
            "parameters": [f"{r['parameters']:,}" for r in rows],
            "time": [r["time"] for r in rows],
            "accuracy": [f"{r['accuracy']:.5f}" for r in rows],
            "loss": [f"{r['loss']:.2f}" for r in rows],
            "here": [
                r["note"] or ("shared input/output embeddings" if r["shared_embeddings"] else "run") for r in rows
            ],
        }
    )


def pruning_section(cards: dict[str, dict]) -> None:
    records = {name: found for name in experiment.PRUNED if (found := experiment.pruning(cards.get(name, {})))}
    if not records:
        st.info("No pruned model is in the checkpoints folder: `python -m atlas experiment` trains them.")
        return
    st.header("Heads pruned")
    st.caption(
        "Voita et al. (2019), “Specialized heads do the heavy lifting, the rest can be pruned”. Each head of the "
        "model is switched off alone and ranked by how much the guess changes (the KL divergence the Head ablation "
        "page computes, averaged over 8,192 held-out validation 5-grams); then heads are removed together, least "
        "important first, and the accuracy on the test 5-grams measured after each removal. The first point is "
        "the model's own accuracy."
    )
    names = list(records)
    state.keep_valid(PRUNED_MODEL, names, names[-1])
    chosen = st.selectbox("Pruned model", names, key=PRUNED_MODEL)
    record = records[chosen]
    order, curve = record["order"], record["curve"]
    state.keep_valid(REMOVED, state.Between(0, len(order)), 0)
    removed = st.slider("Heads removed", 0, len(order), key=REMOVED)
    curves = {name: r["curve"] for name, r in records.items()}
    show_chart(pruning_chart(curves, chosen, removed), "pruning_chart", f"pruning-{chosen}")
    point = curve[removed]
    keep = len(order) - removed
    st.markdown(
        f"**{literal(chosen)}, {removed} of {len(order)} heads removed:** accuracy {point['accuracy']:.4f} "
        f"(all heads: {curve[0]['accuracy']:.4f}; no head at all: {curve[-1]['accuracy']:.4f}). "
        f"The {keep} head{'s' if keep != 1 else ''} left, by importance: "
        + (literal(", ".join(_head_name(sublayer, head) for sublayer, head, _ in reversed(order[removed:]))) or "none")
        + "."
    )
    st.markdown(pruning_finding(chosen, curve))
    attention = np.asarray(cards[chosen]["experiment"]["mean_attention"], dtype=np.float32)
    gone = [(sublayer_layer(sublayer), int(head)) for sublayer, head, _ in order[:removed]]
    fig = remaining_heads(attention, gone, "What each head attends to, averaged over the test 5-grams (grey: removed)")
    show_chart(fig, "remaining_heads", f"remaining-heads-{chosen}")
    st.caption(
        "Each tile is one head: rows are the four context words as queries (1–2 before the blank, 3–4 after it), "
        "columns the words they attend to. A head whose tile is one bright column reads one position for every word."
    )


def pruning_finding(name: str, curve: list[dict]) -> str:
    """How many heads the model needs, read off its curve: the fewest kept that still give 95 % of its accuracy."""
    total, kept = len(curve) - 1, experiment.heads_needed(curve)
    return (
        f"{name} keeps 95 % of its accuracy with its {kept} most important head{'s' * (kept != 1)} of {total}; "
        f"without any head it falls to {curve[-1]['accuracy']:.4f}, what the feed-forward layers and the summed "
        "embeddings guess alone."
    )


def _head_name(sublayer: str, head: int) -> str:
    return f"L{sublayer_layer(sublayer) + 1} H{int(head) + 1}"


def findings(rows: list[dict]) -> str:
    """What our table shows, in the report's terms, from its numbers."""
    by = {(r["layers"], r["heads"], r["shared_layers"], r["shared_embeddings"]): r["accuracy"] for r in rows}
    parts = []
    for layers in (1, 2, 3):
        found = [(h, by[(layers, h, False, False)]) for h in (1, 8, 16) if (layers, h, False, False) in by]
        if len(found) > 1:
            heads = ", ".join(f"{h} head{'s' * (h > 1)} {a:.4f}" for h, a in found)
            parts.append(f"{layers} layer{'s' * (layers > 1)}: {heads}")
    best = max(rows, key=lambda r: r["accuracy"])
    text = "Accuracy by heads at each depth — " + "; ".join(parts) + ". " if parts else ""
    return text + (
        f"Best here: {best['name']} ({best['accuracy']:.4f}). The report's best was 3 layers × 8 heads "
        f"({experiment.SEED_BEST:.4f}), and its spread over every multi-head row was under 0.008."
    )


def body() -> None:
    st.title("More heads or more layers? A student's experiment, rerun")
    if st.session_state.pop(OPENING, False):
        st.switch_page("views/explore.py")
    root = catalog.checkpoints_dir()
    entries = cache.checkpoints(root)
    cards = {e.name: e.card for e in entries if e.ok and experiment.is_experiment_model(e.card)}
    rows = experiment.table(cards)
    if not rows:
        st.caption(LEAD)
        st.markdown(INTRO)
        st.info(
            f"No model of the table is in “{literal(root.name)}”: prepare the data with `python -m "
            "training.data prepare fivegram` "
            "and train them with `python -m atlas experiment`."
        )
        return
    # The figure first (a projector shows it in the first view); what the report is and what differs here, below.
    shown = [r for r in experiment.seed_table() if not r["note"]]  # the report's rows at its width that ran here
    show_chart(accuracy_chart(rows, shown), "accuracy_chart", "experiment-accuracy")
    figure_says(LEAD)
    st.markdown(findings(rows))
    st.header("The report and this rerun")
    st.markdown(INTRO)
    st.caption(DIFFERENCES)
    st.header("Our table and the report's")
    st.caption(
        "Accuracy and loss (nats) of the centre word on the held-out test 5-grams (documents no model saw in "
        "training), on the 4-bit weights as shipped; training time on one thread of this machine's CPU. The "
        "report's columns are its own figures for the same architecture."
    )
    small_table(our_table(rows), row_header="model")
    show_chart(time_chart(rows), "time_chart", "experiment-time")
    with st.expander("The report's Table 1, as printed"):
        small_table(seed_frame())
        st.caption("Its time column has no unit in the report. Parameters count its 100k-word embeddings.")
    names = [r["name"] for r in rows]
    state.keep_valid(OPEN_MODEL, names, names[-1])
    left, right = st.columns([3, 2], vertical_alignment="bottom")
    name = left.selectbox("A model of the table", names, key=OPEN_MODEL)
    right.button("Open it on Explore", key="experiment_open", on_click=_open, args=(name,), type="primary")
    pruning_section(cards)


errors.guarded(body)
