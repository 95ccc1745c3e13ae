"""Predict, then reveal, for a student working alone: a Lesson step that has a question (analysis.class_questions,
the same a class is asked) asks it before its figure, which stays hidden until the student answers or skips; the
Lesson's last step counts how many they got right. No class needed: the answers live in this session's state.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from analysis import class_questions
from analysis.class_questions import Asked, QuestionError
from analysis.record import Analysis
from ui import errors
from ui.markdown import literal

ANSWERS = "lesson_answers"  # session state: step slug → {"prompt", "picked" (None: skipped), "right"}


def multi_head(analysis: Analysis) -> Asked:
    """Where will a head attend most, from the sentence's last token: the first head, layer by layer, whose answer
    stands out (every head is drawn below it)."""
    attention = analysis.attentions[0]
    sublayer = analysis.sublayer(attention, analysis.layers(attention)[0])
    query = len(sublayer.query_pieces) - 1
    why = "no head's answer stands out on this sentence"
    for layer in analysis.layers(attention):
        for head in range(analysis.n_heads):
            try:
                return class_questions.attend(analysis, attention, layer, head, query)
            except QuestionError as exc:
                why = str(exc)
    raise QuestionError(why)


def next_word(analysis: Analysis) -> Asked:
    """What will the model write next: at the last place of the sentence where the model is sure enough."""
    why = "this model does not predict the next token of its text"
    for position in reversed(range(len(analysis.predictions))):
        try:
            return class_questions.next_token(analysis, position)
        except QuestionError as exc:
            why = str(exc) if position == len(analysis.predictions) - 1 else why
    raise QuestionError(why)


def induction_head(analysis: Analysis, card: dict) -> Asked:
    """Which head is the induction head, on the step's sentence with a repeat."""
    return class_questions.induction_head(analysis, named=class_questions.named_head(card))


def answers() -> dict[str, dict]:
    return st.session_state.setdefault(ANSWERS, {})


@errors.safe  # a callback: runs outside the page's guard
def _answer(slug: str, asked: Asked, skip: bool) -> None:
    picked = None if skip else _picked(slug, asked)
    if picked is None and not skip:
        st.session_state[f"lesson_quiz_note_{slug}"] = "Pick one of the choices first, or show the figure without."
        return
    answers()[slug] = {"prompt": asked.prompt, "picked": picked, "right": picked == asked.model_answer}


def _picked(slug: str, asked: Asked) -> int | None:
    if asked.is_grid:
        layer, head = (
            st.session_state.get(f"lesson_quiz_layer_{slug}"),
            st.session_state.get(f"lesson_quiz_head_{slug}"),
        )
        return None if layer is None or head is None else asked.choice_at(layer, head)
    return st.session_state.get(f"lesson_quiz_pick_{slug}")


@errors.safe  # a callback: runs outside the page's guard
def _again(slug: str) -> None:
    answers().pop(slug, None)


def gate(slug: str, make: Callable[[], Asked]) -> bool:
    """Ask step `slug`'s question (`make` builds it) and say whether its figure may be drawn: once the student has
    answered or skipped it, or where no question can be asked here (said in one line)."""
    try:
        asked = make()
    except QuestionError as exc:
        st.caption(literal(f"No question on this step here: {exc}."))
        return True
    done = answers().get(slug)
    if done is not None and done["prompt"] == asked.prompt:
        _reveal(slug, asked, done["picked"])
        return True
    with st.container(border=True, key=f"lesson_quiz_{slug}"):
        st.markdown(f"**Predict first:** {literal(asked.prompt)}")
        if asked.is_grid:
            left, right = st.columns(2)
            layers, heads = list(range(asked.n_layers)), list(range(asked.n_heads))
            left.selectbox(
                "Layer", layers, index=None, key=f"lesson_quiz_layer_{slug}", format_func=lambda i: str(i + 1)
            )
            right.selectbox("Head", heads, index=None, key=f"lesson_quiz_head_{slug}", format_func=lambda i: str(i + 1))
        else:
            st.radio(
                "Your answer",
                list(range(len(asked.choices))),
                index=None,
                key=f"lesson_quiz_pick_{slug}",
                format_func=lambda i: literal(asked.choices[i]),
                horizontal=True,
            )
        if asked.note and not asked.is_grid:
            st.caption(literal(asked.note))
        if note := st.session_state.pop(f"lesson_quiz_note_{slug}", None):
            st.warning(literal(note))
        cols = st.columns(2)
        cols[0].button(
            "Answer", key=f"lesson_quiz_answer_{slug}", on_click=_answer, args=(slug, asked, False), type="primary"
        )
        cols[1].button(
            "Show without answering", key=f"lesson_quiz_skip_{slug}", on_click=_answer, args=(slug, asked, True)
        )
    st.caption("The figure shows once you answer.")
    return False


def _reveal(slug: str, asked: Asked, picked: int | None) -> None:
    model = asked.choices[asked.model_answer]
    if picked is None:
        said, show = f"You did not answer. The model: {model}.", st.info
    elif picked == asked.model_answer:
        said, show = f"Right: you picked {model}, as the model does.", st.success
    else:
        said, show = f"Not this time: you picked {asked.choices[picked]}, the model {model}.", st.info
    show(literal(f"{asked.prompt} {said}"))
    if asked.is_grid and asked.note:
        st.caption(literal(asked.note))
    st.button("Ask me again", key=f"lesson_quiz_again_{slug}", on_click=_again, args=(slug,))


def tally() -> tuple[int, int, int]:
    """(right, answered, skipped) over the steps asked in this session."""
    done = answers().values()
    answered = [d for d in done if d["picked"] is not None]
    return sum(d["right"] for d in answered), len(answered), len(done) - len(answered)


def score() -> None:
    """The Lesson's end: how many of its questions the student got right."""
    right, answered, skipped = tally()
    if not answered and not skipped:
        st.caption("No question answered yet: the steps that have one ask it before their figure.")
        return
    said = f"Your predictions: {right} of {answered} right"
    extra = f" ({skipped} shown without answering)" if skipped else ""
    st.markdown(f"**{literal(said)}**{literal(extra)}")
