"""A browser session in a live class (live/ holds the class's rules, store and push; ui/class_live.py draws it):
the session's keys, the room every session shares, this browser's device and address, following the teacher's view,
publishing it, and the callbacks the class's buttons call.

app.py calls `follow` before the sidebar (a follower takes the teacher's view, and page, before any widget is
drawn), ui/class_live.py's `panel` above the page and `publish` after it. The server tells a page when its class
moved (live/push.py): the teacher's drawn figures are pushed to each student's page at once (ui/class_pushed.py),
then a student's page is rerun when the class's version leaves the one it drew, the teacher's count of answers when
an answer arrives; an idle follower costs nothing. The teacher's page publishes its view after each run of the page
and of any of its fragments (a pick inside a page's fragment reruns only that fragment).

ROOM, FOLLOWERS, TEACHERS and `device_id` are read through this module wherever they are used (ui/class_live.py
too), so that one replaced here (a test's room on a real redis-server, a phone's device) is replaced everywhere.
"""

from __future__ import annotations

import secrets
import time

import streamlit as st

from analysis import class_questions
from analysis.class_questions import QuestionError
from live import address
from live import rules as classroom
from live.heartbeat import Teachers
from live.push import Followers
from live.rules import ClassError, Classroom, View
from live.store import StoreError
from ui import (
    cache,
    class_pushed,
    class_stream,
    device_cookie,
    errors,
    reference,
    sidebar,
    state,
    streamlit_private,
    widgets,
)
from ui.pages import PAGES
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
NOTE = "_class_note"  # session key: a one-line refusal to show on the next run (from a callback)
# What the teacher's session keeps to put its class back when the store lost it (a restart) or holds it damaged:
TAUGHT = "_class_taught"  # session key: (code, key) of the class this session was found the teacher of
OPEN_QUESTION = "_class_open_question"  # session key: the class's latest question as the teacher's page drew it
PUBLISHED = "_class_published"  # session key: (code, view) this tab last published: it publishes only a change
ALIVE_SEEN = "_class_alive_seen"  # session key: (code, when it ends idle) as a student's page last found it
ASKED = "_class_asked"  # session key, the teacher's: question number → what it was asked of (the CSV's columns)
OFF_VIEW = "_class_off_view"  # session key: a follower's own change took it off the teacher's view
LINK_PANEL, ASK_PANEL = "class_link_panel", "class_ask_panel"  # the teacher's two expanders (open or folded)
END_SURE = "class_end_sure"  # the checkbox that "End the class" asks first
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
TEACHERS = Teachers(ROOM.seen, streamlit_private.session_open, ROOM.sweep)  # an open teacher's page keeps its class
SCRIPTS = {page.url_path: page.script for page in PAGES}


def class_code() -> str | None:
    """The class this page is in (its code), or None."""
    return st.session_state.get(CLASS) or None


def teachers_class() -> tuple[str, str] | None:
    """The class and key when this page is its teacher's."""
    code, key = class_code(), st.session_state.get(TEACH)
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
    goes before heavy work (analysis.lanes)."""
    return class_code() is not None and (bool(st.session_state.get(TEACH)) or not st.session_state.get(DETACHED))


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
    forwarded_for = st.context.headers.get("X-Forwarded-For")
    return address.address_of(st.context.ip_address, forwarded_for, address.TRUSTED_PROXIES)


def device_joins(code: str) -> None:
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
    code, key = class_code(), st.session_state.get(TEACH)
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
    code = class_code()
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


def view_of(page: str) -> View:
    """What this session shows on `page`, as a follower would take it (FOLLOWED's values)."""
    return View.of(page, {key: st.session_state.get(key) for key in FOLLOWED})


def publish(page: str) -> None:
    """The teacher's page: its view becomes the class's (the version moves only when it changed). Also called after
    each run of a page's fragment (`_publish_after_fragment`), which app.py's own call does not follow.

    A tab publishes only a view it has not published yet: of a teacher's two tabs (projector and laptop), the one
    used last leads, and a rerun the server asks of the other (its count, on an answer) moves nothing."""
    try:
        teacher = teachers_class()
        if teacher is None or st.session_state.get(PUBLISHED) == (teacher[0], view := view_of(page)):
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


def off_view(code: str, page: str) -> bool:
    """Whether this follower's own change (a widget, another page) took it off the teacher's view. Judged only
    when the page shows the class's latest version: a newer one is taken on the next run anyway."""
    version = ROOM.version(code)
    if version is None or version != st.session_state.get(APPLIED):
        return False
    _, view = ROOM.view(code)
    return view.page in SCRIPTS and view_of(page) != view


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
    code = class_code()
    if code is None or teachers_class() is not None or st.session_state.get(DETACHED) or st.session_state.get(OFF_VIEW):
        return
    if PAGE in st.session_state and off_view(code, st.session_state[PAGE]):
        st.rerun(scope="app")


state.after_each_fragment(_publish_after_fragment)


def told(code: str, look: str, seen: object, fragment: bool = False) -> None:
    """The server reruns this session's page (or, `fragment`, the fragment drawing now) when the class's `look`
    leaves `seen` (live/push.py)."""
    rerun = streamlit_private.this_run(fragment)
    if rerun is not None:
        FOLLOWERS.drawn(student_id(), code, look, seen, rerun)


def not_told() -> None:
    """This session's page is rerun no more when its class moves (it left the class, or the class is gone)."""
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
    teacher = teachers_class()
    if teacher is not None:
        ROOM.end(*teacher)
        class_stream.CHANNEL.forget(teacher[0])
    if (session := streamlit_private.session_id()) is not None:
        TEACHERS.left(session)
    for key in (CLASS, TEACH, TEACHER_SEEN, ASKED, END_SURE, TAUGHT, OPEN_QUESTION, PUBLISHED):
        st.session_state.pop(key, None)


@errors.safe  # a callback: runs outside the page's guard
def lock_class(locked: bool) -> None:
    teacher = teachers_class()
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
    teacher = teachers_class()
    source = st.session_state.get(sidebar.CHOSEN, (None,))[0]
    if teacher is None or source is None:
        return
    try:
        card = source.ckpt.card if source.ckpt is not None else {}
        asked = _question(cache.analysed(source).analysis, st.session_state.get("class_kind", "attend"), page, card)
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
    n_queries = len(analysis.sublayer(attention, analysis.layers(attention)[0]).query_pieces)
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
    teacher = teachers_class()
    if teacher is not None:
        ROOM.reveal(*teacher, number)


@errors.safe  # a callback: runs outside the page's guard
def answer(number: int) -> None:
    code, choice = class_code(), st.session_state.get(f"class_pick_{number}")
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
