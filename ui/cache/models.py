"""The server's models, shared by every browser session: a checkpoint loaded once, one model worker per checkpoint
(and per training snapshot looked at), the checkpoints folder's listing, and the session each call is made for.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import numpy as np
import streamlit as st

from analysis.analyze import positional_table as model_positional_table
from analysis.lanes import PAGES
from analysis.worker import ModelWorker
from inference import catalog
from inference.checkpoint import Checkpoint, load_checkpoint
from inference.memory import BUDGET, measured_bytes
from inference.snapshots import Snapshot, list_snapshots, load_snapshot
from ui.kept import kept
from ui.streamlit_private import run_yield_check, session_id

T = TypeVar("T")
TOP_K = 5  # the predictions kept per position
MAX_TOKENS = 64  # what a translator writes for the pages (the worker's default): its analysis, ablation, one head


BUDGET.owner = session_id  # what a page's work keeps counts in its session's share of the byte budget


@contextmanager
def page_running(first: bool = False) -> Iterator[None]:
    """Around a page's run: this session is drawing a page, which heavy work leaves room for (analysis.lanes);
    `first`: a live class's page (its teacher's or a follower's), which no heavy chunk starts beside."""
    with PAGES.running(session_id(), first):
        yield


def heavy_chunk(worker: ModelWorker, fn: Callable[..., T], *args: object, tokens: int = 0) -> T:
    """`fn(checkpoint, *args)`, a chunk of long work, in this session's heavy lane of the worker (analysis.worker:
    the class's pages go first, the heavy sessions share the rest). Dropped unrun when this session stops waiting:
    it left, pressed Cancel or changed a widget (Streamlit then stops the page's run at this wait)."""
    return worker.call(fn, *args, tokens=tokens, heavy=True, waiting=run_yield_check())


@st.cache_resource(max_entries=4, show_spinner="Loading the model…")
def load_model(path: str, stamp: float) -> Checkpoint:
    """Load a checkpoint once per (path, modification time), its bytes charged to the server's budget while it is
    loaded (inference.memory); raises CheckpointError."""
    ckpt = load_checkpoint(path)
    BUDGET.charge(ckpt, measured_bytes(ckpt.model))
    return ckpt


def _stop(worker: ModelWorker) -> None:
    worker.stop()


@st.cache_resource(max_entries=4, show_spinner=False, on_release=_stop)
def model_worker(path: str, stamp: float) -> ModelWorker:
    """The worker that runs this checkpoint's model for every session (analysis.worker: a thread for the pages'
    light work, batching requests made at once, and a lower-priority one for heavy chunks). Owned by the cache:
    evicted or cleared, it is stopped (its threads end, what it kept is dropped)."""
    return ModelWorker(load_model(path, stamp), owner=session_id)


def checkpoints(root: Path) -> list[catalog.Entry]:
    """The checkpoints under `root` (catalog.list_checkpoints), read again only when the folder's stamp changes; with
    the installed model packages when `catalog.pretrained_listed` says so, which is part of the key: a list made
    without them is never served where they are listed (else a page asked for SmolLM2 could be drawn with another
    model)."""
    return checkpoint_entries(str(root), folder_stamp(root), catalog.pretrained_listed(root))


@st.cache_resource(max_entries=4, show_spinner=False)
def checkpoint_entries(root: str, stamp: tuple, packages: bool) -> list[catalog.Entry]:
    """The checkpoints under `root`, read again only when a folder's stamp changes (catalog.folder_stamp)."""
    return catalog.list_checkpoints(Path(root), packages)


STAMP_FRESH_S = 1.0  # a checkpoint replaced in place is seen within this
_STAMPS: dict[str, tuple[float, int, tuple]] = {}  # folder → (when stamped, the folder's own mtime, its stamp)
_STAMPS_LOCK = threading.Lock()


def folder_stamp(root: Path, clock: Callable[[], float] = time.monotonic) -> tuple:
    """catalog.folder_stamp of `root`, taken at most once every STAMP_FRESH_S for the whole server, and again at
    once when the folder itself changes (a checkpoint added, removed or renamed changes its mtime). It is a few
    hundred stat calls: every run of every page took it, 30 followers of a class 30 times for one move.
    A checkpoint's files replaced in place show within STAMP_FRESH_S (its model's own stamp, catalog.stamp, is
    exact: the weights are never stale)."""
    try:
        mtime = root.stat().st_mtime_ns
    except OSError:
        mtime = -1
    now = clock()
    with _STAMPS_LOCK:
        held = _STAMPS.get(str(root))
    if held is not None and held[1] == mtime and now - held[0] < STAMP_FRESH_S:
        return held[2]
    stamp = catalog.folder_stamp(root)
    with _STAMPS_LOCK:
        if len(_STAMPS) >= 16:  # folders a server reads: its own, and a test's few
            _STAMPS.clear()
        _STAMPS[str(root)] = (now, mtime, stamp)
    return stamp


@kept()
def snapshots(path: str, stamp: float) -> list[Snapshot]:
    """The checkpoint's training snapshots, earliest first ([] when it has none); raises CheckpointError."""
    return list_snapshots(path)


def _worker_bytes(worker: ModelWorker) -> int:
    return measured_bytes(worker.ckpt.model)  # its results are in stores of their own, counted there


@kept("Loading the weights of that training step…", size=_worker_bytes, on_evict=_stop)
def snapshot_worker(path: str, stamp: float, step: int) -> ModelWorker:
    """A worker for the checkpoint's model as it was at training step `step`, shared by every session; it keeps
    fewer results than the shipped model's worker (a snapshot is looked at, not explored). Its model's bytes count
    in the server's budget; evicted, it is stopped."""
    snapshot = load_snapshot(load_model(path, stamp), step)
    return ModelWorker(snapshot, pages_bytes=16 * 2**20, full_bytes=0, owner=session_id)


@kept()
def positional_table(path: str, stamp: float) -> np.ndarray:
    """The checkpoint's positional table (analysis.analyze.positional_table), read-only: every session shares it."""
    table = model_positional_table(load_model(path, stamp))
    table.flags.writeable = False
    return table


_heap_frozen = False


def freeze_heap_once() -> None:
    """On the process's first rerun, move every object alive (torch, pandas, plotly, Streamlit: the imports) out
    of the garbage collector's reach, so that a full collection walks only what reruns create. A module global:
    modules outlive reruns."""
    global _heap_frozen
    if not _heap_frozen:
        gc.freeze()
        _heap_frozen = True
