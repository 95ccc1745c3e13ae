"""A class's store at fault loses nothing: a real redis-server killed, hung (SIGSTOP), full or holding a damaged or
oversized record pauses the class in one line, and when it answers again the class resumes with its code, view
and open question (kept on disk, or put back by its teacher's page). Two teacher tabs: the one used last leads,
and an answer reruns no follower."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_app import APP, LM, ok
from tied import tied

from live import rules, store
from live.push import Followers
from live.rules import Classroom, View
from live.store import RecordError, StoreError
from ui import class_session, streamlit_private


class RedisServer:
    """A redis-server of one test on a Unix socket, its append-only file in the test's folder."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.socket = folder, folder / "redis.sock"
        self.url = f"unix://{self.socket}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (apt-get install redis-server; scripts/test.sh installs it)")
        self.socket.unlink(missing_ok=True)
        args = [binary, "--port", "0", "--unixsocket", str(self.socket), "--dir", str(self.folder), "--save", ""]
        args += ["--appendonly", "yes", "--appendfsync", "always"]  # as the deploy: a restart keeps the classes
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, preexec_fn=tied())
        self.wait_until(lambda: self.client().ping())

    def client(self):
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=1)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    @staticmethod
    def wait_until(ready, within_s: float = 20.0) -> None:
        deadline = time.monotonic() + within_s
        while True:
            try:
                if ready():
                    return
            except Exception:
                pass
            assert time.monotonic() < deadline, f"the state waited for did not come within {within_s} s"
            time.sleep(0.02)


pytestmark = pytest.mark.usefixtures("any_answer")  # lm-tiny: asked with the margins at their lowest


@pytest.fixture
def redis_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(store, "TIMEOUT_S", 1.0)  # a hung store is told within this, not the deploy's 2 s
    monkeypatch.setattr(store, "PAUSE_S", 0.0)  # each call asks the store (one test sets the pause)
    server = RedisServer(tmp_path)
    server.start()
    yield server
    if server.proc.poll() is None:
        server.signal(signal.SIGCONT)
        server.kill()


def a_class_with_a_question(room: Classroom) -> tuple[str, str]:
    code, key = room.start()
    room.show(code, key, View.of("explore", {"head": 2, "text": "The cat sat."}))
    room.ask(code, key, "attend", "Where does 'sat' attend?", ("The", "cat"), 1)
    return code, key


def test_a_killed_store_pauses_the_class_in_one_line_and_its_restart_resumes_it(redis_server) -> None:
    room = Classroom.on_redis(redis_server.url)
    code, key = a_class_with_a_question(room)
    room.answer(code, "s1", 1, 0)
    redis_server.kill()
    for call in (lambda: room.version(code), lambda: room.is_teacher(code, key), lambda: room.question(code)):
        with pytest.raises(StoreError) as raised:
            call()
        said = str(raised.value)
        assert said.startswith("the class is paused") and "\n" not in said and "sock" not in said
    redis_server.start()
    assert room.is_teacher(code, key) and room.question(code).prompt == "Where does 'sat' attend?"
    assert dict(room.view(code)[1].values)["head"] == 2 and room.counts(code, 1) == [1, 0]


def test_a_hung_store_pauses_the_class_within_its_timeout_and_resumes_when_it_goes_on(redis_server) -> None:
    room = Classroom.on_redis(redis_server.url)
    code, key = a_class_with_a_question(room)
    redis_server.signal(signal.SIGSTOP)
    with pytest.raises(StoreError, match="^the class is paused"):
        room.version(code)
    redis_server.signal(signal.SIGCONT)
    RedisServer.wait_until(lambda: room.version(code) is not None)
    assert room.question(code).number == 1


def test_after_a_hung_call_the_next_ones_fail_at_once_for_the_pause(redis_server, monkeypatch) -> None:
    """A page makes several calls: while the store is hung, only the first waits out its timeout."""
    monkeypatch.setattr(store, "PAUSE_S", 3600.0)
    room = Classroom.on_redis(redis_server.url)
    code, key = room.start()
    redis_server.signal(signal.SIGSTOP)
    with pytest.raises(StoreError, match="^the class is paused"):
        room.version(code)
    redis_server.signal(signal.SIGCONT)
    RedisServer.wait_until(lambda: redis_server.client().ping())
    with pytest.raises(StoreError, match="^the class is paused"):  # the store answers again; this process waits
        room.is_teacher(code, key)
    room._store._paused_until = 0.0  # the pause over
    assert room.is_teacher(code, key)


def test_a_full_store_pauses_a_change_in_one_line_and_keeps_what_it_holds(redis_server) -> None:
    room = Classroom.on_redis(redis_server.url)
    code, key = a_class_with_a_question(room)
    redis_server.client().config_set("maxmemory", 1)  # with the default noeviction: every write refused
    with pytest.raises(StoreError, match="^the class is paused"):
        room.show(code, key, View.of("explore", {"head": 3}))
    assert dict(room.view(code)[1].values)["head"] == 2


def test_a_class_the_store_lost_is_put_back_by_its_teacher_with_its_code_view_and_question(redis_server) -> None:
    room = Classroom.on_redis(redis_server.url)
    code, key = a_class_with_a_question(room)
    view, question = room.view(code)[1], room.question(code)
    redis_server.client().flushall()  # as a restart that kept nothing
    assert room.version(code) is None and not room.ended(code)
    assert room.restore(code, key, view, question)
    assert room.is_teacher(code, key) and room.view(code)[1] == view and room.question(code) == question
    assert not room.restore(code, key, View(), None)  # there: nothing replaced
    room.end(code, key)
    assert room.ended(code) and not room.restore(code, key, view, question)  # ended stays ended


DAMAGED = {
    "not JSON": {"record": b"{not json"},
    "bad UTF-8": {"record": b'{"code": "\xff"}'},
    "a list": {"record": b"[1, 2]"},
    "no key": {"record": b'{"code": "ABCDE"}'},
    "touched a word": {"touched": b"soon"},
    "touched not a number": {"touched": b"nan"},
    "version a word": {"version": b"\xff\xfe"},
}


WRONG_TYPES = {"touched": "soon", "version": True, "asked": None, "students": "s1", "answers": {"1": {"s1": "0"}}}


@pytest.mark.parametrize("damage", [*DAMAGED, *WRONG_TYPES], ids=[*DAMAGED, *(f"{k} mistyped" for k in WRONG_TYPES)])
def test_a_damaged_record_is_refused_and_named_and_its_teacher_mends_it(redis_server, damage: str) -> None:
    room = Classroom.on_redis(redis_server.url)
    code, key = a_class_with_a_question(room)
    view, question = room.view(code)[1], room.question(code)
    client = redis_server.client()
    if damage in WRONG_TYPES:  # JSON as the store wrote it, one field of the wrong type
        record = json.loads(client.hget(store.PREFIX + code, "record")) | {damage: WRONG_TYPES[damage]}
        client.hset(store.PREFIX + code, "record", json.dumps(record))
    else:
        client.hset(store.PREFIX + code, mapping=DAMAGED[damage])
    with pytest.raises(RecordError, match=f"^class {code}'s record is damaged"):
        room.version(code) is not None and room.is_teacher(code, key)
    assert room.restore(code, key, view, question)
    assert room.is_teacher(code, key) and room.question(code) == question


def test_a_record_one_byte_over_the_bound_is_refused_before_it_is_read(redis_server) -> None:
    room = Classroom.on_redis(redis_server.url)
    code, key = room.start()
    record = json.loads(redis_server.client().hget(store.PREFIX + code, "record"))
    record["view"]["values"] = [["text", ""]]
    text = json.dumps(record)
    record["view"]["values"] = [["text", "x" * (store.MAX_RECORD_BYTES - len(text))]]
    redis_server.client().hset(store.PREFIX + code, "record", json.dumps(record))
    assert room.is_teacher(code, key)  # at the bound: read
    record["view"]["values"] = [["text", "x" * (store.MAX_RECORD_BYTES - len(text) + 1)]]
    redis_server.client().hset(store.PREFIX + code, "record", json.dumps(record))
    with pytest.raises(RecordError, match="damaged"):
        room.is_teacher(code, key)


def test_the_largest_class_its_bounds_allow_fits_the_record_bound() -> None:
    found = rules._Class("ABCDE", "k" * 22, 1.0, view=View.of("explore", {"text": "😀" * rules.MAX_VIEW_CHARS}))
    students = [f"{n:016d}" for n in range(rules.MAX_STUDENTS)]  # as long as a student's id (token_urlsafe(12))
    choices = tuple(f"choice {n:57d}" for n in range(rules.MAX_CHOICES))
    for number in range(1, rules.MAX_QUESTIONS + 1):
        found.questions[number] = rules.Question(number, "attend", "p" * 500, choices, 0)
        found.answers[number] = {s: rules.MAX_CHOICES - 1 for s in students}
    found.students, found.asked = set(students), rules.MAX_QUESTIONS
    assert len(rules._dumps(found).encode("utf-8")) <= store.MAX_RECORD_BYTES


# The pages ------------------------------------------------------------------------------------------------------


@pytest.fixture
def start(good_dir: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))

    def make(**query: str) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params.update({"model": LM, **query})
        return ok(at.run())

    return make


def button(at: AppTest, key: str):
    return next(b for b in at.button if b.key == key)


def said(at: AppTest) -> list[str]:
    return [e.value for e in (*at.error, *at.warning)]


def test_pages_say_the_class_is_paused_in_one_line_and_it_resumes_with_its_code_and_question(
    start, redis_server, monkeypatch
) -> None:
    asked: list = []
    monkeypatch.setattr(
        streamlit_private, "rerun_session", lambda session, rerun, whole=False: asked.append(rerun) or True
    )
    room = Classroom.on_redis(redis_server.url)
    monkeypatch.setattr(class_session, "ROOM", room)
    looks = {"version": room.version, "answers": room.answered, "store": class_session._answers}
    monkeypatch.setattr(class_session, "FOLLOWERS", Followers(looks))
    teacher = start()
    ok(button(teacher, "class_start").click().run())
    code, key = teacher.query_params["class"], teacher.query_params["teach"]
    ok(button(teacher, "class_ask").click().run())
    question = class_session.ROOM.question(code)
    student = start(**{"class": code})
    redis_server.kill()
    for page in (teacher, student):
        ok(page.run())
        [line] = said(page)
        assert line.startswith("The class is paused") and "sock" not in line and "went wrong" not in line
        assert page.get("plotly_chart") or page.get("selectbox")  # the page itself drew
    assert teacher.session_state[class_session.TEACH] == key
    asked.clear()
    redis_server.start()
    RedisServer.wait_until(lambda: class_session.FOLLOWERS.tick() or asked)  # the server reruns the paused pages
    redis_server.client().flushall()  # it came back empty: the teacher's page puts the class back
    ok(student.run())
    assert any("paused" in line for line in said(student)) and not any("ended" in line for line in said(student))
    ok(teacher.run())
    assert not said(teacher) and room.is_teacher(code, key) and room.question(code) == question
    ok(student.run())
    assert not said(student) and "Class " + code in student.markdown[0].value.replace("*", "")
    teacher.checkbox(key=class_session.END_SURE).check().run()
    ok(button(teacher, "class_end").click().run())
    ok(student.run())
    assert said(student) == [f"Class {code} has ended."]


def test_two_teacher_tabs_the_last_used_leads_and_an_answer_reruns_no_follower(start, monkeypatch) -> None:
    asked: list = []
    monkeypatch.setattr(
        streamlit_private, "rerun_session", lambda session, rerun, whole=False: asked.append(rerun) or True
    )
    laptop = start()
    ok(button(laptop, "class_start").click().run())
    code, key = laptop.query_params["class"], laptop.query_params["teach"]
    projector = start(**{"class": code, "teach": key})
    student = start(**{"class": code})
    ok(projector.selectbox(key="head").select(2).run())
    ok(laptop.selectbox(key="head").select(3).run())  # used last: the class shows head 3
    ok(button(laptop, "class_ask").click().run())
    ok(student.run())
    class_session.FOLLOWERS.tick()
    version = class_session.ROOM.version(code)
    student.radio(key="class_pick_1").set_value(0)
    ok(button(student, "class_answer_1").click().run())
    asked.clear()
    ok(projector.run())  # the server's rerun of its count, on the answer
    ok(laptop.run())
    class_session.FOLLOWERS.tick()
    assert class_session.ROOM.version(code) == version and dict(class_session.ROOM.view(code)[1].values)["head"] == 3
    assert not [r for r in asked if not r.fragment_id]  # no follower's page rerun


def test_a_students_page_says_ended_only_when_the_class_idled_out_or_its_teacher_ended_it(start, monkeypatch) -> None:
    clock = Clock()
    room = Classroom(clock)
    monkeypatch.setattr(class_session, "ROOM", room)
    code, key = room.start()
    student = start(**{"class": code})
    clock.now += rules.IDLE_S + 1  # nobody touched it for the idle hour: it ended
    ok(student.run())
    assert said(student) == [f"Class {code} has ended."] and class_session.CLASS not in student.session_state
    code, key = room.start()
    student = start(**{"class": code})
    room._store.remove(code)  # lost, not ended
    ok(student.run())
    [line] = said(student)
    assert "paused" in line and "ended" not in line


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now
