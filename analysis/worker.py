"""One model worker per checkpoint: the only threads that run the model, batching what sessions ask at once.

A class typing at the same moment sends many texts within milliseconds. Each browser session's script runs in
its own thread; it submits its request and waits. The worker's light thread takes the first waiting request,
gathers those that arrive within `window` seconds (at most `max_batch`, at most `max_trace_bytes` of trace, and at
most `max_tokens` padded tokens: every row of a batch is as long as its longest, so one pasted page goes alone
instead of holding twenty sentences behind it), and runs them as one batch through `analyze_many`: one padded
greedy decoding and one padded traced forward pass instead of one per session. An encoder-decoder's batch is
gathered by its decoding's bound (`max_decode_tokens`), decoded at once (`decode_outputs`), then traced in as many
passes as the trace bound needs: the decoding's steps are what a batch shares best, and a traced pass of long texts
is what takes the memory. Padding masks make each result equal to analysing that text alone
(tests/test_worker.py). A batch that fails is run again one request at a time, so each session gets its own answer
or its own error, never a neighbour's.

The worker also keeps what it computed, least recently used out first, within bytes of its own and the server's
one budget (inference.memory): the pages' copy of each analysis (weights and masks, `Analysis.for_pages`) and, in
a smaller share, the full one (raw scores and V too, for the export), only when it was asked for. Cached objects
are shared by every session, never copied or
unpickled per rerun; their arrays are read-only. Two sessions asking for the same text at once wait on one run.

Fair work (one place for the whole server, analysis/lanes.py): each session's work waits in its own lane, light
(a class's sentences, one head's detail) or heavy (a long text, or a chunk of a job that runs many passes), and the
sessions are taken in turn. The worker has a thread for each kind: the light thread runs only light work, the heavy
thread a chunk only when no light work waits or runs, at a lower CPU priority (HEAVY_NICE, with the torch threads
it starts; Linux's nice is per thread), so that on a machine whose cores are busy a chunk under way takes the CPU
the light thread and the pages leave, not theirs. At most two passes run at once, a light one and a heavy one, each
within the trace bound below. A live class's pages go first (the lanes hold heavy chunks back while one is drawn,
and the chunk under way pauses at its next Python call, `_model_work`); while a class is live (a page of it drawn in
the last ACTIVE_S seconds) the chunks are cut to CLASS_CHUNK_TOKENS.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TypeVar

import torch

from analysis import lanes
from analysis.analyze import Request, analyze_many, decode_outputs
from analysis.lanes import (
    ACTIVE_S,
    CLASS_GRACE_S,
    CLASS_HOLD_S,
    HOLD_POLL_S,
    MOST_HEAVY_WAIT_S,
    PAGES,
    STOP,
    Item,
    Lanes,
    Owner,
    Pages,
)
from analysis.record import Analysis
from inference.checkpoint import Checkpoint
from inference.decoding import Sampling
from inference.memory import ByteCache, give_back
from inference.text import InputError

# The worker's names, and the lanes' (analysis/lanes.py) that callers have imported from here. PAGES is read
# where it lives, as lanes.PAGES: a test's own Pages goes there.
__all__ = [
    "ACTIVE_S",
    "BATCH_TOKENS",
    "BATCH_TRACE_BYTES",
    "CHUNK_TOKENS",
    "CLASS_CHUNK_TOKENS",
    "CLASS_GRACE_S",
    "CLASS_HOLD_S",
    "DECODE_TOKENS",
    "FULL_BYTES",
    "HEAVY_NICE",
    "HOLD_POLL_S",
    "LONG_THREADS",
    "LONG_TOKENS",
    "MOST_HEAVY_WAIT_S",
    "OUTPUTS_KEPT",
    "PAGES",
    "PAGES_BYTES",
    "STOP",
    "TICK_S",
    "TRACE_COPIES",
    "Asked",
    "Job",
    "ModelWorker",
    "Owner",
    "Pages",
]
T = TypeVar("T")
PAGES_BYTES = 192 * 2**20  # the pages' copies: hundreds of class sentences, or three of 512 tokens on lm-english
FULL_BYTES = 64 * 2**20  # full analyses (scores and V of every sub-layer), kept only when asked for (the export)
BATCH_TOKENS = 2048  # padded tokens in one batch: rows × the longest row's characters / 4, about its tokens
DECODE_TOKENS = 16 * 512  # an encoder-decoder's decoding batch: its keys and values, not its weights, per row
# A pass over at least LONG_TOKENS padded tokens (a long text, or many) runs on LONG_THREADS of torch's threads: its
# matrix products are large enough to share, where a class's short sentences would only wait on the threads.
LONG_TOKENS = 256
LONG_THREADS = min(4, os.cpu_count() or 1)
OUTPUTS_KEPT = 4096  # an encoder-decoder's decoded outputs kept by (text, max_tokens): at most 65 ids each
# A traced pass holds, per row, every head's scores and weights of every attention sub-layer (tensors, then arrays):
# rows × sub-layers × heads × T² cells of 4 bytes, about four copies. Bounded, so that sessions sending long texts to
# a deep model at once are run a few at a time instead of all in one pass whose trace outgrows the machine.
BATCH_TRACE_BYTES = 384 * 2**20
TRACE_COPIES = 4
Asked = tuple[Request, Future, Request]  # a request (the key sessions wait on), its future, what the model is asked
# The padded tokens one heavy chunk runs through the model (rows × tokens a row): about a tenth of a second of one
# core on lm-english, so that a class's page never waits long behind one. Pages cut their jobs by `chunk_rows`.
CHUNK_TOKENS = 512
TICK_S = 0.25  # a heavy chunk's waiting session is asked this often whether it still wants it (`waiting`)
CLASS_CHUNK_TOKENS = 128  # a heavy chunk's padded tokens while a live class's pages are drawn (see the docstring)
# The heavy thread's nice, above the server's own: on a machine whose cores are busy it runs on what the light thread,
# the pages and the other programs leave (Linux; elsewhere it runs at the server's priority).
HEAVY_NICE = 19


@dataclass(frozen=True)
class Job:
    """Model work other than an analysis, run by the worker: `fn(checkpoint, *args)` over about `tokens` tokens."""

    fn: Callable
    args: tuple
    tokens: int = 0


def _use_threads(tokens: int) -> None:
    """torch's threads for a pass over `tokens` padded tokens (see LONG_TOKENS). Only the workers run the model."""
    torch.set_num_threads(LONG_THREADS if tokens >= LONG_TOKENS else 1)


def _lower_priority() -> None:
    """This thread, and the torch threads it starts afterwards (they inherit it), HEAVY_NICE below its priority."""
    if sys.platform != "linux":  # elsewhere PRIO_PROCESS names a process, not a thread
        return
    thread = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + HEAVY_NICE))
    except OSError:  # not allowed here: it runs at the server's priority
        pass


def _decodes(request: Request) -> bool:
    """Whether an encoder-decoder's analysis of `request` decodes its own output (no target given)."""
    return request.target is None and request.target_ids is None


def _wait(future: Future, waiting: Callable[[], None] | None, cancel: bool = False) -> object:
    """`future`'s result, calling `waiting()` every TICK_S seconds meanwhile; when it raises, the future is
    cancelled (with `cancel`: a job of one session's, dropped unless it runs already) and the exception goes on."""
    if waiting is None:
        return future.result()
    while True:
        try:
            return future.result(timeout=TICK_S)
        except FutureTimeout:
            pass
        try:
            waiting()
        except BaseException:
            if cancel:
                future.cancel()
            raise


class ModelWorker:
    """Runs `analyze_many` for one checkpoint in two background threads, light and heavy work's (see the module's
    docstring); `analyze` submits and waits.

    `owner()` names the session asking (called in the asking thread; the app gives the browser session's id)."""

    def __init__(
        self,
        ckpt: Checkpoint,
        window: float = 0.005,
        max_batch: int = 16,
        pages_bytes: int = PAGES_BYTES,
        full_bytes: int = FULL_BYTES,
        max_tokens: int = BATCH_TOKENS,
        max_trace_bytes: int = BATCH_TRACE_BYTES,
        max_decode_tokens: int = DECODE_TOKENS,
        owner: Callable[[], Owner] = lambda: None,
    ) -> None:
        self.ckpt = ckpt
        self.owner = owner
        self.window = window
        self.max_batch = max_batch
        self.max_tokens = max_tokens
        self.max_trace_bytes = max_trace_bytes
        self.max_decode_tokens = max_decode_tokens
        self._decodes_first = ckpt.config.has_cross_attention  # decoded as one batch, traced in bounded ones
        # (text, max_tokens) → (bos, *ids): what it decoded, so that an analysis the caches let go, an ablation or
        # one head's detail is not decoded again (a class's long texts outgrow the caches; these ids do not)
        self._outputs: OrderedDict[tuple[str, int], tuple[int, ...]] = OrderedDict()
        config = ckpt.config
        sublayers = config.n_encoder_layers + config.n_decoder_layers * (2 if config.has_cross_attention else 1)
        self._cell_bytes = sublayers * config.n_heads * 4 * TRACE_COPIES  # per row, per T² of the padded length
        self.batches: list[int] = []  # size of each traced batch run, most recent last (for benchmarks and tests)
        self.decodings: list[int] = []  # an encoder-decoder's: size of each batch decoded before its traced ones
        self.pages = ByteCache(pages_bytes)
        self.full = ByteCache(full_bytes)
        self._pending: dict[Request, Future] = {}
        self._wants_full: set[Request] = set()  # requests someone asked the full copy of: only those keep it
        self._asked_by: dict[Request, Owner] = {}  # the session that asked first: its share of the budget holds it
        self._lock = threading.Lock()
        self.lanes = Lanes()  # what sessions asked, light and heavy, taken in turn (analysis/lanes.py)
        name = f"model-worker-{ckpt.name}"
        self._thread = threading.Thread(target=self._run, args=(False,), name=name, daemon=True)
        self._heavy_thread = threading.Thread(target=self._run, args=(True,), name=f"{name}-heavy", daemon=True)
        self._thread.start()
        self._heavy_thread.start()

    def submit(self, request: Request, heavy: bool = False) -> Future:
        """A future of the full Analysis; a request already waiting or running shares that run's future. `heavy`:
        in the asking session's heavy lane (a long text is heavy anyway)."""
        owner = self.owner()
        with self._lock:
            future = self._pending.get(request)
            if future is None:
                future = self._pending[request] = Future()
                self._asked_by[request] = owner
                heavy = heavy or self.padded_tokens(request) >= LONG_TOKENS
                self.lanes.put(Item(request, future, owner, heavy))
            return future

    def cached(
        self,
        text: str,
        target: str | None = None,
        k: int = 5,
        max_tokens: int = 64,
        full: bool = False,
        continuation: int = 0,
        sampling: Sampling | None = None,
    ) -> Analysis | None:
        """The analysis `analyze` would return, if it is kept already; else None (nothing is run)."""
        request = Request(text, target, k, max_tokens, continuation, sampling)
        if full:
            return self.full.get(request)
        light = self.pages.get(request)
        if light is None and (whole := self.full.get(request)) is not None:
            light = whole.for_pages()
            self.pages.put(request, light)
        return light

    def analyze(
        self,
        text: str,
        target: str | None = None,
        k: int = 5,
        max_tokens: int = 64,
        full: bool = False,
        continuation: int = 0,
        sampling: Sampling | None = None,
        heavy: bool = False,
        waiting: Callable[[], None] | None = None,
    ) -> Analysis:
        """Like `analysis.analyze.analyze`, run by the worker, or from its cache; raises InputError for a text it
        cannot take. `full=False` gives the pages' copy (`Analysis.for_pages`), `full=True` the whole one. A
        language model first writes `continuation` tokens (greedy, or `sampling`). `heavy`: one of many texts a
        session asks at once (a detector's), queued in its heavy lane. `waiting()`: called every TICK_S seconds
        while it waits; when it raises, the wait ends with that exception (the run, which other sessions may share,
        goes on)."""
        kept = self.cached(text, target, k, max_tokens, full, continuation, sampling)
        if kept is not None:
            return kept
        request = Request(text, target, k, max_tokens, continuation, sampling)
        if full:
            with self._lock:
                self._wants_full.add(request)
        result = _wait(self.submit(request, heavy), waiting)
        return result if full else (self.pages.get(request) or result.for_pages())

    def output(self, text: str, max_tokens: int = 64) -> tuple[int, ...]:
        """An encoder-decoder's greedy output for `text` as its analysis decodes it, `(bos, *ids)`: the one kept,
        else decoded by the worker (nothing traced). Raises InputError for a text it cannot take."""
        known = self._known_output(text, max_tokens)
        if known is not None:
            return known
        request = Request(text, max_tokens=max_tokens)
        decoded = self.call(lambda ckpt: decode_outputs(ckpt, [request])[0], tokens=self.padded_tokens(request))
        if isinstance(decoded, InputError):
            raise decoded
        self._keep_output(text, max_tokens, decoded)
        return decoded

    def _known_output(self, text: str, max_tokens: int) -> tuple[int, ...] | None:
        with self._lock:
            known = self._outputs.get((text, max_tokens))
            if known is not None:
                self._outputs.move_to_end((text, max_tokens))
            return known

    def _keep_output(self, text: str, max_tokens: int, ids: tuple[int, ...]) -> None:
        with self._lock:
            self._outputs[(text, max_tokens)] = ids
            self._outputs.move_to_end((text, max_tokens))
            while len(self._outputs) > OUTPUTS_KEPT:
                self._outputs.popitem(last=False)

    def call(
        self,
        fn: Callable[..., T],
        *args: object,
        tokens: int = 0,
        heavy: bool = False,
        waiting: Callable[[], None] | None = None,
    ) -> T:
        """`fn(checkpoint, *args)` run by the worker thread between batches (ablations and other model work that
        is not an analysis): the worker stays the only thread that runs the model. `tokens`: about how many the
        work reads (ModelWorker.tokens of its text), for the threads it gets. `heavy`: a chunk of a long job, in
        the session's heavy lane (see the module's docstring). `waiting()` is called every TICK_S seconds while
        the chunk waits or runs: when it raises (the session left or ran its page again), the chunk is dropped if
        it has not started, and that exception goes on. Raises what `fn` raises."""
        future: Future = Future()
        heavy = heavy or tokens >= LONG_TOKENS
        self.lanes.put(Item(Job(fn, args, tokens), future, self.owner(), heavy, job=True))
        return _wait(future, waiting, cancel=True)

    def stop(self) -> None:
        """End the worker's thread once what it is running is done; requests still queued get an error. What it
        kept is dropped, so an evicted worker frees its results, and its model once nothing else holds it."""
        self.lanes.stop()

    @staticmethod
    def chunk_rows(tokens: int) -> int:
        """How many runs of `tokens` tokens one heavy chunk may hold (at least one): fewer while a class is live."""
        return max(1, (CLASS_CHUNK_TOKENS if lanes.PAGES.class_live() else CHUNK_TOKENS) // max(1, tokens))

    @staticmethod
    def tokens(text: str) -> int:
        """About how many tokens `text` is: its characters / 4 (no tokenizer needed)."""
        return len(text) // 4 + 1

    @staticmethod
    def padded_tokens(request: Request) -> int:
        """About how many tokens a request adds to each row of a batch: its text and what it will write."""
        target = len(request.target_ids) if request.target_ids is not None else len(request.target or "") // 4
        return ModelWorker.tokens(request.text) + request.continuation + target

    def trace_bytes(self, row: int, rows: int) -> int:
        """About the bytes a traced pass of `rows` rows padded to `row` tokens (at most max_len) holds."""
        length = min(row, self.ckpt.config.max_len)
        return rows * length * length * self._cell_bytes

    def _fits(self, row: int, rows: int) -> bool:
        """Whether `rows` requests padded to `row` tokens may be gathered into one batch."""
        if self._decodes_first:  # traced afterwards in passes bounded as below (`_traced_passes`)
            return row * rows <= self.max_decode_tokens
        return self._traceable(row, rows)

    def _traceable(self, row: int, rows: int) -> bool:
        """Whether `rows` requests padded to `row` tokens may share one traced pass."""
        return row * rows <= self.max_tokens and self.trace_bytes(row, rows) <= self.max_trace_bytes

    def _traced_passes(self, batch: list[Asked]) -> list[list[Asked]]:
        """The gathered batch in traced passes within `_traceable`, shortest first: each row is the longest of its
        pass so far."""
        passes: list[list[Asked]] = []
        for item in sorted(batch, key=lambda item: self.padded_tokens(item[2])):
            if passes and self._traceable(self.padded_tokens(item[2]), len(passes[-1]) + 1):
                passes[-1].append(item)
            else:
                passes.append([item])
        return passes

    @contextmanager
    def _model_work(self) -> Iterator[None]:
        """Around the model's work (no lock of the worker's held): on the heavy thread, its pause points."""
        if threading.current_thread() is not self._heavy_thread:
            yield
            return
        sys.setprofile(self.lanes.pause_point)
        try:
            yield
        finally:
            sys.setprofile(None)

    def _gather(self, heavy: bool) -> tuple[list[tuple[Request, Future]], list[tuple[Job, Future]]]:
        """The light thread's (`heavy` False): the requests waiting within `window` (at most `max_batch` and
        `max_tokens` padded tokens), and any jobs met on the way; a request that would overflow the batch is put
        back: it opens the next one. The heavy thread's: one heavy chunk, alone."""
        first = self.lanes.take_heavy() if heavy else self.lanes.take()
        if first.what is STOP:
            return [], [(STOP, first.future)]
        if first.heavy:
            if isinstance(first.what, Job):
                return [], [(first.what, first.future)]
            return [(first.what, first.future)], []
        batch, jobs = ([], [(first.what, first.future)]) if isinstance(first.what, Job) else ([first], [])
        longest = max((self.padded_tokens(i.what) for i in batch), default=0)
        deadline = time.monotonic() + self.window
        while batch and len(batch) < self.max_batch:
            item = self.lanes.take(max(0.0, deadline - time.monotonic()))
            if item is None:
                break
            if item.what is STOP:
                jobs.append((STOP, item.future))
                break
            if isinstance(item.what, Job):
                jobs.append((item.what, item.future))
                continue
            row = max(longest, self.padded_tokens(item.what))
            if not self._fits(row, len(batch) + 1):
                self.lanes.put_back(item)
                break
            batch.append(item)
            longest = row
        return [(i.what, i.future) for i in batch], jobs

    def _run(self, heavy: bool) -> None:
        """The light thread's loop (`heavy` False) or the heavy thread's."""
        torch.set_num_threads(1)  # the worker is one of many threads; torch's default would take every core
        if heavy:
            _lower_priority()
        while True:
            batch, jobs = self._gather(heavy)
            started = time.monotonic()
            sharing = heavy and self.lanes.sharing()  # beside an active class: one of torch's threads, not the cores
            if batch:
                self._analyse(batch, sharing)
            for job, future in jobs:
                if job is STOP:  # the light thread ends last, once the heavy one has, and drops what was kept
                    if not heavy:
                        self._heavy_thread.join()
                        self._shut_down()
                        give_back()
                    return
                try:
                    _use_threads(0 if sharing else job.tokens)
                    with self._model_work():
                        result = job.fn(self.ckpt, *job.args)
                except Exception as exc:  # the page shows it; the worker goes on
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            if heavy:
                self.lanes.ran_heavy(time.monotonic() - started)
            else:
                self.lanes.ran_light()
            give_back()  # what the pass freed goes back to the system, not kept at the largest pass's size

    def _shut_down(self) -> None:
        stopped = RuntimeError("the model was unloaded while this request waited; run it again")
        for item in self.lanes.drain():
            if not item.future.done():
                item.future.set_exception(stopped)
        with self._lock:
            self._pending.clear()
            self._wants_full.clear()
            self._asked_by.clear()
        self.pages.clear()
        self.full.clear()

    def _analyse(self, batch: list[tuple[Request, Future]], sharing: bool) -> None:
        """Analyse `batch` (see the module's docstring); `sharing`: a heavy chunk beside active pages, on one of
        torch's threads."""
        asked: list[Asked] = [(request, future, request) for request, future in batch]
        if self._decodes_first:
            outputs: list = [self._known_output(r.text, r.max_tokens) if _decodes(r) else None for r, _ in batch]
            unknown = [i for i, (request, _) in enumerate(batch) if outputs[i] is None and _decodes(request)]
            if unknown:
                with self._lock:
                    self.decodings = [*self.decodings[-99:], len(unknown)]
                longest = max(self.padded_tokens(batch[i][0]) for i in unknown)
                try:
                    _use_threads(0 if sharing else longest * len(unknown))
                    with self._model_work():
                        decoded = decode_outputs(self.ckpt, [batch[i][0] for i in unknown])
                except Exception:  # each traced pass then decodes for itself, and a fault stays its own request's
                    decoded = [None] * len(unknown)
                for i, ids in zip(unknown, decoded):
                    outputs[i] = ids
                    if isinstance(ids, tuple):
                        self._keep_output(batch[i][0].text, batch[i][0].max_tokens, ids)
            asked = []
            for (request, future), output in zip(batch, outputs):
                if isinstance(output, InputError):
                    self._answer(request, future, output)
                else:
                    asked.append((request, future, request if output is None else replace(request, target_ids=output)))
        for traced in self._traced_passes(asked):
            self._trace(traced, sharing)

    def _trace(self, batch: list[Asked], sharing: bool) -> None:
        with self._lock:
            self.batches = [*self.batches[-99:], len(batch)]
        _use_threads(0 if sharing else max(self.padded_tokens(run) for _, _, run in batch) * len(batch))
        try:
            with self._model_work():
                results = analyze_many(self.ckpt, [run for _, _, run in batch])
        except Exception as exc:
            if len(batch) > 1:  # one request's fault must not become its neighbours' error: each alone
                for item in batch:
                    self._trace([item], sharing)
                return
            request, future, _ = batch[0]
            self._answer(request, future, exc)
            return
        for (request, future, _), result in zip(batch, results):
            self._answer(request, future, result)

    def _answer(self, request: Request, future: Future, result: Analysis | Exception) -> None:
        """Keep `result` (the pages' copy; the full one when it was asked for) and hand it to the waiting sessions:
        the full one only to those who asked for it, so that it is freed here otherwise (a class's long texts come
        back faster than busy sessions take them)."""
        with self._lock:
            wanted_full = request in self._wants_full
            self._wants_full.discard(request)
            owner = self._asked_by.pop(request, None)
        if isinstance(result, Analysis):
            light = result.for_pages()
            self.pages.put(request, light, owner)
            if wanted_full:
                self.full.put(request, result, owner)
            else:
                result = light
        with self._lock:
            self._pending.pop(request, None)
        if isinstance(result, Exception):
            future.set_exception(result)
        else:
            future.set_result(result)
