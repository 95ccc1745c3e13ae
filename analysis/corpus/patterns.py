"""Custom patterns for a corpus run: `python -m atlas corpus … --pattern NAME=SOURCE`, or atlas.corpus(patterns=…).

A custom pattern is a function of one text's pieces (its tokens as the model reads them, the start token first)
that returns that text's (T, T) pattern over query × key positions: 1 (or a weight up to 1) where the pattern says
to look, as analysis.detectors draws its own. Each head's score for it is the share of its attention there, the
mean over texts — what `atlas.detect_heads(model, texts, function)` gives on the same texts.

SOURCE names the function: `MODULE:FUNCTION` (a module Python imports) or `PATH.py:FUNCTION` (a file). A run keeps
each pattern's name, source and the SHA-256 of the code it ran in its manifest: started again, a run resumes only
with the same code (a changed file is another corpus). A name is the score's column: lower-case letters, digits and
`_`, starting with a letter, and none of the built-in scores' or the tables' own columns.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.corpus.texts import CorpusError
from analysis.detectors import PATTERNS

NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
# the built-in scores and the other columns of the tables a score's column sits in (heads, text_heads)
RESERVED = frozenset({*(p.replace(" ", "_") for p in PATTERNS), "entropy", "attention", "layer", "head", "text"})


@dataclass(frozen=True)
class CustomPattern:
    """One custom pattern: its `name` (the score's column), where its `function` came from (`source`: "" for a
    function given as is, which only this process can run) and the SHA-256 of its code."""

    name: str
    source: str
    digest: str
    function: Callable[[list[str]], object]

    def identity(self) -> dict[str, str]:
        """What a resumed run must share with this one."""
        return {"name": self.name, "source": self.source, "sha256": self.digest}


def check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise CorpusError(
            f"--pattern: {name!r} is not a pattern name: lower-case letters, digits and _, from a letter, at most 40"
        )
    if name in RESERVED:
        raise CorpusError(f"--pattern: {name!r} is a column of the corpus's own: choose another name")
    return name


def parse(spec: str) -> CustomPattern:
    """`NAME=MODULE:FUNCTION` or `NAME=PATH.py:FUNCTION`, loaded; each way it is wrong is one CorpusError line."""
    name, equals, source = spec.partition("=")
    target, colon, attribute = source.rpartition(":")
    if not equals or not colon or not target or not attribute:
        raise CorpusError(f"--pattern {spec!r}: write NAME=MODULE:FUNCTION or NAME=PATH.py:FUNCTION")
    check_name(name)
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target).expanduser().resolve()
        digest = _file_digest(spec, path)
        module = _from_file(spec, path, digest)
        source = f"{path}:{attribute}"
    else:
        module = _from_module(spec, target)
        file = getattr(module, "__file__", None)
        digest = _file_digest(spec, Path(file)) if file else hashlib.sha256(target.encode()).hexdigest()
    function = getattr(module, attribute, None)
    if function is None:
        raise CorpusError(f"--pattern {spec!r}: {target} has no {attribute!r}")
    if not callable(function):
        raise CorpusError(f"--pattern {spec!r}: {target}'s {attribute!r} is not a function")
    return CustomPattern(name, source, digest, function)


def from_function(name: str, function: Callable[[list[str]], object]) -> CustomPattern:
    """A function given as is (from atlas.corpus): its source is its module and name when that module gives the
    same function back (so Ray's workers can import it), else ""; its digest, of its source code."""
    check_name(name)
    if not callable(function):
        raise CorpusError(f"pattern {name!r}: give a function of a text's pieces, not {type(function).__name__}")
    module, qualname = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
    found = sys.modules.get(module) if module and module != "__main__" else None
    source = f"{module}:{qualname}" if found is not None and getattr(found, qualname, None) is function else ""
    try:
        code = inspect.getsource(function).encode("utf-8")
    except (OSError, TypeError):  # no source to read (a lambda typed at a prompt, a builtin): its bytecode
        code = getattr(getattr(function, "__code__", None), "co_code", repr(function).encode())
    return CustomPattern(name, source, hashlib.sha256(code).hexdigest(), function)


def load(patterns: Sequence[str] | Mapping[str, str | Callable] | None) -> tuple[CustomPattern, ...]:
    """The patterns of a run: specs (the command's), or a mapping name → source or function (atlas.corpus's)."""
    if not patterns:
        return ()
    if isinstance(patterns, Mapping):
        loaded = [parse(f"{n}={f}") if isinstance(f, str) else from_function(n, f) for n, f in patterns.items()]
    elif isinstance(patterns, str):
        raise CorpusError("patterns: a list of NAME=SOURCE, or a mapping of name to function, not one string")
    else:
        loaded = [parse(spec) for spec in patterns]
    names = [p.name for p in loaded]
    if len(set(names)) < len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise CorpusError(f"--pattern: {twice!r} is named twice: give each pattern its own name")
    return tuple(loaded)


def by_source(named: Sequence[tuple[str, str]]) -> tuple[CustomPattern, ...]:
    """The patterns again from their (name, source) pairs, as a Ray worker loads them."""
    return tuple(parse(f"{name}={source}") for name, source in named)


def drawn(pattern: CustomPattern, pieces: list[str], text: int) -> np.ndarray:
    """The pattern's (T, T) array for one text (number `text`, from 1), checked: one CorpusError line otherwise."""
    n = len(pieces)
    where = f"--pattern {pattern.name} on text {text}"
    try:
        values = pattern.function(list(pieces))
    except Exception as exc:  # the researcher's code: whatever it raises is one line that names it
        raise CorpusError(f"{where}: the function raised {type(exc).__name__}: {_first_line(exc)}") from None
    try:
        array = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError):
        raise CorpusError(f"{where}: the function returned {type(values).__name__}, not a {n} × {n} array") from None
    if array.shape != (n, n):
        raise CorpusError(f"{where}: the function returned shape {array.shape}, not ({n}, {n}): one row a piece")
    if not np.isfinite(array).all() or array.min(initial=0) < 0 or array.max(initial=0) > 1:
        raise CorpusError(f"{where}: the pattern holds values outside 0 to 1 (or NaN): 1 where to look, else 0")
    return array


def _from_file(spec: str, path: Path, digest: str):
    name = "atlas_pattern_" + hashlib.sha256(f"{path}:{digest}".encode()).hexdigest()[:16]  # changed: another
    if name in sys.modules:
        return sys.modules[name]
    found = importlib.util.spec_from_file_location(name, path)
    if found is None or found.loader is None:
        raise CorpusError(f"--pattern {spec!r}: {path}: not a Python file")
    module = importlib.util.module_from_spec(found)
    try:
        found.loader.exec_module(module)
    except Exception as exc:  # a file of the researcher's: its error in one line
        why = f"{type(exc).__name__}: {_first_line(exc)}"
        raise CorpusError(f"--pattern {spec!r}: {path} fails to run: {why}") from None
    sys.modules[name] = module
    return module


def _from_module(spec: str, target: str):
    try:
        return importlib.import_module(target)
    except Exception as exc:  # ModuleNotFoundError, or the module's own error when imported
        why = f"{type(exc).__name__}: {_first_line(exc)}"
        raise CorpusError(f"--pattern {spec!r}: cannot import {target}: {why}") from None


def _file_digest(spec: str, path: Path) -> str:
    if not path.is_file():
        raise CorpusError(f"--pattern {spec!r}: {path}: no such file")
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise CorpusError(f"--pattern {spec!r}: {path}: cannot read it ({exc.strerror})") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]
