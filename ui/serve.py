"""`python -m atlas app`: the app served warm.

Before the server answers anyone it runs the app's first page once in this process (Streamlit's own AppTest, on the
link `?model=NAME` when a model is named): the imports, the checkpoint, its model worker, the first forward pass and
Plotly's first figure are then paid for at start, not by the class that opens the teacher's link together. The
command is `streamlit run app.py` with the same arguments, in this process: the warm run goes between Streamlit
reading its configuration (the repository's file, then the flags) and its server starting, so it runs under the
server's own settings, and what it keeps lives where every session finds it (cached resources, the model workers,
module state).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from inference import catalog

APP = Path(__file__).resolve().parents[1] / "app.py"
WARM_TIMEOUT_S = 300  # the first page of the largest model on a slow laptop, with room
MAX_PASSWORD_BYTES = 1024


def warm(model: str | None = None, script: Path = APP) -> tuple[float, list[str]]:
    """Run the app's first page once in this process: (seconds it took, what the page showed as an error or raised)."""
    from streamlit.testing.v1 import AppTest

    # "missing ScriptRunContext" and "No runtime found" are true of this run, which has no server yet: not shown.
    names = [name for name in list(logging.root.manager.loggerDict) if name.startswith("streamlit")]
    loggers = [logging.getLogger(name) for name in names]
    levels = [one.level for one in loggers]
    for one in loggers:
        one.setLevel(logging.ERROR)
    try:
        start = time.perf_counter()
        page = AppTest.from_file(str(script), default_timeout=WARM_TIMEOUT_S)
        if model:
            page.query_params["model"] = model
        page.run()
        seconds = time.perf_counter() - start
    finally:
        for one, level in zip(loggers, levels, strict=True):
            one.setLevel(level)
    problems = [str(e.value) for e in page.error] + [str(e.message) for e in page.exception]
    return seconds, problems


def warm_then(run: Callable[..., None], model: str | None) -> Callable[..., None]:
    """Streamlit's `bootstrap.run`, preceded by the warm run (see the module's docstring)."""

    def run_warm(*args, **kwargs) -> None:
        print("Attention Atlas: running the first page once before serving…", flush=True)
        seconds, problems = warm(model)
        for problem in problems:
            print(f"  the first page showed: {problem}", flush=True)
        print(f"  ready in {seconds:.1f} s; starting the server.", flush=True)
        run(*args, **kwargs)

    return run_warm


def class_store_problem() -> tuple[str | None, str | None]:
    """(why the server cannot start, what its operator is told as it starts), each None when there is nothing to
    say. A store $ATLAS_CLASS_STORE misnames is refused: no wait makes it answer. A store that does not answer now
    is said and the server starts: a supervisor may start the replicas before the store, and pages work without
    it (the class says it is paused in one line until the store answers)."""
    from live.rules import ClassError, Classroom

    try:
        room = Classroom.from_environment()  # a misnamed store is refused as it is made, before any round trip
    except ClassError as exc:
        return str(exc), None
    try:
        len(room)
    except ClassError as exc:
        said = getattr(exc, "detail", str(exc))  # the operator's line names the store
        return None, f"{said}; serving anyway, the class paused until it answers (pages work without it)"
    return None, None


def teacher_password(path: str) -> tuple[str | None, str | None]:
    """The teacher password file's first line (the password) and None, or None and why it cannot be one."""
    file = Path(path).expanduser()
    try:
        if not file.is_file():
            return None, f"the teacher password file {path} is not a file"
        with file.open("rb") as opened:
            raw = opened.read(MAX_PASSWORD_BYTES + 1)
    except OSError as exc:
        return None, f"the teacher password file {path} cannot be read ({exc.strerror or type(exc).__name__})"
    if len(raw) > MAX_PASSWORD_BYTES:
        return None, f"the teacher password file {path} holds more than {MAX_PASSWORD_BYTES} bytes: one line is one"
    lines = raw.decode("utf-8", "replace").splitlines()
    password = lines[0].strip() if lines else ""
    if not password:
        return None, f"the teacher password file {path} is empty: its first line is the password"
    return password, None


def corpus_problem(folders: list[str]) -> str | None:
    """Why the --corpus `folders` cannot be shown (each a finished corpus, or a folder holding one or more), else
    None, with $ATLAS_CORPORA set to them for the Corpus page (analysis.corpus.store.profile_folders)."""
    from analysis.corpus.store import CORPORA_VAR, is_corpus, open_corpus
    from analysis.corpus.texts import CorpusError

    for given in folders:
        folder = Path(given).expanduser()
        if not folder.is_dir():
            return f"--corpus {given}: no such folder"
        inside = [folder] if is_corpus(folder) else [p for p in sorted(folder.iterdir()) if is_corpus(p)]
        if not inside:
            return f"--corpus {given}: holds no corpus: make one with `python -m atlas corpus MODEL TEXTS --out DIR`"
        for corpus in inside:
            try:
                open_corpus(corpus)
            except CorpusError as exc:
                return f"--corpus {given}: {exc}"
    joined = [str(Path(f).expanduser().resolve()) for f in folders]
    os.environ[CORPORA_VAR] = os.pathsep.join(filter(None, [*joined, os.environ.get(CORPORA_VAR, "")]))
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m atlas app",
        description="Start the app as a classroom server, its first page run once before it answers anyone.",
        epilog="Any other option goes to `streamlit run` (e.g. --server.port 8601); the repository's "
        ".streamlit/config.toml sets the rest.",
    )
    parser.add_argument("--model", help="the model a bare link opens, the class's (default: lm-english)")
    parser.add_argument(
        "--teacher-password-file",
        metavar="FILE",
        help="only who gives the password on this file's first line starts a class (or set $ATLAS_TEACHER_PASSWORD)",
    )
    parser.add_argument(
        "--corpus",
        action="append",
        metavar="DIR",
        help="a corpus folder (python -m atlas corpus … --out DIR), or a folder of them, for the Corpus page (again "
        "for more; or set $ATLAS_CORPORA)",
    )
    args, rest = parser.parse_known_args(argv)
    if args.corpus:
        problem = corpus_problem(args.corpus)
        if problem:
            print(f"atlas app: {problem}", file=sys.stderr)
            return 2
    if args.teacher_password_file:
        from live.rules import PASSWORD_ENV

        password, problem = teacher_password(args.teacher_password_file)
        if problem:
            print(f"atlas app: {problem}", file=sys.stderr)
            return 2
        os.environ[PASSWORD_ENV] = password  # read as the class's room is made (live/rules.py, from_environment)
    if args.model:
        names = [e.name for e in catalog.list_checkpoints() if e.ok]
        if args.model not in names:
            print(f"atlas app: no model “{args.model}” here; the models are: {', '.join(names)}", file=sys.stderr)
            return 2
        os.environ[catalog.MODEL_VAR] = args.model  # every session's first page reads it (ui/sidebar.py)
    from live.rules import classes_per_address

    _, refused = classes_per_address()
    if refused:
        print(f"atlas app: {refused}", file=sys.stderr)
        return 2
    refused, warning = class_store_problem()
    if refused:
        print(f"atlas app: {refused}", file=sys.stderr)
        return 2
    if warning:
        print(f"atlas app: {warning}", file=sys.stderr, flush=True)
    from streamlit.web import bootstrap, cli

    from ui import streamlit_private

    streamlit_private.serve_class_middleware()  # the device cookie and the followers' stream, before Streamlit's own

    bootstrap.run = warm_then(bootstrap.run, args.model)  # the CLI looks it up when it calls it
    return cli.main.main(args=["run", str(APP), *rest], prog_name="streamlit")
