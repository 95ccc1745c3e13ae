"""A live class, in the server's memory: the teacher's view that students follow, and the questions they answer.

Plain Python (no streamlit), shared by every session of the server, which serves them on threads: every read and
write takes the one lock, and each holds it for a few dictionary operations. A class is known by its short code
(the students' `class=`); only its secret key (the teacher's `teach=`, compared in constant time) changes it.
A student is a random id made per browser session; an answer is the index of a choice the question offered, never
text, so nothing a student types reaches another's page.

Bounded: at most MAX_CLASSES classes, MAX_STUDENTS devices answering in one, MAX_QUESTIONS questions kept (the
oldest goes first), MAX_CHOICES choices a question; a class that neither its teacher nor a student has touched for
IDLE_S seconds ends, and so does one whose teacher has had no page open for TEACHER_AWAY_S (the open page
touches its class: live/heartbeat.py). Who starts a class: with a teacher password set, only
those who give it; without, one client address starts at most MAX_CLASSES_PER_ADDRESS live classes (students never
start one, so a school behind one NAT address is fine; an operator whose teachers share one address sets another
number in $ATLAS_CLASSES_PER_ADDRESS). A device (a browser's cookie) joins a class once; new
devices from one address come at most JOIN_BURST at once, then one each JOIN_EVERY_S; the teacher may lock the
class, after which a device that had not joined follows but does not answer. The version number grows with each
change students must see (the view, a question asked, an answer revealed), so that a follower's poll reads one
integer.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TypeVar

from live import store as class_store
from live.store import ClassError, MemoryStore, RedisStore

R = TypeVar("R")

MAX_CLASSES = 64
MAX_STUDENTS = 300
MAX_QUESTIONS = 50  # kept per class; asking one more forgets the oldest and its answers
MAX_CHOICES = 64
MAX_VIEW_CHARS = 50_000  # all of a view's values together: a text box's longest text is far less
IDLE_S = 3600.0
TEACHER_AWAY_S = 900.0  # no teacher's page open this long: the class ends and frees its starter's place
MAX_CLASSES_PER_ADDRESS = 3  # live classes one client address starts, without a teacher password
JOIN_BURST = 40  # new devices one address joins at once: a class of thirty behind one NAT address
JOIN_EVERY_S = 6.0  # then one more each 6 s: three hundred from one client take half an hour
CODE_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I: read aloud and typed from a projector
CODE_LENGTH = 5
PASSWORD_ENV = "ATLAS_TEACHER_PASSWORD"  # the teacher password, when the operator set one
PER_ADDRESS_ENV = "ATLAS_CLASSES_PER_ADDRESS"  # the operator's MAX_CLASSES_PER_ADDRESS, when set
KINDS = ("attend", "head", "next")  # where will this query attend most · which head · what will the model predict


def classes_per_address(environ: Mapping[str, str] = os.environ) -> tuple[int, str | None]:
    """The live classes one client address starts without a teacher password: $ATLAS_CLASSES_PER_ADDRESS (a whole
    number from 1 to MAX_CLASSES) or MAX_CLASSES_PER_ADDRESS; and why the variable's value is not one (the default
    is used then: `atlas app` refuses to start on it), or None."""
    raw = environ.get(PER_ADDRESS_ENV, "").strip()
    if not raw:
        return MAX_CLASSES_PER_ADDRESS, None
    if raw.isascii() and raw.isdigit() and 1 <= int(raw) <= MAX_CLASSES:
        return int(raw), None
    shown = raw if len(raw) <= 20 else raw[:20] + "…"
    return MAX_CLASSES_PER_ADDRESS, f"${PER_ADDRESS_ENV} is {shown!r}: it takes a whole number from 1 to {MAX_CLASSES}"


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
    shape: tuple[int, int] | None = None  # a head question's (layers, heads): its choices are the grid's cells by row
    scores: tuple[float, ...] = ()  # the model's measure for each choice (a head's induction score), when shown


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
    starter: str = ""  # the client address that started it
    teacher_seen: float = 0.0  # the last touch of the teacher's page (its heartbeat among them)
    devices: set[str] = field(default_factory=set)  # joined: each may answer
    locked: bool = False  # no new device joins
    joins: dict[str, list[float]] = field(default_factory=dict)  # address → [tokens left, when counted]


def _dumps(found: _Class) -> str:
    shown = {"students": sorted(found.students), "devices": sorted(found.devices)}
    return json.dumps(asdict(found) | shown, separators=(",", ":"))


def _loads(text: str) -> _Class:
    """A record as `_dumps` wrote it (JSON's keys are text: the questions' numbers come back as int); ValueError,
    KeyError or TypeError when it is not one (live/store.py names the class's record damaged)."""
    raw = json.loads(text)
    _check_types(raw)
    view = View(raw["view"]["page"], tuple((k, v) for k, v in raw["view"]["values"]))
    questions = {int(n): _question_of(q) for n, q in raw["questions"].items()}
    answers = {int(n): dict(given) for n, given in raw["answers"].items()}
    return _Class(
        raw["code"],
        raw["key"],
        raw["touched"],
        raw["version"],
        view,
        questions,
        answers,
        set(raw["students"]),
        raw["asked"],
        raw.get("starter", ""),
        raw.get("teacher_seen", raw["touched"]),
        set(raw.get("devices", ())),
        raw.get("locked", False),
        dict(raw.get("joins", {})),
    )


def _question_of(q: dict) -> Question:
    """A question as `_dumps` wrote it; a record written before `shape` and `scores` reads as a question of none."""
    shape = q.get("shape")
    kept = q | {"choices": tuple(q["choices"]), "shape": None if shape is None else tuple(shape)}
    question = Question(**(kept | {"scores": tuple(q.get("scores", ()))}))
    _check_grid(question.shape, question.scores, len(question.choices), TypeError)
    return question


def _check_grid(shape: object, scores: object, n_choices: int, error: type[Exception]) -> None:
    """`error` unless `shape` is None or (layers, heads) covering the choices, and `scores` none or one per choice."""
    if shape is not None:
        ints = isinstance(shape, tuple) and all(type(n) is int and n >= 1 for n in shape)
        if not (ints and len(shape) == 2 and shape[0] * shape[1] == n_choices):
            raise error(f"a grid of {n_choices} choices is no layers × heads of {shape!r}")
    number = (int, float)
    if not (isinstance(scores, tuple) and all(isinstance(x, number) and not isinstance(x, bool) for x in scores)):
        raise error("a question's scores are numbers")
    if scores and len(scores) != n_choices:
        raise error(f"a question of {n_choices} choices has {len(scores)} scores")


def _check_types(raw: object) -> None:
    """TypeError unless the parsed record's fields have the types `_dumps` writes (a number that is no bool)."""
    number = (int, float)
    fields = {"code": str, "key": str, "touched": number, "version": int, "asked": int, "view": dict}
    fields |= {"questions": dict, "answers": dict, "students": list}
    if not isinstance(raw, dict):
        raise TypeError("a record is a JSON object")
    for name, kind in fields.items():
        if not isinstance(raw[name], kind) or isinstance(raw[name], bool):
            raise TypeError(f"the record's {name} is a {type(raw[name]).__name__}")
    if not all(isinstance(c, int) and not isinstance(c, bool) for g in raw["answers"].values() for c in g.values()):
        raise TypeError("an answer is a choice's index")
    optional = {"starter": str, "teacher_seen": number, "devices": list, "joins": dict}
    for name, kind in optional.items():
        if name in raw and (not isinstance(raw[name], kind) or isinstance(raw[name], bool)):
            raise TypeError(f"the record's {name} is a {type(raw[name]).__name__}")
    if not isinstance(raw.get("locked", False), bool):
        raise TypeError("the record's locked is no true or false")
    if not all(isinstance(d, str) for d in raw.get("devices", ())):
        raise TypeError("a device is a text id")
    for bucket in raw.get("joins", {}).values():
        if not (isinstance(bucket, list) and len(bucket) == 2 and all(isinstance(x, number) for x in bucket)):
            raise TypeError("a join count is two numbers")


class Classroom:
    """Every class of one server, or of every replica sharing a store (live/store.py). `clock` is injectable
    for the idle-hour test; a shared store needs the wall clock that every replica reads alike."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        store: MemoryStore | RedisStore | None = None,
        password: str | None = None,
        per_address: int = MAX_CLASSES_PER_ADDRESS,
    ) -> None:
        """`password`: the teacher password the operator set (`atlas app --teacher-password-file`), or None;
        `per_address`: the live classes one client address starts without it."""
        self._clock = clock
        self._store = MemoryStore() if store is None else store
        self._password = password or None
        self._per_address = per_address

    @classmethod
    def from_environment(cls) -> Classroom:
        """This server's memory, or the Redis server $ATLAS_CLASS_STORE names (read by every replica)."""
        url, password = class_store.url_from_environment(), os.environ.get(PASSWORD_ENV) or None
        per_address, _ = classes_per_address()
        if url is None:
            return cls(password=password, per_address=per_address)
        return cls.on_redis(url, password=password, per_address=per_address)

    @classmethod
    def on_redis(
        cls,
        url: str,
        client: object = None,
        clock: Callable[[], float] = time.time,
        password: str | None = None,
        per_address: int = MAX_CLASSES_PER_ADDRESS,
    ) -> Classroom:
        """The classes every replica shares, in the Redis server at `url` (or `client`, a test's fakeredis)."""
        return cls(clock, RedisStore(url, _dumps, _loads, IDLE_S, client=client), password, per_address)

    @property
    def needs_password(self) -> bool:
        """Whether starting a class asks for the teacher password."""
        return self._password is not None

    def start(self, address: str = "", password: str = "") -> tuple[str, str]:
        """Open a new class started from client `address` (given `password` when the server has one): its code
        (for students) and its key (for the teacher only)."""
        if self._password is not None and not _same(self._password, password):
            raise ClassError("that is not the teacher password: ask whoever runs this server")
        self.sweep()
        if self._password is None:
            # Two starts at the same instant from one address may both pass; MAX_CLASSES still bounds them all.
            if self._store.started(address, self._alive()) >= self._per_address:
                raise ClassError(
                    f"this address already runs {self._per_address} classes: end one first (a class whose "
                    f"teacher's page has been closed {TEACHER_AWAY_S / 60:.0f} minutes ends by itself)"
                )
        key, now = secrets.token_urlsafe(16), self._clock()
        made = self._store.add(
            lambda taken: _Class(_new_code(taken), key, now, starter=address, teacher_seen=now),
            MAX_CLASSES,
            self._alive(),
        )
        if made is None:
            raise ClassError(f"this server already holds {MAX_CLASSES} classes: try again when one has ended")
        return made.code, key

    def version(self, code: str) -> int | None:
        """The class's version (a follower's one-integer poll); None when there is no such class (or it ended)."""
        stamp = self._store.stamp(code)
        return None if stamp is None or stamp[1] < self._alive() else stamp[0]

    def view(self, code: str) -> tuple[int, View]:
        """The class's version and the teacher's view."""
        return self._read(code, lambda found: (found.version, found.view))

    def is_teacher(self, code: str, key: str) -> bool:
        """Whether `key` is the key of class `code` (which exists)."""
        found = self._store.read(code, lambda found: found)
        return found is not None and not self._idle(found) and _same(found.key, key)

    def show(self, code: str, key: str, view: View) -> int:
        """The teacher shows `view`: the version grows when it differs from the last. Returns the version."""

        def change(found: _Class) -> int:
            if view != found.view:
                found.view = view
                found.version += 1
            return found.version

        return self._teach(code, key, change)

    def ask(
        self,
        code: str,
        key: str,
        kind: str,
        prompt: str,
        choices: tuple[str, ...],
        model_answer: int,
        shape: tuple[int, int] | None = None,
        scores: tuple[float, ...] = (),
    ) -> int:
        """The teacher asks a question with `choices` that the model answers `model_answer`; returns its number.
        `shape`: (layers, heads) when the choices are a grid's cells row by row; `scores`: one per choice."""
        if kind not in KINDS:
            raise ClassError(f"a question is one of {', '.join(KINDS)}, not {kind!r}")
        if not 2 <= len(choices) <= MAX_CHOICES:
            raise ClassError(f"a question offers 2 to {MAX_CHOICES} choices, not {len(choices)}")
        if not 0 <= model_answer < len(choices):
            raise ClassError(f"the model's answer {model_answer + 1} is not one of the {len(choices)} choices")
        shape = None if shape is None else tuple(shape)
        _check_grid(shape, tuple(scores), len(choices), ClassError)

        def change(found: _Class) -> int:
            found.asked += 1
            found.questions[found.asked] = Question(
                found.asked, kind, prompt, tuple(choices), model_answer, shape=shape, scores=tuple(scores)
            )
            found.answers[found.asked] = {}
            while len(found.questions) > MAX_QUESTIONS:
                oldest = next(iter(found.questions))
                del found.questions[oldest], found.answers[oldest]
            found.version += 1
            return found.asked

        return self._teach(code, key, change)

    def reveal(self, code: str, key: str, number: int) -> None:
        """The teacher reveals question `number`'s answers to the class."""

        def change(found: _Class) -> None:
            question = self._question(found, number)
            if not question.revealed:
                found.questions[number] = replace(question, revealed=True)
                found.version += 1

        self._teach(code, key, change)

    def answer(self, code: str, student: str, number: int, choice: int) -> None:
        """Student `student` picks choice `choice` of question `number`: once, before the reveal."""

        def change(found: _Class | None) -> None:
            found = self._find(code, found)
            question = self._question(found, number)
            if question.revealed:
                raise ClassError("the answers are already revealed: this question takes no more")
            if not 0 <= choice < len(question.choices):
                raise ClassError(f"choice {choice + 1} is not one of the question's {len(question.choices)}")
            if found.locked and student not in found.devices:
                raise ClassError("the class is locked: this device follows the teacher but does not answer")
            given = found.answers[number]
            if student in given:
                raise ClassError("you have answered this question already: one answer each")
            if student not in found.students and len(found.students) >= MAX_STUDENTS:
                raise ClassError(f"this class has {MAX_STUDENTS} students answering already")
            found.students.add(student)
            given[student] = choice
            found.touched = self._clock()

        self._store.update(code, change)

    def answered(self, code: str) -> tuple[int, int] | None:
        """The latest question's number and how many answered it (what the teacher's count shows; 0 before the
        first question); None when there is no such class."""
        found = self._store.read(code, lambda found: found)
        if found is None or self._idle(found):
            return None
        return found.asked, len(found.answers.get(found.asked, {}))

    def question(self, code: str) -> Question | None:
        """The class's latest question, or None before the first."""
        return self._read(code, lambda found: found.questions.get(found.asked))

    def counts(self, code: str, number: int) -> list[int]:
        """How many students picked each choice of question `number`."""

        def use(found: _Class) -> list[int]:
            counts = [0] * len(self._question(found, number).choices)
            for choice in found.answers[number].values():
                counts[choice] += 1
            return counts

        return self._read(code, use)

    def answer_of(self, code: str, number: int, student: str) -> int | None:
        """The choice `student` picked on question `number`, or None."""

        def use(found: _Class) -> int | None:
            self._question(found, number)
            return found.answers[number].get(student)

        return self._read(code, use)

    def end(self, code: str, key: str) -> None:
        """The teacher ends the class: its code stops working and its answers are forgotten."""
        self._teach(code, key, lambda found: None)
        self._store.mark_ended(code)  # first: a teacher's other tab must not put it back (`restore`)
        self._store.remove(code)

    def seen(self, code: str, key: str) -> None:
        """The teacher's page is open (its heartbeat): the class does not end for its teacher's absence."""
        self._teach(code, key, lambda found: None)

    def sweep(self) -> int:
        """End every class whose teacher has been away TEACHER_AWAY_S; returns how many ended."""
        away = [found.code for found in self._store.alive(self._alive()) if self._idle(found)]
        for code in away:
            self._store.remove(code)
        return len(away)

    def join(self, code: str, device: str, address: str) -> None:
        """Device `device` from client `address` joins class `code` (once: again is nothing), so that it may answer;
        refused when the class is locked or full, or when `address` has joined too many new devices just now."""
        now = self._clock()

        def change(found: _Class | None) -> None:
            found = self._find(code, found)
            if device in found.devices:
                return
            if found.locked:
                raise ClassError("the class is locked: this device follows the teacher but does not answer")
            if len(found.devices) >= MAX_STUDENTS:
                raise ClassError(f"this class has {MAX_STUDENTS} devices joined already: this one follows")
            tokens, counted = found.joins.get(address, (JOIN_BURST, now))
            tokens = min(JOIN_BURST, tokens + (now - counted) / JOIN_EVERY_S)
            if tokens < 1:
                raise ClassError("too many new devices from one address just now: reload this page in a minute")
            found.joins[address] = [tokens - 1, now]
            found.devices.add(device)

        self._store.update(code, change)

    def joined(self, code: str, device: str) -> bool:
        """Whether `device` has joined class `code`."""
        return self._read(code, lambda found: device in found.devices)

    def devices(self, code: str) -> tuple[int, bool]:
        """How many devices joined class `code`, and whether it is locked."""
        return self._read(code, lambda found: (len(found.devices), found.locked))

    def lock(self, code: str, key: str, locked: bool = True) -> None:
        """The teacher locks the class (no new device joins: those who have, answer) or opens it again."""

        def change(found: _Class) -> None:
            found.locked = locked

        self._teach(code, key, change)

    def ended(self, code: str) -> bool:
        """Whether class `code`'s teacher ended it (within the last store.ENDED_S): pages say "ended" only then, or
        when it idled out; a class missing otherwise is paused (its store lost it, and its teacher puts it back)."""
        return self._store.ended(code)

    def ends_at(self, code: str) -> float | None:
        """When class `code` ends idle unless it is touched before, on this classroom's clock; None: no class."""
        stamp = self._store.stamp(code)
        return None if stamp is None else stamp[1] + IDLE_S

    def idled_out(self, ends_at: float) -> bool:
        """Whether a class that was to end idle at `ends_at` (read while it was there) has ended."""
        return self._clock() > ends_at

    def restore(self, code: str, key: str, view: View, question: Question | None) -> bool:
        """Put class `code` back, with its key, `view` and open `question` (what its teacher's page holds), when the
        store lost it (restarted empty) or holds it damaged; its answers start again. Whether it did: not when the
        class is there, its teacher ended it, or the store holds MAX_CLASSES."""
        # A version no page has drawn: above any the lost record reached (one a change, fewer than one a millisecond).
        now = self._clock()
        found = _Class(code, key, now, version=max(1, int(now * 1000)), view=view, teacher_seen=now)
        if question is not None:
            found.questions, found.answers, found.asked = (
                {question.number: question},
                {question.number: {}},
                question.number,
            )
        return self._store.restore(found, MAX_CLASSES, self._alive())

    def __len__(self) -> int:
        return self._store.count(self._alive())

    def _alive(self) -> float:
        """The earliest last touch of a class that has not ended idle."""
        return self._clock() - IDLE_S

    def _idle(self, found: _Class) -> bool:
        return found.touched < self._alive() or found.teacher_seen < self._clock() - TEACHER_AWAY_S

    def _read(self, code: str, use: Callable[[_Class], R]) -> R:
        return self._store.read(code, lambda found: use(self._find(code, found)))

    def _teach(self, code: str, key: str, change: Callable[[_Class], R]) -> R:
        """`change` made by the class's teacher (the key checked first), which keeps the class from its idle end."""

        def checked(found: _Class | None) -> R:
            found = self._find(code, found)
            if not _same(found.key, key):
                raise ClassError("this link's teacher key is not the class's: only its teacher changes the class")
            found.touched = found.teacher_seen = self._clock()
            return change(found)

        return self._store.update(code, checked)

    def _find(self, code: str, found: _Class | None) -> _Class:
        if found is None or self._idle(found):
            shown = code if len(code) <= CODE_LENGTH * 2 else f"{code[: CODE_LENGTH * 2]}…"
            raise ClassError(f"there is no class {shown} on this server: it has ended, or the code is mistyped")
        return found

    @staticmethod
    def _question(found: _Class, number: int) -> Question:
        if number not in found.questions:
            raise ClassError(f"question {number} is not one this class holds")
        return found.questions[number]

    def tally(self, code: str) -> tuple[tuple[Question, tuple[int, ...]], ...]:
        """Every question the class keeps, oldest first, each with how many students picked each of its choices
        (what the teacher downloads; read-only)."""

        def use(found: _Class) -> tuple[tuple[Question, tuple[int, ...]], ...]:
            kept = []
            for number in sorted(found.questions):
                counts = [0] * len(found.questions[number].choices)
                for choice in found.answers.get(number, {}).values():
                    counts[choice] += 1
                kept.append((found.questions[number], tuple(counts)))
            return tuple(kept)

        return self._read(code, use)


def _same(expected: str, given: str) -> bool:
    """The key compared in constant time (its length aside), so that timing tells nothing of it."""
    return hmac.compare_digest(expected.encode("utf-8"), str(given).encode("utf-8", "replace"))


def _new_code(taken: Collection[str]) -> str:
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
