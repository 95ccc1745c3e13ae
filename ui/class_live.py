"""A live class on the page (live/ holds its rules, store and push): the sidebar's "Start a class", the teacher's
link and QR code, students following the teacher's view, and a question the class answers before the reveal.

app.py calls `follow` before the sidebar (a follower takes the teacher's view, and page, before any widget is
drawn), `panel` above the page and `publish` after it. The server tells a page when its class moved
(live/push.py): the teacher's drawn figures are pushed to each student's page at once (ui/class_pushed.py), then
a student's page is rerun when the class's version leaves the one it drew, the teacher's count of answers when an
answer arrives; an idle follower costs nothing. The teacher's page publishes its view after each
run of the page and of any of its fragments (a pick inside a page's fragment reruns only that fragment).
"""

from __future__ import annotations

import base64
import functools
import html
import ipaddress
import os
import secrets
import time
from collections.abc import Collection

import pandas as pd
import streamlit as st

from analysis import class_questions
from analysis.class_questions import QuestionError
from live import address
from live import rules as classroom
from live.heartbeat import Teachers
from live.push import Followers
from live.rules import ClassError, Classroom, View
from live.store import RecordError, StoreError
from ui import cache, class_pushed, class_rerun, device_cookie, downloads, errors, reference, sidebar, state, widgets
from ui.markdown import literal
from ui.pages import PAGES
from viz import qr
from viz.classroom import answers_figure, head_grid_figure
from viz.heads import AVERAGE

CLASS = state.url_key("class_code", classroom.normal_code, url="class")  # the students' link holds only this
TEACH = state.url_key("class_key", url="teach")  # the teacher's address holds the class's secret key as well
STUDENT = "_class_student"  # session key: this browser session's random id (its answers, its entry in FOLLOWERS)
DETACHED = "_class_detached"  # session key: the student explores on their own
APPLIED = "_class_applied"  # session key: the class version whose view this follower took
SEEN = "_class_seen"  # session key: the class version the page was drawn at (a change reruns the page)
PAGE = "_class_page"  # session key: the page this session shows (what a fragment's run publishes)
TEACHER_SEEN = "_class_teacher_seen"  # session key: (question, revealed) the teacher's page was drawn at
JOINED = "_class_joined"  # session key: (class, device) this session's device joined
JOIN_REFUSED = "_class_join_refused"  # session key: why this device may not answer (the class locked, …)
PASSWORD = "class_password"  # the sidebar's teacher password box, when the server has a password
TRUSTED_PROXIES = {a for a in os.environ.get("ATLAS_TRUSTED_PROXY", "").replace(",", " ").split() if a}
NOTE = "_class_note"  # session key: a one-line refusal to show on the next run (from a callback)
# What the teacher's session keeps to put its class back when the store lost it (a restart) or holds it damaged:
TAUGHT = "_class_taught"  # session key: (code, key) of the class this session was found the teacher of
OPEN_QUESTION = "_class_open_question"  # session key: the class's latest question as the teacher's page drew it
PUBLISHED = "_class_published"  # session key: (code, view) this tab last published: it publishes only a change
ALIVE_SEEN = "_class_alive_seen"  # session key: (code, when it ends idle) as a student's page last found it
ASKED = "_class_asked"  # session key, the teacher's: question number → what it was asked of (the CSV's columns)
OFF_VIEW = "_class_off_view"  # session key: a follower's own change took it off the teacher's view
LINK_PANEL, ASK_PANEL = "class_link_panel", "class_ask_panel"  # the teacher's two expanders (open or folded)
PEEK = "class_peek"  # the teacher's toggle: the figures shown to the teacher alone while a question is open
END_SURE = "class_end_sure"  # the checkbox that "End the class" asks first
REVEALED_AT = "_class_revealed_at"  # session key: (class, question, the view its reveal was first drawn at)
JOIN = "class_join_code"  # the home page's box: a class code typed by a student
# What a follower copies: the model, the text, attention type, layer, head, query, position and the Lesson's step
# and sentence (views/lesson.py declares those two; tests/test_class_page.py checks the names).
FOLLOWED = (
    sidebar.MODEL,
    sidebar.TEXT,
    widgets.ATTENTION,
    widgets.LAYER,
    widgets.HEAD,
    widgets.QUERY,
    widgets.POSITION,
    "lesson",
    "lesson_source",
)
ROOM = Classroom.from_environment()  # every session of the process shares it (and every replica, with Redis)
FOLLOWERS = Followers({"version": ROOM.version, "answers": ROOM.answered, "store": lambda code: _answers(code)})
TEACHERS = Teachers(ROOM.seen, class_rerun.session_open, ROOM.sweep)  # an open teacher's page keeps its class
SCRIPTS = {page.url_path: page.script for page in PAGES}
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


def _code() -> str | None:
    return st.session_state.get(CLASS) or None


def _teacher() -> tuple[str, str] | None:
    """The class and key when this page is its teacher's."""
    code, key = _code(), st.session_state.get(TEACH)
    if not (code and key and ROOM.is_teacher(code, key)):
        return None
    st.session_state[TAUGHT] = (code, key)
    return code, key


def _answers(code: str) -> bool:
    """True once the store answers about `code` (what a paused teacher's page waits for: it then puts it back)."""
    ROOM.version(code)
    return True


def leads_or_follows() -> bool:
    """Whether this page is a class's teacher's or a follower's (not a student exploring on their own): its run
    goes before heavy work (analysis.worker)."""
    return _code() is not None and (bool(st.session_state.get(TEACH)) or not st.session_state.get(DETACHED))


def student_id() -> str:
    """This browser session's random id: its answers are kept under it, and nothing of the person."""
    return st.session_state.setdefault(STUDENT, secrets.token_urlsafe(12))


def device_id() -> str:
    """This browser's device: the `atlas_device` cookie the server set (ui/device_cookie.py), the same across
    reloads and tabs; this session's id where the browser sent none (a server started without `atlas app`)."""
    cookie = _cookie()
    return f"device-{cookie}" if cookie is not None else student_id()


def _cookie() -> str | None:
    return device_cookie.sent(f"{device_cookie.COOKIE}={st.context.cookies.get(device_cookie.COOKIE, '')}")


def client_address() -> str:
    """The client's address as the proxy forwards it (X-Forwarded-For's last hop, trusted only from the loopback or
    $ATLAS_TRUSTED_PROXY), else the connection's peer."""
    return address_of(st.context.ip_address, st.context.headers.get("X-Forwarded-For"), TRUSTED_PROXIES)


def address_of(peer: object, forwarded_for: object, trusted: Collection[str]) -> str:
    """The client's address: X-Forwarded-For's last hop (what the proxy itself added) when the connection's peer is
    the loopback (None) or one of the `trusted` proxies, else the peer; "loopback" when neither is an address."""
    peer = _address(peer)
    forwarded = _address(forwarded_for.split(",")[-1]) if isinstance(forwarded_for, str) else None
    if forwarded and (peer is None or peer in {_address(one) for one in trusted}):
        return forwarded
    return peer or "loopback"


def _address(text: object) -> str | None:
    """`text` as an IP address, or None when it is none (a forged header's junk among them)."""
    try:
        return str(ipaddress.ip_address(text.strip())) if isinstance(text, str) else None
    except ValueError:
        return None


def _join(code: str) -> None:
    """This device joins the class (once a session; again is nothing), or the page says why it cannot answer."""
    device = device_id()
    if st.session_state.get(JOINED) == (code, device):
        return
    try:
        ROOM.join(code, device, client_address())
    except ClassError as exc:
        st.session_state[JOIN_REFUSED] = str(exc)
        return
    st.session_state[JOINED] = (code, device)
    st.session_state.pop(JOIN_REFUSED, None)


def _refuse_wrong_key() -> None:
    """A teach= that is not the class's key is dropped, said in one line, and changes nothing: the page follows."""
    code, key = _code(), st.session_state.get(TEACH)
    if st.session_state.get(TAUGHT) == (code, key):  # this session's class: kept, and put back if lost (`panel`)
        return
    if key and not (code and ROOM.is_teacher(code, key)):
        st.session_state.pop(TEACH)
        if code and ROOM.version(code) is not None:
            st.session_state[NOTE] = f"This link's teacher key is not class {code}'s: the page follows the class."


@errors.safe
def follow(page: str) -> None:
    """A student following: take the teacher's view when the class moved, and go to the teacher's page."""
    try:
        _follow(page)
    except StoreError:  # the class is paused: the panel says so in its one line, and the page works on its own
        return


def _follow(page: str) -> None:
    _refuse_wrong_key()
    code = _code()
    if code is None or st.session_state.get(TEACH) or st.session_state.get(DETACHED):
        return
    version = ROOM.version(code)
    if version is None or version == st.session_state.get(APPLIED):
        return
    version, view = ROOM.view(code)
    st.session_state[APPLIED] = version
    _take(view)
    if view.page != page and view.page in SCRIPTS:
        # The view's parameters go with the switch. Without them Streamlit empties the query first, and the
        # browser, which writes the new page's path with the query it holds then, could end on a bare /lesson
        # when the new page's own write of the query reached it before the page change (a slow server's order).
        st.switch_page(SCRIPTS[view.page], query_params=state.url_values())


def _take(view: View) -> None:
    values = dict(view.values)
    if values.get(sidebar.MODEL) != st.session_state.get(sidebar.MODEL):
        st.session_state.pop(reference.REFERENCE, None)  # written for the previous model
    for key in FOLLOWED:
        if values.get(key) is None:
            st.session_state.pop(key, None)
        else:
            st.session_state[key] = values[key]
    # Taken as from a link: a page's checks keep them (state.keep_valid), and its opening head does not replace them.
    st.session_state.setdefault(state.FROM_URL, set()).update(k for k in FOLLOWED if values.get(k) is not None)
    st.session_state[widgets.HEAD_PICKED] = True


def _view(page: str) -> View:
    return View.of(page, {key: st.session_state.get(key) for key in FOLLOWED})


def publish(page: str) -> None:
    """The teacher's page: its view becomes the class's (the version moves only when it changed). Also called after
    each run of a page's fragment (`_publish_after_fragment`), which app.py's own call does not follow.

    A tab publishes only a view it has not published yet: of a teacher's two tabs (projector and laptop), the one
    used last leads, and a rerun the server asks of the other (its count, on an answer) moves nothing."""
    try:
        teacher = _teacher()
        if teacher is None or st.session_state.get(PUBLISHED) == (teacher[0], view := _view(page)):
            return
        version = ROOM.show(*teacher, view)
        question = ROOM.question(teacher[0])
        held = question is not None and not question.revealed  # the class predicts before it sees
        class_pushed.publish(teacher[0], version, page, str(dict(view.values).get(sidebar.TEXT) or ""), held)
    except StoreError:  # the class is paused: the panel said so, and the next run publishes the view
        return
    except ClassError as exc:
        st.session_state[NOTE] = str(exc)
    else:
        st.session_state[PUBLISHED] = (teacher[0], view)
        FOLLOWERS.poke()  # this server's followers start at once, not at the next tick


def run_over() -> None:
    """This session's page run is over (app.py's last step, and after each fragment's run): when the push asked
    it, its place goes to the next follower (live/push.py, RUNNING)."""
    if STUDENT in st.session_state:
        FOLLOWERS.ran(st.session_state[STUDENT])


def _publish_after_fragment() -> None:
    if PAGE in st.session_state:
        publish(st.session_state[PAGE])
    run_over()
    _say_off_view()


def _say_off_view() -> None:
    """A follower's change inside a page's fragment (which reruns alone, not the banner above the page): when it
    took the follower off the teacher's view, the whole page runs once more so that the banner says so."""
    code = _code()
    if code is None or _teacher() is not None or st.session_state.get(DETACHED) or st.session_state.get(OFF_VIEW):
        return
    if PAGE in st.session_state and _off_view(code, st.session_state[PAGE]):
        st.rerun(scope="app")


state.after_each_fragment(_publish_after_fragment)


def _told(code: str, look: str, seen: object, fragment: bool = False) -> None:
    """The server reruns this session's page (or, `fragment`, the fragment drawing now) when the class's `look`
    leaves `seen` (live/push.py)."""
    rerun = class_rerun.this_run(fragment)
    if rerun is not None:
        FOLLOWERS.drawn(student_id(), code, look, seen, rerun)


def _not_told() -> None:
    if STUDENT in st.session_state:
        FOLLOWERS.left(student_id())


# Callbacks -------------------------------------------------------------------------------------------------------


@errors.safe  # a callback: runs outside the page's guard
def start_class() -> None:
    """Open a class with this page as its teacher's."""
    password = st.session_state.get(PASSWORD)
    try:
        code, key = ROOM.start(client_address(), password if isinstance(password, str) else "")
    except ClassError as exc:
        st.session_state[NOTE] = str(exc)
        return
    st.session_state.pop(PASSWORD, None)
    st.session_state[CLASS], st.session_state[TEACH] = code, key
    st.session_state[LINK_PANEL] = True
    st.session_state.pop(DETACHED, None)


@errors.safe  # a callback: runs outside the page's guard
def end_class() -> None:
    """End the class, once its checkbox (END_SURE) said so: a click by mistake ends nothing."""
    if not st.session_state.get(END_SURE):
        st.session_state[NOTE] = "Tick “Yes, end it” first: ending the class stops every student's page following."
        return
    teacher = _teacher()
    if teacher is not None:
        ROOM.end(*teacher)
        class_rerun.CHANNEL.forget(teacher[0])
    if (session := class_rerun.session_id()) is not None:
        TEACHERS.left(session)
    for key in (CLASS, TEACH, TEACHER_SEEN, ASKED, END_SURE, TAUGHT, OPEN_QUESTION, PUBLISHED):
        st.session_state.pop(key, None)


@errors.safe  # a callback: runs outside the page's guard
def lock_class(locked: bool) -> None:
    teacher = _teacher()
    if teacher is not None:
        try:
            ROOM.lock(*teacher, locked)
        except ClassError as exc:
            st.session_state[NOTE] = str(exc)


@errors.safe  # a callback: runs outside the page's guard
def join() -> None:
    """The home page's box: a student typed a class code."""
    typed = st.session_state.get(JOIN) or ""
    try:
        code = classroom.normal_code(typed)
    except ValueError as exc:
        st.session_state[NOTE] = f"That is not a class code: {exc}."
        return
    if ROOM.version(code) is None:
        st.session_state[NOTE] = f"There is no class {code} on this server: it has ended, or the code is mistyped."
        return
    for key in (TEACH, DETACHED, APPLIED, OFF_VIEW):
        st.session_state.pop(key, None)
    st.session_state[CLASS] = code
    st.session_state[JOIN] = ""


@errors.safe  # a callback: runs outside the page's guard
def detach() -> None:
    st.session_state[DETACHED] = True


@errors.safe  # a callback: runs outside the page's guard
def follow_again() -> None:
    st.session_state.pop(DETACHED, None)
    st.session_state.pop(OFF_VIEW, None)
    st.session_state.pop(APPLIED, None)  # the next run takes the teacher's view whatever its version


@errors.safe  # a callback: runs outside the page's guard
def ask(page: str) -> None:
    """The teacher asks the question picked in "Ask the class" of the model and text the sidebar chose."""
    st.session_state.pop(PUBLISHED, None)  # the teacher uses this tab: its view leads again
    teacher = _teacher()
    source = st.session_state.get(sidebar.CHOSEN, (None,))[0]
    if teacher is None or source is None:
        return
    try:
        card = source.ckpt.card if source.ckpt is not None else {}
        asked = _question(cache.shown(source).analysis, st.session_state.get("class_kind", "attend"), page, card)
        grid = asked.kind == "head"  # the head question's choices are its layer × head grid, row by row
        shape = (asked.n_layers, asked.n_heads) if grid else None
        number = ROOM.ask(
            *teacher, asked.kind, asked.prompt, asked.choices, asked.model_answer, shape, asked.values if grid else ()
        )
    except (ClassError, QuestionError) as exc:
        st.session_state[NOTE] = str(exc)
        return
    kept = st.session_state.setdefault(ASKED, {})
    kept[number] = _asked_of(asked.kind)
    while len(kept) > classroom.MAX_QUESTIONS:  # as many as the class keeps
        del kept[min(kept)]
    st.session_state[ASK_PANEL] = st.session_state[LINK_PANEL] = False  # folded: the question and Reveal first


def _asked_of(kind: str) -> dict[str, object]:
    """What a question was asked of, as the CSV says it: the text, the attention type, layer and head (from 1; none
    for the head question, which asks for one) and the time (UTC)."""
    layer, head = st.session_state.get(widgets.LAYER), st.session_state.get(widgets.HEAD)
    one_head = kind != "head" and isinstance(layer, int) and isinstance(head, int) and head != AVERAGE
    return {
        "text": st.session_state.get(sidebar.TEXT) or "",
        "attention": st.session_state.get(widgets.ATTENTION) or "" if kind != "head" else "",
        "layer": layer + 1 if one_head else None,
        "head": head + 1 if one_head else None,
        "asked at (UTC)": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }


def _question(analysis, kind: str, page: str, card: dict) -> class_questions.Asked:
    """The question `kind` of what the page shows; the head question's answer is the head the model's card names
    the induction head (the one the Lesson, Explore and Head ablation name)."""
    if kind == "head":
        return class_questions.induction_head(analysis, named=class_questions.named_head(card))
    attention = st.session_state.get(widgets.ATTENTION) or analysis.attentions[0]
    attention = attention if attention in analysis.attentions else analysis.attentions[0]
    n_queries = len(analysis.block(attention, analysis.layers(attention)[0]).query_pieces)
    asked_query = st.session_state.get(widgets.QUERY if page == "math" else widgets.POSITION)
    query = asked_query if isinstance(asked_query, int) and 0 <= asked_query < n_queries else n_queries - 1
    if kind == "next":
        return class_questions.next_token(analysis, query)
    head = st.session_state.get(widgets.HEAD, 0)
    if head == AVERAGE:
        raise QuestionError("the head picked is the layers' average: pick one head to ask where it attends")
    layer = st.session_state.get(widgets.LAYER, 0)
    return class_questions.attend(analysis, attention, int(layer), int(head), query)


@errors.safe  # a callback: runs outside the page's guard
def reveal(number: int) -> None:
    st.session_state.pop(PUBLISHED, None)  # the teacher uses this tab: its view leads again
    teacher = _teacher()
    if teacher is not None:
        ROOM.reveal(*teacher, number)


@errors.safe  # a callback: runs outside the page's guard
def answer(number: int) -> None:
    code, choice = _code(), st.session_state.get(f"class_pick_{number}")
    if code is None or choice is None:
        st.session_state[NOTE] = "Pick one of the choices first."
        return
    # The radio's options are the choices' indices; any other value ("1.5", a huge number, 1 MB of text) is a
    # client's own. Within MAX_CHOICES, ROOM.answer checks it against the question's own choices.
    if type(choice) is not int or not 0 <= choice < classroom.MAX_CHOICES:  # bool is an int's subclass
        st.session_state[NOTE] = "That answer is not one of the choices."
        return
    if st.session_state.get(JOINED) != (code, device_id()):
        st.session_state[NOTE] = st.session_state.get(JOIN_REFUSED) or "This device has not joined the class."
        return
    try:
        ROOM.answer(code, device_id(), number, choice)
    except ClassError as exc:
        st.session_state[NOTE] = str(exc)


# Drawing -----------------------------------------------------------------------------------------------------------


def sidebar_start() -> None:
    """The sidebar's "Start a class", while this page is in none."""
    if _code() is None:
        if ROOM.needs_password:
            st.sidebar.text_input("Teacher password", type="password", key=PASSWORD, max_chars=200)
        st.sidebar.button(
            "Start a class",
            key="class_start",
            on_click=start_class,
            help="Students open a link (or its QR code) and follow this page; you ask, they predict, you reveal.",
        )


def join_box() -> None:
    """The home page's "Join a class" box, while this page is in none: the code the projector shows."""
    if _code() is not None:
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
    question = ROOM.question(code) if code is not None else None
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
    code = _code()
    st.session_state.pop(widgets.HELD_BACK, None)
    st.session_state.pop(widgets.FOLDED, None)
    class_pushed.record(False)
    if code is None:
        _not_told()
        return
    try:
        here = _resumed(code, page)
        if not here and _missing(code):
            return
        teacher = _teacher() if here else None
    except StoreError as exc:
        errors.log.warning("class %s is paused: %s", code, getattr(exc, "detail", exc))
        _paused(code, str(exc))
        return
    if teacher is not None:
        if (session := class_rerun.session_id()) is not None:
            TEACHERS.teaching(session, *teacher)
        class_pushed.record(True)  # the charts this run draws are what its followers are pushed
        FOLLOWERS.leading(student_id())  # no follower's rerun starts until this run is over (`run_over`)
        _teacher_panel(code, page)
        _hold_back(code, teacher=True)
    else:
        st.session_state[ALIVE_SEEN] = (code, ROOM.ends_at(code))
        _student_panel(code, page)
        _hold_back(code, teacher=False)


def _resumed(code: str, page: str) -> bool:
    """Whether class `code` is there, once this page, its teacher's, has put it back if the store lost it or holds
    it damaged (with the key, view and open question the teacher's session keeps). StoreError while the store does
    not answer, or when a student's page meets a damaged record."""
    taught = st.session_state.get(TAUGHT)
    ours = taught is not None and taught == (code, st.session_state.get(TEACH))
    try:
        if ROOM.version(code) is not None and (not ours or ROOM.is_teacher(*taught)):
            return True
    except RecordError:
        if not ours:
            raise
    return ours and ROOM.restore(code, taught[1], _view(page), st.session_state.get(OPEN_QUESTION))


def _missing(code: str) -> bool:
    """Class `code` is not in the store: said in one line. A page that saw it alive, and before its idle end, is
    told it is paused and keeps following (the teacher's page puts it back); else it ended, and the page leaves it.
    Whether the page is done with the class."""
    seen = st.session_state.get(ALIVE_SEEN)
    if not ROOM.ended(code) and (
        st.session_state.get(TAUGHT) == (code, st.session_state.get(TEACH))
        or (seen is not None and seen[0] == code and seen[1] is not None and not ROOM.idled_out(seen[1]))
    ):
        _not_told()
        st.warning(literal(f"Class {code} is paused: the class store lost it for now. This page works on its own."))
        if TEACH not in st.session_state:
            _told(code, "version", None)  # rerun when its teacher's page puts it back
        return True
    _not_told()
    if ROOM.ended(code) or (seen is not None and seen[0] == code):  # its teacher ended it, or it idled out
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
    _not_told()
    try:
        _told(code, "version", ROOM.version(code))  # a damaged record: rerun when its teacher mends it
    except StoreError:
        _told(code, "store", False)


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
    question = ROOM.question(code)
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
    if ROOM.question(code) is None:
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
    for question, counts in ROOM.tally(code):
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
    joined, locked = ROOM.devices(code)
    left, right = st.columns([3, 1])
    said = f"**{literal(joined)}** {'device has' if joined == 1 else 'devices have'} joined"
    left.markdown(said + (": locked, later devices follow but do not answer." if locked else "."))
    label = "Open the class again" if locked else "Lock the class"
    right.button(label, key="class_lock", on_click=lock_class, args=(not locked,))


@errors.safe
def _teacher_live_body(code: str, page: str) -> None:
    try:
        here = ROOM.answered(code) is not None
    except StoreError:
        here = False
    if not here:  # the class paused or lost: the whole page says so, and puts it back when the store answers
        st.rerun(scope="app")
    try:
        _teacher_live_draw(code, page)
    finally:  # the server reruns this fragment when an answer arrives (the count) or the class moves
        _told(code, "answers", ROOM.answered(code), fragment=True)


def _teacher_live_draw(code: str, page: str) -> None:
    question = ROOM.question(code)
    shown = None if question is None else (question.number, question.revealed)
    if shown != st.session_state.setdefault(TEACHER_SEEN, shown):
        st.session_state[TEACHER_SEEN] = shown
        st.rerun(scope="app")  # a question asked or revealed: the page draws it
    if question is None or question.revealed:
        return
    answered = sum(ROOM.counts(code, question.number))
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
    counts = ROOM.counts(code, question.number)
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
    here, mark = _view(page), (code, question.number)
    seen = st.session_state.get(REVEALED_AT)
    if seen is None or seen[:2] != mark:
        st.session_state[REVEALED_AT] = seen = (*mark, here)
    if seen[2] == here:
        return st.container()
    return st.expander(literal(f"Question {question.number}: the class's answers"), expanded=False)


def _off_view(code: str, page: str) -> bool:
    """Whether this follower's own change (a widget, another page) took it off the teacher's view. Judged only
    when the page shows the class's latest version: a newer one is taken on the next run anyway."""
    version = ROOM.version(code)
    if version is None or version != st.session_state.get(APPLIED):
        return False
    _, view = ROOM.view(code)
    return view.page in SCRIPTS and _view(page) != view


def _student_panel(code: str, page: str) -> None:
    following = not st.session_state.get(DETACHED)
    off = following and _off_view(code, page)
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
    _join(code)
    applied = st.session_state.get(APPLIED) if following else None
    st.session_state[SEEN] = applied if applied is not None else ROOM.version(code)
    if following and not off:  # a later view of this page, drawn the moment the teacher's page drew it
        class_pushed.show(code, page, st.session_state[SEEN])
    try:
        question = ROOM.question(code)
        if question is not None:
            _student_question(code, question, page)
    finally:  # whatever the question's drawing did: the server reruns this page when the class moves on
        _told(code, "version", st.session_state[SEEN])


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
    mine = ROOM.answer_of(code, question.number, device_id())
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
