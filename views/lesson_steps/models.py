"""Which model a Lesson step is drawn on: the loaded one when it has what the step shows, else the most fitting
shipped model, loaded for that step and named."""

from __future__ import annotations

import streamlit as st

from analysis.lesson import (
    INDUCTION_AT,
)
from course.lesson import NEEDS, Step
from inference import catalog
from inference.checkpoint import CheckpointError, load_config
from ui import cache, sidebar
from ui.cache import Source
from ui.markdown import literal

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
    for entry in cache.checkpoints(root):
        try:
            if entry.ok and step.fits(load_config(entry.path)[0]):
                fitting.append(entry)
        except CheckpointError:
            continue
    return [e.name for e in sorted(fitting, key=lambda e: preference(step.slug, e))]


def borrowed(step: Step, source: Source) -> Source | None:
    """The step's own model, loaded for this step only (the app's model stays the sidebar's), with the same text;
    None when no readable checkpoint can show it."""
    root = catalog.checkpoints_dir()
    entries = {e.name: e for e in cache.checkpoints(root)}
    for name in fitting_models(step):
        stamp = catalog.stamp(entries[name].path)
        try:
            ckpt = cache.load_model(str(entries[name].path), stamp)
            return Source.checkpoint(entries[name], ckpt, stamp, source.text)
        except CheckpointError:
            continue
    return None


def model_check(step: Step, source: Source) -> Source | None:
    """The source the step is shown on: the loaded model where it fits, else a model that does, loaded for this
    step with a line saying so (and a button to switch the whole app to it); None when no model can show it."""
    if step.fits(source.ckpt.config):
        st.caption(f"Needs {literal(NEEDS[step.needs])}: {literal(source.entry.name)} is one.")
        return source
    kind = f"{source.entry.kind}, {source.ckpt.config.positional} positions"
    other = borrowed(step, source)
    if other is None:
        st.info(
            f"This step needs {literal(NEEDS[step.needs])}; the loaded model, {literal(source.entry.name)}, is not "
            f"({literal(kind)})."
        )
        st.warning(
            f"No checkpoint in “{literal(catalog.checkpoints_dir().name)}” is {literal(NEEDS[step.needs])}: add one "
            "to see this step live."
        )
        return None
    st.info(
        f"This step needs {literal(NEEDS[step.needs])}; the loaded model, {literal(source.entry.name)}, is not "
        f"({literal(kind)}). Shown here on "
        f"{literal(other.entry.name)}, loaded for this step: the other pages keep {literal(source.entry.name)}."
    )
    st.button(
        f"Switch the app to {literal(other.entry.name)}",
        key=f"lesson_switch_{other.entry.name}",
        on_click=sidebar.switch_model,
        args=(other.entry.name,),
    )
    return other
