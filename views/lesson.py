"""Lesson: the ideas of the Transformer in order, each a short paragraph and a live view of the loaded model.

The step is kept in session state as its slug (`LESSON`, declared in the URL: ui.state), so a teacher can link to
one step (`?lesson=no-peek-mask`). This page lays out the step and its navigation; each step's live view is
views/lesson_steps/'s (a module per part of the course), the model it is drawn on views/lesson_steps/models.py's.
The steps and their paragraphs are course.lesson's (course/steps/*.md), the model work analysis.lesson's.
"""

from __future__ import annotations

import streamlit as st

from course.lesson import SENTENCES, SINUSOIDAL, SLUGS, STEPS, Step, step_index
from inference import catalog
from ui import cache, errors, sidebar, state
from ui.cache import Source
from ui.markdown import literal
from ui.says import figure_says
from ui.widgets import DeltaGenerator, folded_controls, following, projector
from views.lesson_steps import quiz
from views.lesson_steps.cost import quadratic
from views.lesson_steps.induction import class_sentence, induction, induction_circuit
from views.lesson_steps.layout import LOOK, first_chart_in
from views.lesson_steps.models import model_check
from views.lesson_steps.paper import (
    cross,
    embeddings,
    feed_forward,
    kv_cache,
    multi_head,
    next_token,
    no_peek,
    padding,
    positional,
    residual,
    scaled_dot,
)

LESSON = state.url_key("lesson")  # the step shown, as its slug
SOURCE = state.url_key("lesson_source", url="sentence")  # "lesson": the lesson's sentence, "yours": the sidebar's


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
                f"There is no lesson step “{literal(shown)}”: the lesson starts at step 1. The steps: "
                f"{literal(', '.join(SLUGS))}."
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

# the steps that ask the student a question before their figure (views/lesson_steps/quiz.py), on the step's sentence
QUESTIONS = {"multi-head": quiz.multi_head, "next-token": quiz.next_word}


PREDICT = state.session_key("lesson_predict")  # ask each step's question before its figure


def predicting() -> bool:
    """Whether the steps ask their question before their figure: on for a student working alone, off on the
    projector and for a class's follower (there the class is asked: ui/class_live.py); the toggle under the step's
    heading changes it."""
    if following():
        return False
    if PREDICT not in st.session_state:
        st.session_state[PREDICT] = not projector()
    return st.toggle(
        "Predict before each figure",
        key=PREDICT,
        help="A step with a question asks it first and shows its figure once you answer; the last step counts them.",
    )


def sentence(source: Source, where: DeltaGenerator | None = None) -> Source:
    """The source with the lesson's sentence for this model, or the student's own text from the sidebar; its radio
    in `where` (a follower's folded controls; default: the page)."""
    family = catalog.preset_family(source.entry.name, source.entry.kind, source.entry.card)
    ours = SENTENCES[family]
    options = {"lesson": "the lesson's", "yours": "yours (the sidebar's text)"}  # fixed labels: one widget
    state.keep_valid(SOURCE, list(options), "lesson")
    whose = (where if where is not None else st).radio(
        "Sentence", list(options), key=SOURCE, format_func=options.get, horizontal=True
    )
    text = ours if whose == "lesson" else source.text
    st.text(f"The sentence: {text[:300]}{'…' if len(text) > 300 else ''}")  # plain text: never markdown
    return source.with_text(text)


@errors.safe
def show(step: Step, source: Source, fold: DeltaGenerator | None = None) -> None:
    """The step's live view, after checking the model can show it; `fold`: where its sentence's radio goes
    (default: the page)."""
    fitting = model_check(step, source)
    if fitting is None:
        if step.needs != SINUSOIDAL:  # the positions step still draws the loaded model's own table
            return
        fitting = source
    source = fitting
    if step.slug == "induction-heads" and predicting():
        if not quiz.gate(
            step.slug, lambda: quiz.induction_head(cache.analysis(class_sentence(source)), source.ckpt.card)
        ):
            return
    if step.slug in WITHOUT_SENTENCE:
        WITHOUT_SENTENCE[step.slug](source)
        return
    chosen = sidebar.chosen(source=sentence(source, fold))
    if chosen is None:
        return
    if (
        step.slug in QUESTIONS
        and predicting()
        and not quiz.gate(step.slug, lambda: QUESTIONS[step.slug](chosen.analysis))
    ):
        return
    VIEWS[step.slug](chosen, chosen.analysis)


def body() -> None:
    st.title("Lesson")
    index = current()
    step = STEPS[index]
    if not projector():  # a projector's first view keeps its height for the figure: the step list says where it is
        with st.container(key="lesson_progress"):  # folded away on a phone (ui.widgets.LAYOUT_CSS)
            st.progress((index + 1) / len(STEPS), text=f"Step {index + 1} of {len(STEPS)}: {step.title}")
    st.header(f"{index + 1}. {step.title}", anchor=False)
    # The step opens on its picture: its first chart goes in `figure`, above the steps' list, the paragraph and the
    # step's own captions and pickers, with the sentence that says what to look at under it, so that a projector
    # at 1024 × 768 and a phone show both in the first view. A class's follower follows the teacher's step and
    # sentence: their pickers fold away (ui.widgets.folded_controls).
    figure = st.container(key="lesson_figure")
    says = st.container()
    fold = folded_controls("Controls: step, sentence")
    with fold:
        navigation(index, "top")
    st.markdown(step.text)
    source = sidebar.context()
    if source is not None:
        with first_chart_in(figure) as drawn:
            show(step, source, fold if following() else None)
            if drawn() and step.slug in LOOK:
                figure_says(LOOK[step.slug], says)
    if index == len(STEPS) - 1:
        quiz.score()
    navigation(index, "bottom")


errors.guarded(body)
