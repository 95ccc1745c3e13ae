"""A live class, in the server's memory: the teacher's view that students follow, and the questions they answer.

Plain Python (no streamlit), shared by every session of the server, which serves them on threads: every read and
write takes the one lock, and each holds it for a few dictionary operations. A class is known by its short code
(the students' `class=`); only its secret key (the teacher's `teach=`, compared in constant time) changes it.
A student is a random id made per browser session; an answer is the index of a choice the question offered, never
text, so nothing a student types reaches another's page.

Bounded: at most MAX_CLASSES classes, MAX_STUDENTS students answering in one, MAX_QUESTIONS questions kept (the
oldest goes first), MAX_CHOICES choices a question; a class that neither its teacher nor a student has touched for
IDLE_S seconds ends. The version number grows with each change students must see (the view, a question asked, an
answer revealed), so that a follower's poll reads one integer.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

MAX_CLASSES = 64
MAX_STUDENTS = 300
MAX_QUESTIONS = 50  # kept per class; asking one more forgets the oldest and its answers
MAX_CHOICES = 64
MAX_VIEW_CHARS = 50_000  # all of a view's values together: a text box's longest text is far less
IDLE_S = 3600.0
CODE_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I: read aloud and typed from a projector
CODE_LENGTH = 5
KINDS = ("attend", "head", "next")  # where will this query attend most · which head · what will the model predict


class ClassError(ValueError):
    """A one-line refusal a page shows as it is: no such class, a wrong key, a bound reached."""


@dataclass(frozen=True)
class View:
    """What the teacher's page shows, as students copy it: the page's address and its widget values by key."""

    page: str = ""
    values: tuple[tuple[str, object], ...] = ()

    @classmethod
    def of(cls, page: str, values: Mapping[str, object]) -> View:
        """A view of `page` with `values` (str, int, float, bool or None each), refused when too large."""
        kept = tuple(sorted(values.items()))
        for key, value in kept:
            if value is not None and not isinstance(value, str | int | float | bool):
                raise ClassError(f"the view's {key} is a {type(value).__name__}, not a plain value")
        if sum(len(str(v)) for _, v in kept) > MAX_VIEW_CHARS:
            raise ClassError(f"the view holds more than {MAX_VIEW_CHARS:,} characters: shorten the text")
        return cls(page, kept)


@dataclass(frozen=True)
class Question:
    """One question: what it asks, the choices offered (labels a page shows as text), the model's own answer
    (an index into `choices`), and whether the answers are revealed."""

    number: int  # counted from 1 within its class
    kind: str  # one of KINDS
    prompt: str
    choices: tuple[str, ...]
    model_answer: int
    revealed: bool = False


@dataclass
class _Class:
    code: str
    key: str
    touched: float
    version: int = 1
    view: View = field(default_factory=View)
    questions: dict[int, Question] = field(default_factory=dict)  # number → question, oldest first
    answers: dict[int, dict[str, int]] = field(default_factory=dict)  # number → student → choice
    students: set[str] = field(default_factory=set)
    asked: int = 0


class Classroom:
    """Every class of one server. `clock` is injectable for the idle-hour test."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._classes: dict[str, _Class] = {}

    def start(self) -> tuple[str, str]:
        """Open a new class: its code (for students) and its key (for the teacher only)."""
        with self._lock:
            self._end_idle()
            if len(self._classes) >= MAX_CLASSES:
                raise ClassError(f"this server already holds {MAX_CLASSES} classes: try again when one has ended")
            code = _new_code(self._classes)
            key = secrets.token_urlsafe(16)
            self._classes[code] = _Class(code, key, self._clock())
            return code, key

    def version(self, code: str) -> int | None:
        """The class's version (a follower's one-integer poll); None when there is no such class (or it ended)."""
        with self._lock:
            found = self._classes.get(code)
            return None if found is None or self._idle(found) else found.version

    def view(self, code: str) -> tuple[int, View]:
        """The class's version and the teacher's view."""
        with self._lock:
            found = self._find(code)
            return found.version, found.view

    def is_teacher(self, code: str, key: str) -> bool:
        """Whether `key` is the key of class `code` (which exists)."""
        with self._lock:
            found = self._classes.get(code)
            return found is not None and not self._idle(found) and _same(found.key, key)

    def show(self, code: str, key: str, view: View) -> int:
        """The teacher shows `view`: the version grows when it differs from the last. Returns the version."""
        with self._lock:
            found = self._teacher(code, key)
            if view != found.view:
                found.view = view
                found.version += 1
            return found.version

    def ask(self, code: str, key: str, kind: str, prompt: str, choices: tuple[str, ...], model_answer: int) -> int:
        """The teacher asks a question with `choices` that the model answers `model_answer`; returns its number."""
        if kind not in KINDS:
            raise ClassError(f"a question is one of {', '.join(KINDS)}, not {kind!r}")
        if not 2 <= len(choices) <= MAX_CHOICES:
            raise ClassError(f"a question offers 2 to {MAX_CHOICES} choices, not {len(choices)}")
        if not 0 <= model_answer < len(choices):
            raise ClassError(f"the model's answer {model_answer + 1} is not one of the {len(choices)} choices")
        with self._lock:
            found = self._teacher(code, key)
            found.asked += 1
            found.questions[found.asked] = Question(found.asked, kind, prompt, tuple(choices), model_answer)
            found.answers[found.asked] = {}
            while len(found.questions) > MAX_QUESTIONS:
                oldest = next(iter(found.questions))
                del found.questions[oldest], found.answers[oldest]
            found.version += 1
            return found.asked

    def reveal(self, code: str, key: str, number: int) -> None:
        """The teacher reveals question `number`'s answers to the class."""
        with self._lock:
            found = self._teacher(code, key)
            question = self._question(found, number)
            if not question.revealed:
                found.questions[number] = replace(question, revealed=True)
                found.version += 1

    def answer(self, code: str, student: str, number: int, choice: int) -> None:
        """Student `student` picks choice `choice` of question `number`: once, before the reveal."""
        with self._lock:
            found = self._find(code)
            question = self._question(found, number)
            if question.revealed:
                raise ClassError("the answers are already revealed: this question takes no more")
            if not 0 <= choice < len(question.choices):
                raise ClassError(f"choice {choice + 1} is not one of the question's {len(question.choices)}")
            given = found.answers[number]
            if student in given:
                raise ClassError("you have answered this question already: one answer each")
            if student not in found.students and len(found.students) >= MAX_STUDENTS:
                raise ClassError(f"this class has {MAX_STUDENTS} students answering already")
            found.students.add(student)
            given[student] = choice
            found.touched = self._clock()

    def question(self, code: str) -> Question | None:
        """The class's latest question, or None before the first."""
        with self._lock:
            found = self._find(code)
            return found.questions[found.asked] if found.asked in found.questions else None

    def counts(self, code: str, number: int) -> list[int]:
        """How many students picked each choice of question `number`."""
        with self._lock:
            found = self._find(code)
            question = self._question(found, number)
            counts = [0] * len(question.choices)
            for choice in found.answers[number].values():
                counts[choice] += 1
            return counts

    def answer_of(self, code: str, number: int, student: str) -> int | None:
        """The choice `student` picked on question `number`, or None."""
        with self._lock:
            found = self._find(code)
            self._question(found, number)
            return found.answers[number].get(student)

    def end(self, code: str, key: str) -> None:
        """The teacher ends the class: its code stops working and its answers are forgotten."""
        with self._lock:
            self._teacher(code, key)
            del self._classes[code]

    def __len__(self) -> int:
        with self._lock:
            self._end_idle()
            return len(self._classes)

    # Called with the lock held.
    def _idle(self, found: _Class) -> bool:
        return self._clock() - found.touched > IDLE_S

    def _end_idle(self) -> None:
        for code in [c for c, found in self._classes.items() if self._idle(found)]:
            del self._classes[code]

    def _find(self, code: str) -> _Class:
        found = self._classes.get(code)
        if found is None or self._idle(found):
            self._classes.pop(code, None)
            shown = code if len(code) <= CODE_LENGTH * 2 else f"{code[: CODE_LENGTH * 2]}…"
            raise ClassError(f"there is no class {shown} on this server: it has ended, or the code is mistyped")
        return found

    def _teacher(self, code: str, key: str) -> _Class:
        found = self._find(code)
        if not _same(found.key, key):
            raise ClassError("this link's teacher key is not the class's: only its teacher changes the class")
        found.touched = self._clock()
        return found

    @staticmethod
    def _question(found: _Class, number: int) -> Question:
        if number not in found.questions:
            raise ClassError(f"question {number} is not one this class holds")
        return found.questions[number]


def _same(expected: str, given: str) -> bool:
    """The key compared in constant time (its length aside), so that timing tells nothing of it."""
    return hmac.compare_digest(expected.encode("utf-8"), str(given).encode("utf-8", "replace"))


def _new_code(taken: Mapping[str, object]) -> str:
    while True:
        code = "".join(secrets.choice(CODE_LETTERS) for _ in range(CODE_LENGTH))
        if code not in taken:
            return code


def normal_code(text: str) -> str:
    """A typed or linked class code as the classroom keys it: upper case, without spaces; ValueError when it is
    not CODE_LENGTH of CODE_LETTERS (a link's parameter then is skipped, and the page says so)."""
    code = "".join(str(text).split()).upper()
    if len(code) != CODE_LENGTH or not set(code) <= set(CODE_LETTERS):
        raise ValueError(f"a class code is {CODE_LENGTH} letters and digits, such as ABC23")
    return code


CLASSROOM = Classroom()  # the server's own: every session of the process shares it
