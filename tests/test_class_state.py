"""The live class's state (live/rules.py): codes and keys, the followed view and its version, questions and
answers, the bounds and the idle hour, and many threads at once; each in the server's memory, in Redis's rules
(fakeredis) and in a real redis-server where one is installed (scripts/test.sh installs it), where two replicas
share one class."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import fakeredis
import pytest
from tied import tied

from live import rules as classroom
from live import store as class_store
from live.rules import ClassError, Classroom, View

STORES = ("memory", "fakeredis", "redis-server")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """A redis-server of this test run on a Unix socket (no port, nothing kept on disk)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; scripts/test.sh installs it)")
    folder = tmp_path_factory.mktemp("redis")
    socket = folder / "redis.sock"
    args = [
        binary,
        "--port",
        "0",
        "--unixsocket",
        str(socket),
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(folder),
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, preexec_fn=tied())
    deadline = time.monotonic() + 20
    while not socket.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
        time.sleep(0.05)
    yield f"unix://{socket}"
    proc.terminate()
    proc.wait(10)


def _replicas(request):
    """Makes a Classroom as each replica of one server sees it: the memory is one replica's own, the Redis ones
    share the store (a clock given, for the idle hour)."""
    if request.param == "memory":
        own = Classroom()
        yield lambda clock=None: own if clock is None else Classroom(clock)
        return
    if request.param == "fakeredis":
        server = fakeredis.FakeServer()
        yield lambda clock=time.time: Classroom.on_redis("redis://fake", fakeredis.FakeRedis(server=server), clock)
        return
    url = request.getfixturevalue("redis_server")
    import redis

    redis.Redis.from_url(url).flushdb()
    yield lambda clock=time.time: Classroom.on_redis(url, clock=clock)


replicas = pytest.fixture(params=STORES)(_replicas)
shared_replicas = pytest.fixture(params=STORES[1:])(_replicas)


@pytest.fixture
def room(replicas) -> Classroom:
    return replicas()


def test_a_class_has_a_short_readable_code_and_a_long_secret_key(room: Classroom) -> None:
    code, key = room.start()
    assert len(code) == classroom.CODE_LENGTH and set(code) <= set(classroom.CODE_LETTERS)
    assert len(key) >= 20 and key != code
    assert room.is_teacher(code, key) and not room.is_teacher(code, key[:-1] + "x")


def test_the_teachers_view_reaches_a_follower_with_a_new_version(room: Classroom) -> None:
    code, key = room.start()
    first = room.version(code)
    view = View.of("math", {"layer": 2, "head": 0, "text": "The cat sat."})
    assert room.show(code, key, view) == first + 1
    assert room.view(code) == (first + 1, view)
    assert room.show(code, key, View.of("math", {"head": 0, "text": "The cat sat.", "layer": 2})) == first + 1


def test_a_wrong_key_is_refused_in_one_line_and_moves_nothing(room: Classroom) -> None:
    code, key = room.start()
    room.show(code, key, View.of("", {"layer": 1}))
    before = room.view(code)
    for act in (
        lambda k: room.show(code, k, View.of("lesson", {"layer": 3})),
        lambda k: room.ask(code, k, "head", "Which?", ("a", "b"), 0),
        lambda k: room.end(code, k),
    ):
        with pytest.raises(ClassError, match="teacher key") as refused:
            act("not-the-key")
        assert "\n" not in str(refused.value)
    assert room.view(code) == before and room.question(code) is None


def test_an_unknown_code_is_refused(room: Classroom) -> None:
    assert room.version("NOPE1") is None
    with pytest.raises(ClassError, match="no class NOPE1"):
        room.view("NOPE1")
    with pytest.raises(ClassError, match="no class"):
        room.answer("X" * 5000, "s", 1, 0)


def test_one_answer_per_student_per_question_and_the_counts(room: Classroom) -> None:
    code, key = room.start()
    number = room.ask(code, key, "attend", "Where?", ("a", "b", "c"), 2)
    room.answer(code, "s1", number, 2)
    room.answer(code, "s2", number, 0)
    with pytest.raises(ClassError, match="one answer each"):
        room.answer(code, "s1", number, 1)
    assert room.counts(code, number) == [1, 0, 1]
    assert room.answer_of(code, number, "s1") == 2 and room.answer_of(code, number, "s3") is None


def test_answers_are_choices_offered_never_anything_else(room: Classroom) -> None:
    code, key = room.start()
    number = room.ask(code, key, "next", "Next?", ("a", "b"), 0)
    for choice in (-1, 2):
        with pytest.raises(ClassError, match="not one of"):
            room.answer(code, "s", number, choice)
    with pytest.raises(ClassError, match="not one this class holds"):
        room.answer(code, "s", number + 1, 0)
    with pytest.raises(ClassError, match="2 to"):
        room.ask(code, key, "next", "Next?", ("only",), 0)
    with pytest.raises(ClassError, match="one of attend"):
        room.ask(code, key, "essay", "Write", ("a", "b"), 0)


def test_the_reveal_shows_once_and_closes_the_question(room: Classroom) -> None:
    code, key = room.start()
    number = room.ask(code, key, "head", "Which head?", ("L1 H1", "L1 H2"), 1)
    version = room.version(code)
    room.reveal(code, key, number)
    assert room.question(code).revealed and room.version(code) == version + 1
    room.reveal(code, key, number)
    assert room.version(code) == version + 1
    with pytest.raises(ClassError, match="already revealed"):
        room.answer(code, "late", number, 0)


def test_a_class_ends_when_its_teacher_has_been_away_and_the_teachers_page_keeps_it(replicas) -> None:
    clock = Clock()
    clock.now = time.time()
    room = replicas(clock)
    code, key = room.start()
    clock.now += classroom.TEACHER_AWAY_S - 1
    room.show(code, key, View.of("", {"layer": 1}))  # the teacher's page keeps it open
    clock.now += classroom.TEACHER_AWAY_S - 1
    assert room.version(code) is not None
    clock.now += 2
    assert room.sweep() == 1 and room.version(code) is None and len(room) == 0
    with pytest.raises(ClassError, match="ended"):
        room.show(code, key, View())


def test_classes_questions_and_students_are_bounded(monkeypatch: pytest.MonkeyPatch, room: Classroom) -> None:
    monkeypatch.setattr(classroom, "MAX_CLASSES", 3)
    monkeypatch.setattr(classroom, "MAX_STUDENTS", 2)
    monkeypatch.setattr(classroom, "MAX_QUESTIONS", 2)
    code, key = room.start("10.0.0.1")
    room.start("10.0.0.2"), room.start("10.0.0.3")
    with pytest.raises(ClassError, match="server already holds 3 classes"):
        room.start("10.0.0.4")
    numbers = [room.ask(code, key, "head", f"Q{i}", ("a", "b"), 0) for i in range(3)]
    with pytest.raises(ClassError, match="not one this class holds"):
        room.counts(code, numbers[0])  # the oldest went
    room.answer(code, "s1", numbers[2], 0)
    room.answer(code, "s2", numbers[2], 1)
    with pytest.raises(ClassError, match="2 students"):
        room.answer(code, "s3", numbers[2], 0)
    room.answer(code, "s1", numbers[1], 0)  # a student already in the class answers on
    with pytest.raises(ClassError, match="characters"):
        View.of("", {"text": "x" * (classroom.MAX_VIEW_CHARS + 1)})
    with pytest.raises(ClassError, match="plain value"):
        View.of("", {"layer": [1, 2]})


def test_many_sessions_at_once_lose_no_answer(room: Classroom) -> None:
    code, key = room.start()
    number = room.ask(code, key, "attend", "Where?", tuple("abcd"), 0)

    def student(i: int) -> None:
        for _ in range(50):
            room.version(code)
        room.answer(code, f"s{i}", number, i % 4)

    def teacher() -> None:
        for i in range(200):
            room.show(code, key, View.of("", {"layer": i}))

    threads = [threading.Thread(target=student, args=(i,)) for i in range(40)] + [threading.Thread(target=teacher)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert room.counts(code, number) == [10, 10, 10, 10]
    assert room.view(code)[1] == View.of("", {"layer": 199})


def test_a_typed_code_is_read_as_the_classroom_keys_it() -> None:
    assert classroom.normal_code(" ab c23 ") == "ABC23"
    for wrong in ("ABC1", "ABC234", "[x](y)"):
        with pytest.raises(ValueError, match="5 letters and digits"):
            classroom.normal_code(wrong)


def test_a_class_started_on_one_replica_is_followed_and_answered_on_another(shared_replicas) -> None:
    first, second = shared_replicas(), shared_replicas()
    code, key = first.start()
    assert second.is_teacher(code, key) and not second.is_teacher(code, "guessed")
    view = View.of("math", {"layer": 2, "text": "The cat sat."})
    version = first.show(code, key, view)
    assert second.version(code) == version and second.view(code) == (version, view)
    number = second.ask(code, key, "attend", "Where?", ("The", "cat", "sat"), 1)
    first.answer(code, "s1", number, 1)
    second.answer(code, "s2", number, 0)
    assert first.counts(code, number) == second.counts(code, number) == [1, 1, 0]
    assert first.answered(code) == (number, 2)
    second.reveal(code, key, number)
    assert first.question(code).revealed and first.answer_of(code, number, "s2") == 0
    first.end(code, key)
    assert second.version(code) is None and len(second) == 0


def test_an_unreachable_or_misnamed_store_is_said_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    room = Classroom.on_redis("redis://127.0.0.1:1/0")
    for call in (room.start, lambda: room.version("ABCDE"), lambda: room.show("ABCDE", "k", View())):
        with pytest.raises(ClassError, match=r"^the class is paused: its store does not answer") as raised:
            call()
        assert "\n" not in str(raised.value) and "redis" not in str(raised.value)  # no server address
    monkeypatch.setenv(class_store.ENV, "localhost:6379")
    with pytest.raises(ClassError, match="is a redis:// URL"):
        Classroom.from_environment()
    monkeypatch.delenv(class_store.ENV)
    assert isinstance(Classroom.from_environment()._store, class_store.MemoryStore)


def test_the_server_refuses_to_start_on_a_store_the_url_misnames() -> None:
    env = {"ATLAS_CLASS_STORE": "localhost:6379", "PATH": "/usr/bin:/bin"}
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "atlas", "app"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr.strip()
        == "atlas app: ATLAS_CLASS_STORE is a redis:// URL such as redis://127.0.0.1:6379/0, not 'localhost:6379'"
    )
