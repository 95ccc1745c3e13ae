"""A live class on the page (ui/class_session.py is a session's part in it, live/ its rules, store and push): the
sidebar's "Start a class" and the home page's "Join a class", the teacher's link, QR code, questions and reveal,
and a student's banner, question and answer.

app.py calls `panel` above the page. While a question is open every page of the class holds its figures back
(`_hold_back`): the class predicts before it sees. The room, its followers and this browser's device are read
through ui.class_session (`class_session.ROOM`, …), so that one a test puts there is the one drawn here.
"""

from __future__ import annotations

import base64
import functools
import html

import pandas as pd
import streamlit as st

from live import address
from live import rules as classroom
from live.store import RecordError, StoreError
from ui import class_pushed, class_session, downloads, errors, state, streamlit_private, widgets
from ui.class_session import (
    ALIVE_SEEN,
    APPLIED,
    ASK_PANEL,
    ASKED,
    CLASS,
    DETACHED,
    END_SURE,
    JOIN,
    JOIN_REFUSED,
    LINK_PANEL,
    NOTE,
    OFF_VIEW,
    OPEN_QUESTION,
    PAGE,
    PASSWORD,
    PUBLISHED,
    SEEN,
    TAUGHT,
    TEACH,
    TEACHER_SEEN,
    answer,
    ask,
    class_code,
    detach,
    device_joins,
    end_class,
    follow_again,
    join,
    lock_class,
    not_told,
    off_view,
    reveal,
    start_class,
    student_id,
    teachers_class,
    told,
    view_of,
)
from ui.markdown import literal
from viz import qr
from viz.classroom import answers_figure, head_grid_figure

PEEK = "class_peek"  # the teacher's toggle: the figures shown to the teacher alone while a question is open
REVEALED_AT = "_class_revealed_at"  # session key: (class, question, the view its reveal was first drawn at)
KIND_LABELS = {
    "attend": "Where will the query attend most?",
    "head": "Which head is the induction head?",
    "next": "What will the model predict next?",
}
# The link wraps anywhere (a URL has no spaces), and the code alone is read from the back of the room.
LINK_CSS = (
    "<style>.st-key-class_link pre,.st-key-class_link code{white-space:pre-wrap!important;overflow-wrap:anywhere;"
    "word-break:break-all}.st-key-class_link code{font-size:1.6rem;line-height:1.3}"
    ".class-code{font-size:5.5rem;font-weight:700;letter-spacing:0.12em;line-height:1.1;"
    "margin:0;font-family:monospace}</style>"
)
# A follower's banner on a phone: one compact line, its button beside the words.
BANNER_CSS = "<style>.st-key-class_banner p{margin:0}.st-key-class_banner button{min-height:2rem}</style>"


def sidebar_start() -> None:
    """The sidebar's "Start a class", while this page is in none."""
    if class_code() is None:
        if class_session.ROOM.needs_password:
            st.sidebar.text_input("Teacher password", type="password", key=PASSWORD, max_chars=200)
        st.sidebar.button(
            "Start a class",
            key="class_start",
            on_click=start_class,
            help="Students open a link (or its QR code) and follow this page; you ask, they predict, you reveal.",
        )


def join_box() -> None:
    """The home page's "Join a class" box, while this page is in none: the code the projector shows."""
    if class_code() is not None:
        return
    with st.container(horizontal=True, vertical_alignment="bottom", key="class_join"):
        st.text_input(
            "Join a class: its code", key=JOIN, max_chars=2 * classroom.CODE_LENGTH, placeholder="ABC23", width=220
        )
        st.button("Join", key="class_join_button", on_click=join)


def _hold_back(code: str | None, teacher: bool) -> None:
    """While a question is open (asked, not revealed) every page of the class holds its figures back: the class
    predicts before it sees (ui.widgets.held_back). The teacher's peek (off by default) shows them to the teacher."""
    st.session_state.pop(widgets.HELD_BACK, None)
    question = class_session.ROOM.question(code) if code is not None else None
    if question is None or question.revealed or (teacher and st.session_state.get(PEEK)):
        return
    st.session_state[widgets.HELD_BACK] = (
        f"The figure is held back while question {question.number} is open: predict first, it shows at the reveal."
    )


@errors.safe
def panel(page: str) -> None:
    """Above the page: the teacher's link, QR code and questions, or the student's following and answering."""
    st.session_state[PAGE] = page
    if note := st.session_state.pop(NOTE, None):
        st.warning(literal(note))
    if why := state.refused(CLASS):
        st.error(literal(f"The link's class code is not one: {why}."))
    code = class_code()
    st.session_state.pop(widgets.HELD_BACK, None)
    st.session_state.pop(widgets.FOLDED, None)
    class_pushed.record(False)
    if code is None:
        not_told()
        return
    try:
        here = _resumed(code, page)
        if not here and _missing(code):
            return
        teacher = teachers_class() if here else None
    except StoreError as exc:
        errors.log.warning("class %s is paused: %s", code, getattr(exc, "detail", exc))
        _paused(code, str(exc))
        return
    if teacher is not None:
        if (session := streamlit_private.session_id()) is not None:
            class_session.TEACHERS.teaching(session, *teacher)
        class_pushed.record(True)  # the charts this run draws are what its followers are pushed
        class_session.FOLLOWERS.leading(student_id())  # no follower's rerun starts until this run is over (`run_over`)
        _teacher_panel(code, page)
        _hold_back(code, teacher=True)
    else:
        st.session_state[ALIVE_SEEN] = (code, class_session.ROOM.ends_at(code))
        _student_panel(code, page)
        _hold_back(code, teacher=False)


def _resumed(code: str, page: str) -> bool:
    """Whether class `code` is there, once this page, its teacher's, has put it back if the store lost it or holds
    it damaged (with the key, view and open question the teacher's session keeps). StoreError while the store does
    not answer, or when a student's page meets a damaged record."""
    taught = st.session_state.get(TAUGHT)
    ours = taught is not None and taught == (code, st.session_state.get(TEACH))
    try:
        if class_session.ROOM.version(code) is not None and (not ours or class_session.ROOM.is_teacher(*taught)):
            return True
    except RecordError:
        if not ours:
            raise
    return ours and class_session.ROOM.restore(code, taught[1], view_of(page), st.session_state.get(OPEN_QUESTION))


def _missing(code: str) -> bool:
    """Class `code` is not in the store: said in one line. A page that saw it alive, and before its idle end, is
    told it is paused and keeps following (the teacher's page puts it back); else it ended, and the page leaves it.
    Whether the page is done with the class."""
    seen = st.session_state.get(ALIVE_SEEN)
    if not class_session.ROOM.ended(code) and (
        st.session_state.get(TAUGHT) == (code, st.session_state.get(TEACH))
        or (seen is not None and seen[0] == code and seen[1] is not None and not class_session.ROOM.idled_out(seen[1]))
    ):
        not_told()
        st.warning(literal(f"Class {code} is paused: the class store lost it for now. This page works on its own."))
        if TEACH not in st.session_state:
            told(code, "version", None)  # rerun when its teacher's page puts it back
        return True
    not_told()
    if class_session.ROOM.ended(code) or (seen is not None and seen[0] == code):  # ended by its teacher, or idle
        st.error(literal(f"Class {code} has ended."))
    else:
        st.error(literal(f"There is no class {code} on this server: it has ended, or the code is mistyped."))
    for key in (CLASS, TEACH, APPLIED, SEEN, TAUGHT, ASKED, OPEN_QUESTION, PUBLISHED, ALIVE_SEEN):
        st.session_state.pop(key, None)
    return True


def _paused(code: str, why: str) -> None:
    """The store does not answer (or holds the class damaged): one line, the session's keys kept, and the page
    rerun when the store answers again (the teacher's then puts its class back)."""
    st.warning(literal(f"{why[:1].upper()}{why[1:]}."))
    not_told()
    try:
        told(code, "version", class_session.ROOM.version(code))  # a damaged record: rerun when its teacher mends it
    except StoreError:
        told(code, "store", False)


def _student_link(code: str) -> tuple[str, str]:
    """(the students' link, "") or ("", the line that says why no address they can open is known)."""
    base, why = address.students_base(st.context.url)
    return (f"{base}/?class={code}", "") if base else ("", why)


@functools.lru_cache(maxsize=64)  # the same link on every run of the teacher's page: drawn once (tens of ms)
def _qr_image(link: str, label: str) -> str:
    """The link's QR code as an <img> of an SVG data URI (st.html's sanitizer keeps an image, not inline SVG)."""
    data = base64.b64encode(qr.svg(link, label).encode("ascii")).decode("ascii")
    return f'<img src="data:image/svg+xml;base64,{data}" alt="{html.escape(label, quote=True)}" width="296">'


def _teacher_panel(code: str, page: str) -> None:
    """The question and its reveal first (in the projector's first view), then the link and "Ask the class", folded
    once a question is asked."""
    question = class_session.ROOM.question(code)
    st.session_state[OPEN_QUESTION] = question  # put back with the class if the store loses it
    if question is not None and question.revealed:
        with _reveal_place(code, question, page):
            _reveal_chart(code, question)
    _teacher_live(code, page)
    if question is not None and not question.revealed:
        st.toggle("Peek at the figures (this page only; the projector shows them too)", key=PEEK, value=False)
    with st.expander(
        literal(f"Class {code}: how students join"), expanded=question is None, key=LINK_PANEL, on_change="rerun"
    ):
        _join_card(code)
        _devices_row(code)
        _end_controls()
    with st.expander("Ask the class", key=ASK_PANEL, on_change="rerun"):
        st.radio("Question", list(KIND_LABELS), key="class_kind", format_func=KIND_LABELS.get)
        st.caption(
            "Asked of the model, text, attention type, layer and head shown now; the query is the token the page "
            "picked (Attention math's query, Explore's position) or the last one."
        )
        st.button("Ask", key="class_ask", on_click=ask, args=(page,), type="primary")
    _answers_download(code)


def _join_card(code: str) -> None:
    """The code alone in very large type, the link beside it (wrapping, never cut) and its QR code."""
    link, why = _student_link(code)
    st.html(LINK_CSS)
    words, picture = st.columns([3, 2])
    with words:
        st.html(f'<p class="class-code" aria-label="Class code {html.escape(code)}">{html.escape(code)}</p>')
        if link:
            st.caption("Students open this link, or type the code on the app's first page:")
            with st.container(key="class_link"):
                st.code(link, language=None, wrap_lines=True)
        else:
            st.warning(literal(why))
    if link:
        picture.html(_qr_image(link, f"QR code of the students' link, class {code}"))


def _end_controls() -> None:
    """ "End the class" asks first: a checkbox, then the button."""
    with st.container(horizontal=True, vertical_alignment="center"):
        sure = st.checkbox("Yes, end it", key=END_SURE, help="Ending the class stops every student's page following.")
        st.button("End the class", key="class_end", on_click=end_class, disabled=not sure)


def _answers_download(code: str) -> None:
    """The class's answers so far as CSV (and JSON), while the class lives."""
    if class_session.ROOM.question(code) is None:
        return
    downloads.table_downloads(
        functools.partial(_answers_frame, code, dict(st.session_state.get(ASKED, {}))),
        f"class-{code}-answers",
        "class_answers",
        "the class's answers",
    )


def _answers_frame(code: str, asked: dict[int, dict[str, object]]):
    """One row per choice of each question the class keeps: what it asked, of which text, layer and head, the
    choice, how many picked it, whether it is the model's answer, and when it was asked."""
    rows = []
    for question, counts in class_session.ROOM.tally(code):
        of = asked.get(question.number, {})
        for i, (choice, count) in enumerate(zip(question.choices, counts, strict=True)):
            rows.append(
                {
                    "question": question.number,
                    "asked": question.prompt,
                    "text": of.get("text", ""),
                    "attention": of.get("attention", ""),
                    "layer": of.get("layer"),
                    "head": of.get("head"),
                    "choice": i + 1,
                    "choice text": choice,
                    "count": count,
                    "the model's answer": i == question.model_answer,
                    "revealed": question.revealed,
                    "asked at (UTC)": of.get("asked at (UTC)", ""),
                }
            )
    return pd.DataFrame(rows)


@errors.safe
def _devices_row(code: str) -> None:
    """How many devices have joined, and the lock: once everyone is in, later devices follow but do not answer."""
    joined, locked = class_session.ROOM.devices(code)
    left, right = st.columns([3, 1])
    said = f"**{literal(joined)}** {'device has' if joined == 1 else 'devices have'} joined"
    left.markdown(said + (": locked, later devices follow but do not answer." if locked else "."))
    label = "Open the class again" if locked else "Lock the class"
    right.button(label, key="class_lock", on_click=lock_class, args=(not locked,))


@errors.safe
def _teacher_live_body(code: str, page: str) -> None:
    try:
        here = class_session.ROOM.answered(code) is not None
    except StoreError:
        here = False
    if not here:  # the class paused or lost: the whole page says so, and puts it back when the store answers
        st.rerun(scope="app")
    try:
        _teacher_live_draw(code, page)
    finally:  # the server reruns this fragment when an answer arrives (the count) or the class moves
        told(code, "answers", class_session.ROOM.answered(code), fragment=True)


def _teacher_live_draw(code: str, page: str) -> None:
    question = class_session.ROOM.question(code)
    shown = None if question is None else (question.number, question.revealed)
    if shown != st.session_state.setdefault(TEACHER_SEEN, shown):
        st.session_state[TEACHER_SEEN] = shown
        st.rerun(scope="app")  # a question asked or revealed: the page draws it
    if question is None or question.revealed:
        return
    answered = sum(class_session.ROOM.counts(code, question.number))
    st.markdown(f"**Question {literal(question.number)}:** {literal(question.prompt)}")
    st.markdown(_choices_line(question))
    st.markdown(f"**{answered}** {'answer' if answered == 1 else 'answers'} so far")
    st.button("Reveal", key="class_reveal", on_click=reveal, args=(question.number,), type="primary")


_teacher_live = state.fragment(_teacher_live_body)


def _choices_line(question: classroom.Question) -> str:
    """The choices as the projector shows them while the class answers (the room reads them there too): the words,
    or the head question's grid."""
    if question.shape is not None:
        layers, heads = question.shape
        return f"Choices: any head of the {layers} layers × {heads} heads, one tap on each phone's grid."
    return "Choices: " + " · ".join(f"**{literal(choice)}**" for choice in question.choices)


def _reveal_chart(code: str, question: classroom.Question) -> None:
    counts = class_session.ROOM.counts(code, question.number)
    title = f"Question {question.number}: {question.prompt}"
    if question.shape is not None:
        fig = head_grid_figure(question.shape, counts, question.scores, question.model_answer, title)
    else:
        fig = answers_figure(title, question.choices, counts, question.model_answer)
    widgets.show_chart(fig, f"class_answers_{question.number}", f"class-{code}-question-{question.number}")


def _reveal_place(code: str, question: classroom.Question, page: str):
    """Where a revealed question's answers go: the page itself on the view the reveal was first drawn at; once this
    page moved on (the teacher's next view, which a follower takes too) a folded expander, so that the page's own
    figure comes first again, on the projector and on a phone."""
    here, mark = view_of(page), (code, question.number)
    seen = st.session_state.get(REVEALED_AT)
    if seen is None or seen[:2] != mark:
        st.session_state[REVEALED_AT] = seen = (*mark, here)
    if seen[2] == here:
        return st.container()
    return st.expander(literal(f"Question {question.number}: the class's answers"), expanded=False)


def _student_panel(code: str, page: str) -> None:
    following = not st.session_state.get(DETACHED)
    off = following and off_view(code, page)
    st.session_state[OFF_VIEW] = off
    st.session_state[widgets.FOLDED] = following and not off  # the teacher's figure first, the pickers folded
    st.html(BANNER_CSS)
    with st.container(horizontal=True, vertical_alignment="center", key="class_banner"):
        if off:
            st.markdown(f"**Class {literal(code)}**: you changed the view, so you are off the teacher's.")
        else:
            doing = "following the teacher." if following else "exploring on your own."
            st.markdown(f"**Class {literal(code)}**: {doing}")
        if following and not off:
            st.button("Explore on my own", key="class_detach", on_click=detach, width="content")
        else:
            st.button("Follow again", key="class_follow", on_click=follow_again, type="primary", width="content")
    # The version this page is drawn at, read before the question below. A follower's is the one whose view it
    # took in `follow`, not the class's now: a change the teacher made while this run drew would else be marked
    # seen and never followed (the poll compares the class's version with this one).
    device_joins(code)
    applied = st.session_state.get(APPLIED) if following else None
    st.session_state[SEEN] = applied if applied is not None else class_session.ROOM.version(code)
    if following and not off:  # a later view of this page, drawn the moment the teacher's page drew it
        class_pushed.show(code, page, st.session_state[SEEN])
    try:
        question = class_session.ROOM.question(code)
        if question is not None:
            _student_question(code, question, page)
    finally:  # whatever the question's drawing did: the server reruns this page when the class moves on
        told(code, "version", st.session_state[SEEN])


def _head_grid_pick(question: classroom.Question) -> None:
    """The head question as its grid: one row of head buttons (from 1) per layer, one tap picks a head (and clears
    the other rows); `class_pick_{number}` holds the choice, `layer * heads + head`, that Answer sends."""
    n_layers, n_heads = question.shape or (0, 0)
    st.markdown(literal(f"Question {question.number}: {question.prompt}"))
    for layer in range(n_layers):
        st.pills(
            f"Layer {layer + 1}",
            list(range(n_heads)),
            format_func=lambda h: str(h + 1),
            key=f"class_pick_{question.number}_layer_{layer}",
            on_change=_pick_head,
            args=(question.number, layer, n_layers, n_heads),
        )
    st.button("Answer", key=f"class_answer_{question.number}", on_click=answer, args=(question.number,))


@errors.safe  # a callback: runs outside the page's guard
def _pick_head(number: int, layer: int, n_layers: int, n_heads: int) -> None:
    """A tap on layer `layer`'s row: that head is the pick, and the other rows show none."""
    head = st.session_state.get(f"class_pick_{number}_layer_{layer}")
    for other in range(n_layers):
        if other != layer:
            st.session_state[f"class_pick_{number}_layer_{other}"] = None
    st.session_state[f"class_pick_{number}"] = None if type(head) is not int else layer * n_heads + head


def _student_question(code: str, question: classroom.Question, page: str) -> None:
    mine = class_session.ROOM.answer_of(code, question.number, class_session.device_id())
    if not question.revealed:
        if mine is None and (refused := st.session_state.get(JOIN_REFUSED)):
            st.info(literal(f"{refused[0].upper()}{refused[1:]}."))
        elif mine is None:
            with st.container(border=True):
                if question.shape is not None:
                    _head_grid_pick(question)
                    return
                st.radio(
                    literal(f"Question {question.number}: {question.prompt}"),
                    list(range(len(question.choices))),
                    index=None,
                    key=f"class_pick_{question.number}",
                    format_func=lambda i: literal(question.choices[i]),
                    horizontal=True,
                )
                st.button("Answer", key=f"class_answer_{question.number}", on_click=answer, args=(question.number,))
        else:
            st.info(literal(f"Your answer: {question.choices[mine]}. The teacher reveals the class's answers next."))
        return
    model = question.choices[question.model_answer]
    if mine is None:
        said = f"You did not answer. The model: {model}."
    elif mine == question.model_answer:
        said = f"Right: you picked {model}, as the model does."
    else:
        said = f"Not this time: you picked {question.choices[mine]}, the model {model}."
    with _reveal_place(code, question, page):
        (st.success if mine == question.model_answer else st.info)(literal(said))
        _reveal_chart(code, question)
