"""The live class's state (ui/classroom.py): codes and keys, the followed view and its version, questions and
answers, the bounds and the idle hour, and many threads at once."""

from __future__ import annotations

import threading

import pytest

from ui import classroom
from ui.classroom import ClassError, Classroom, View


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def room() -> Classroom:
    return Classroom()


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


def test_a_class_ends_after_an_idle_hour_and_activity_keeps_it() -> None:
    clock = Clock()
    room = Classroom(clock)
    code, key = room.start()
    clock.now = classroom.IDLE_S - 1
    room.show(code, key, View.of("", {"layer": 1}))  # the teacher's page keeps it open
    clock.now += classroom.IDLE_S - 1
    assert room.version(code) is not None
    clock.now += 2
    assert room.version(code) is None and len(room) == 0
    with pytest.raises(ClassError, match="ended"):
        room.show(code, key, View())


def test_classes_questions_and_students_are_bounded(monkeypatch: pytest.MonkeyPatch, room: Classroom) -> None:
    monkeypatch.setattr(classroom, "MAX_CLASSES", 3)
    monkeypatch.setattr(classroom, "MAX_STUDENTS", 2)
    monkeypatch.setattr(classroom, "MAX_QUESTIONS", 2)
    code, key = room.start()
    room.start(), room.start()
    with pytest.raises(ClassError, match="3 classes"):
        room.start()
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
