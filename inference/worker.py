"""One model worker per checkpoint: the only thread that runs the model, batching what sessions ask at once.

A class typing at the same moment sends many texts within milliseconds. Each browser session's script runs in
its own thread; it submits its request and waits. The worker takes the first waiting request, gathers those
that arrive within `window` seconds (at most `max_batch`), and runs them as one batch through `analyze_many`:
one padded greedy decoding and one padded traced forward pass instead of one per session. Padding masks make
each result equal to analysing that text alone (tests/test_worker.py).
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future

import torch

from inference.analysis import Analysis
from inference.analyze import Request, analyze_many
from inference.checkpoint import Checkpoint
from inference.text import InputError


class ModelWorker:
    """Runs `analyze_many` for one checkpoint in a background thread; `analyze` submits and waits."""

    def __init__(self, ckpt: Checkpoint, window: float = 0.005, max_batch: int = 16) -> None:
        self.ckpt = ckpt
        self.window = window
        self.max_batch = max_batch
        self.batches: list[int] = []  # size of each batch run, most recent last (for benchmarks and tests)
        self._queue: queue.Queue[tuple[Request, Future]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"model-worker-{ckpt.name}", daemon=True)
        self._thread.start()

    def submit(self, request: Request) -> Future:
        future: Future = Future()
        self._queue.put((request, future))
        return future

    def analyze(self, text: str, target: str | None = None, k: int = 5, max_tokens: int = 64) -> Analysis:
        """Like `inference.analyze.analyze`, run by the worker; raises InputError for a text it cannot take."""
        return self.submit(Request(text, target, k, max_tokens)).result()

    def _gather(self) -> list[tuple[Request, Future]]:
        batch = [self._queue.get()]
        deadline = time.monotonic() + self.window
        while len(batch) < self.max_batch:
            left = deadline - time.monotonic()
            try:
                batch.append(self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def _run(self) -> None:
        torch.set_num_threads(1)  # the worker is one of many threads; torch's default would take every core
        while True:
            batch = self._gather()
            self.batches = [*self.batches[-99:], len(batch)]
            try:
                results = analyze_many(self.ckpt, [request for request, _ in batch])
            except Exception as exc:  # a bug must reach every waiting page as an error, not hang them
                for _, future in batch:
                    future.set_exception(exc)
                continue
            for (_, future), result in zip(batch, results):
                if isinstance(result, InputError):
                    future.set_exception(result)
                else:
                    future.set_result(result)
