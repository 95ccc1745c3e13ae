"""Training steps: the same sentence's heads at each snapshot saved while the model trained, with that step's loss."""

from __future__ import annotations

import streamlit as st

from analysis.record import Analysis
from inference import catalog
from inference.snapshots import Snapshot, stored_as
from model.names import sublayer_layer
from ui import cache, charts, errors, player, sidebar, state
from ui.cache import Shown, Source
from ui.markdown import literal
from ui.says import figure_says
from ui.widgets import data_table, head_picker, open_on_head, projector, show_chart
from viz.heads import head_heatmap
from viz.labels import safe_filename
from viz.tables import top_k_frame
from viz.training import copying_curve, head_over_steps, loss_curve

CURVE = "Validation loss of the run"
STEP = state.url_key("step", int, across_pages=False)  # the snapshot shown; in the URL, dropped on another page


def _run_curve(source: Source) -> tuple[list[int], list[float]]:
    """The steps and validation losses of every evaluation the card's run recorded."""
    history = source.ckpt.card.get("training", {}).get("history", [])
    return [h["step"] for h in history], [h["valid_loss"] for h in history]


def _step_label(snapshot: Snapshot) -> str:
    return f"step {snapshot.step:,} · loss {snapshot.valid_loss:.3f}"


def _without_snapshots(source: Source) -> None:
    """Say why there is no slider, and offer the shipped models that have snapshots."""
    root = catalog.checkpoints_dir()
    entries = cache.checkpoints(root)
    having = [
        e.name
        for e in entries
        if e.ok and e.name != source.entry.name and cache.snapshots(str(e.path), catalog.stamp(e.path))
    ]
    text = (
        f"{literal(source.entry.name)} has no training snapshots (a `snapshots/` folder beside its weights). "
        "`python -m atlas train` keeps them for every run: the weights at steps 0, 1 %, 3 %, 10 %, 30 % and 100 % "
        "of it, in float16. They ship only where the repository's size allows (`python -m atlas snapshots` ships a "
        "run's in 4 bits)."
    )
    steps, losses = _run_curve(source)
    if steps:  # the run's curve still tells how far training got: the figure first, the way on under it
        curve = loss_curve(steps, losses, [], [], None, CURVE)
        show_chart(curve, "training_loss", safe_filename("loss", source.entry.name))
        figure_says(
            "How wrong the model still was at each step of its training (its validation loss, in nats a token): the "
            "curve falls as it learns. To watch its heads form step by step, open a model that kept snapshots:"
        )
    for name in having:
        st.button(
            f"Show {literal(name)}, which has them",
            key=f"training_switch_{name}",
            on_click=sidebar.switch_model,
            args=(name,),
            type="primary",
        )
    st.info(text)


def _prediction(col, analysis: Analysis, label: str) -> None:
    if analysis.output_text is not None:
        col.markdown(f"**Output at {label}**")
        col.caption("What the model writes at this step. The heads are drawn over the shipped model's output.")
        col.code(analysis.output_text or "(empty)", language=None, wrap_lines=True)
    else:
        col.markdown(f"**Next token after the text, at {label}**")
        data_table(top_k_frame(analysis, len(analysis.target_pieces) - 1), col, hide_index=True, key="training_top")


def _copying(source: Source, step: int) -> None:
    """The run's induction probe at every evaluation, when its history recorded one (decoder-only runs): the loss
    on a repeated run's second copy falling as the best head's induction score rises."""
    history = [h for h in source.ckpt.card.get("training", {}).get("history", []) if "induction" in h]
    if not history:
        return
    st.header("Learning to copy from the context")
    fig = copying_curve(
        [h["step"] for h in history],
        [h["induction"] for h in history],
        [h["copy_loss"][0] for h in history],
        [h["copy_loss"][1] for h in history],
        step,
    )
    show_chart(fig, "training_copying", safe_filename("copying", source.entry.name))
    st.caption(
        "Measured at every evaluation of the run on `<s>` and a run of random tokens, repeated once. Orange: the "
        "best head's induction score (its weight on the token after the current token's earlier occurrence). "
        "Blue: the loss on the first copy (dotted; nothing can predict it) and on the second (solid; a model that "
        "copies predicts it). The dashed line is the step shown above: pick a step before and after the drop and "
        "watch the head's offset diagonal appear (Head statistics names the induction head)."
    )


def _recorded_note(recorded: tuple[str, int, str]) -> None:
    """Name the head the run recorded forming, and the kind of text that shows it."""
    sublayer, head, what = recorded
    where = f"layer {sublayer_layer(sublayer) + 1}, head {head + 1}"
    if what == "induction":
        text = (
            f"The run recorded its induction head forming: {where} (the page opens on it). It shows on a text "
            "that repeats itself — type a sentence twice, and watch the second copy's queries look at the token "
            "after their earlier occurrence appear between two snapshots."
        )
    else:
        text = f"The run recorded its previous-token head forming: {where} (the page opens on it)."
    st.caption(text)


def body() -> None:
    st.title("Training steps")
    st.caption("The same text through the model as it was at a few steps of its training run: watch the heads form.")
    shown = sidebar.chosen()
    if shown is None:
        return
    final = shown.analysis
    saved = cache.snapshots(shown.path, shown.stamp)
    if not saved:
        _without_snapshots(shown)
        return
    recorded = catalog.recorded_head(shown.ckpt.card)
    opening = catalog.default_head(shown.ckpt.card) or (recorded[:2] if recorded else None)
    if opening is not None and opening[0] in final.sublayers and opening[1] < final.n_heads:
        open_on_head(*opening)
    player.player(STEP, snapshot_step, cache.held(shown))
    measured = catalog.card_defaults(shown.ckpt.card, "training")
    if measured and measured.get("text") == shown.text:
        st.caption(
            f"On this text, which repeats itself, the head's weight on the token after each word's earlier "
            f"occurrence averages {measured['first_score']:.2f} at step {measured['first_step']:,} and "
            f"{measured['last_score']:.2f} at step {measured['last_step']:,} (python -m atlas defaults)."
        )
    st.caption(
        f"Each snapshot is the run's weights at that step, stored as {literal(stored_as(shown.path))}. "
        "Its loss is the validation loss of that step's weights."
    )


def _strip(shown: Shown, saved: list[Snapshot], attention: str, layer: int, head: int | str) -> None:
    """The chosen head at every snapshot, earliest first. Every step's decoder reads the same tokens: the shipped
    model's output (its untrained snapshots would write outputs of other lengths, and their heads could not be
    compared)."""
    final = shown.analysis
    analyses = [cache.snapshot_analysis(shown, s.step, final.output_text) for s in saved]
    sublayer = analyses[0].sublayer(attention, layer)
    where = f"{final.attention_label(attention)}, layer {layer + 1}, {charts.head_name(head)}"
    st.header("The same head at every snapshot")
    strip = head_over_steps(
        [charts.head_weights(a.sublayer(attention, layer), head) for a in analyses],
        [_step_label(s) for s in saved],
        sublayer.query_pieces,
        sublayer.key_pieces,
        where,
    )
    show_chart(strip, "training_strip", safe_filename("steps", shown.entry.name, where))


@errors.safe
def snapshot_step(source: Source) -> None:
    """The chosen snapshot's head, loss and prediction, the head and step controls under them, and the head at
    every snapshot: a fragment (ui.player) that reruns alone on a step or head change and while playing, from the
    snapshots' kept analyses. The figure first: on a projector and a phone it opens the first view."""
    shown = cache.redrawn(source)  # the fragment holds its analysis weakly (cache.held)
    saved = cache.snapshots(shown.path, shown.stamp)
    steps = [s.step for s in saved]
    by_step = {s.step: s for s in saved}
    figure = st.container()
    attention, layer, head = head_picker(shown.analysis, with_average=True)
    if (recorded := catalog.recorded_head(shown.ckpt.card)) is not None:
        _recorded_note(recorded)
    state.keep_valid(STEP, steps, steps[len(steps) // 2])
    player.controls(STEP, steps, "snapshot")
    step = st.select_slider(
        "Training step",
        steps,
        key=STEP,
        format_func=lambda s: f"{s:,}",
        help="The steps a snapshot was kept at.",
        on_change=player.slid,
        args=(STEP,),
        disabled=player.playing(STEP),
    )
    target = shown.analysis.output_text  # every step's decoder reads the shipped model's output (see body)
    now = cache.snapshot_analysis(shown, step, target)
    sublayer = now.sublayer(attention, layer)
    weights = charts.head_weights(sublayer, head)
    head_name = charts.head_name(head)
    where = f"{shown.analysis.attention_label(attention)}, layer {layer + 1}, {head_name}"
    label = _step_label(by_step[step])
    # on a projector the head takes the page's width: in a column its large type left it 170 px high, the key
    # labels printed over each other; the loss curve follows under it
    left, right = (figure.container(), figure.container()) if projector() else figure.columns([3, 2])
    fig = head_heatmap(weights, sublayer.query_pieces, sublayer.key_pieces, f"{where} at {label}")
    name = safe_filename("training", shown.entry.name, f"step{step}", attention, f"L{layer + 1}", head_name)
    show_chart(fig, "training_head", name, where=left)
    figure_says(
        literal(
            f"This head at training step {step:,}. Move the slider below and watch its pattern form as the loss falls."
        ),
        left,
    )
    curve = loss_curve(
        *_run_curve(shown),
        steps,
        [s.valid_loss for s in saved],
        step,
        CURVE,
    )
    show_chart(curve, "training_loss", safe_filename("loss", shown.entry.name), where=right)
    own = cache.snapshot_analysis(shown, step) if target is not None else now
    right.caption(
        "The line: the validation loss at every evaluation of the run (nats per token); the dots: the snapshots "
        "(step 0 drawn at 1 on the log axis); the ring: the step shown."
    )
    _prediction(right, own, f"step {step:,}")
    _copying(shown, step)
    _strip(shown, saved, attention, layer, head)
    state.sync_url()  # a rerun of this fragment alone: the address bar follows the step and the head


errors.guarded(body)
