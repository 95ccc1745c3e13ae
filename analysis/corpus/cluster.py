"""The corpus's shards reduced on Ray Data (`python -m atlas corpus … --ray [ADDRESS]`): a Ray started here, or a
cluster's.

Each shard is one row of a Ray dataset; `map_batches` hands the rows to stateful workers (an actor each, holding
one model, on a GPU when the cluster has them) that reduce a shard into an empty reducer, exactly as the local
run does (analysis.corpus.run.reduce_shard), and send back its tables and reducer state as Parquet, safetensors
and JSON. The driver merges the shards in their order and writes the same files as a local run: the same results,
and either run can resume the other's folder. The driver reads the texts and ships them to the workers, WINDOW
shards a worker at a time, so memory stays bounded however large the corpus; the workers need the package
installed and the model's path readable (on a cluster: the same path on every node).
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import asdict
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load, save

from analysis.corpus.patterns import CustomPattern, by_source
from analysis.corpus.reduce import Reducer
from analysis.corpus.shard import Settings, Shard, new_reducer, reduce_shard
from analysis.corpus.texts import CorpusError, Text
from inference.checkpoint import Checkpoint

WINDOW = 4  # shards a worker per Ray dataset: its texts are in memory at once, and each dataset loads the models
CONNECT_S = 5  # seconds a cluster's address has to answer
ROOT = Path(__file__).resolve().parents[2]  # the code a Ray started here gives its workers


class ShardWorker:
    """A Ray actor: one model, loaded once; each row it is given (a shard's texts) comes back reduced."""

    def __init__(self, model: str, settings: dict[str, int], patterns: list[list[str]]) -> None:
        import torch

        from inference.checkpoint import load_checkpoint

        ckpt = load_checkpoint(model)
        if torch.cuda.is_available():  # Ray gives a worker with num_gpus its GPU, and only then
            ckpt.model.to("cuda")
        self.ckpt, self.settings = ckpt, Settings(**settings)
        self.reducer = new_reducer(ckpt, self.settings, by_source([(name, source) for name, source in patterns]))

    def __call__(self, rows: dict[str, np.ndarray]) -> dict[str, list]:
        out: dict[str, list] = {"index": [], "first": [], "count": [], "texts": [], "heads": [], "state": []}
        out["info"] = []
        for index, first, texts in zip(rows["index"], rows["first"], rows["texts"]):
            chunk = [Text(text, where) for text, where in json.loads(texts)]
            shard = reduce_shard(self.ckpt, chunk, int(first), self.settings, self.reducer.empty(), lambda n: None)
            arrays, info = shard.reducer.state()
            for name, value in (("index", int(index)), ("first", shard.first), ("count", shard.count)):
                out[name].append(value)
            out["texts"].append(shard.texts)
            out["heads"].append(shard.heads)
            out["state"].append(save(arrays))
            out["info"].append(json.dumps(info, ensure_ascii=False))
        return out


def connect(address: str) -> bool:
    """Connect this process to Ray: `address` "" starts a Ray here, else the cluster at `address` ("auto": the one
    `ray start` began on this machine); a process connected already keeps its connection (an address given is
    still checked). True when this call started or joined it (so it ends it); a CorpusError of one line when Ray
    is missing or nothing answers."""
    try:
        import ray
    except ImportError:
        raise CorpusError(
            "--ray needs Ray Data: pip install 'ray[data]==2.60.0' (or the package's extra: attention-atlas[cluster])"
        ) from None
    if address:
        _answers(address)
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    if address:
        options["address"] = address
    else:  # the workers import the code this process runs
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        options |= {"include_dashboard": False, "runtime_env": {"env_vars": {"PYTHONPATH": path}}}
    try:
        ray.init(**options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {address}" if address else "a Ray here"
        raise CorpusError(f"--ray: {where} does not answer ({_first_line(exc)}): check the address") from None
    return True


def _answers(address: str) -> None:
    """A CorpusError unless something listens at a HOST:PORT `address` (ray:// too): Ray itself waits for a
    cluster that does not answer for minutes, retrying."""
    if address == "auto":
        return  # Ray finds the cluster `ray start` began here, or says at once there is none
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise CorpusError(f"--ray {address}: not HOST:PORT (or auto, or nothing for a Ray started here)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_S).close()
    except OSError as exc:
        raise CorpusError(
            f"--ray: nothing answers at {address} ({exc.strerror or type(exc).__name__}): check the address"
        ) from None


def reduce_on_ray(
    ckpt: Checkpoint,
    chunks: Iterator[tuple[int, list[Text]]],
    settings: Settings,
    address: str,
    workers: int | None,
    done: Callable[[int], object],
    patterns: tuple[CustomPattern, ...] = (),
) -> Iterator[Shard]:
    """Each shard of `chunks` reduced on a Ray worker, in the shards' order (see the module's docstring); each
    worker loads the custom `patterns` again from their sources."""
    unnamed = [p.name for p in patterns if not p.source]
    if unnamed:
        raise CorpusError(
            f"--ray: pattern {unnamed[0]!r} is a function only this process has: Ray's workers load a pattern from "
            "its source; give it as NAME=PATH.py:FUNCTION (or a module's function)"
        )
    started = connect(address)
    import ray

    try:
        ray.data.DataContext.get_current().enable_progress_bars = False  # the corpus's own bar counts texts
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        workers = workers or gpus or max(1, int(resources.get("CPU", 1)))
        model = str(Path(ckpt.path).resolve())
        while window := list(islice(chunks, WINDOW * workers)):
            rows = [
                {"index": i, "first": first, "texts": json.dumps([[t.text, t.where] for t in chunk])}
                for i, (first, chunk) in enumerate(window)
            ]
            dataset = ray.data.from_items(rows, override_num_blocks=len(rows)).map_batches(
                ShardWorker,
                fn_constructor_kwargs={
                    "model": model,
                    "settings": asdict(settings),
                    "patterns": [[p.name, p.source] for p in patterns],
                },
                batch_size=1,
                compute=ray.data.ActorPoolStrategy(size=min(workers, len(rows))),
                num_cpus=1,
                num_gpus=1 if gpus else 0,
            )
            results: dict[int, dict] = {}
            try:
                for row in dataset.iter_rows():
                    results[int(row["index"])] = row
                    done(int(row["count"]))
            except ray.exceptions.RayError as exc:
                raise CorpusError(f"--ray: a worker failed: {_first_line(exc)}") from None
            for i in range(len(rows)):
                row = results[i]
                reducer = Reducer.from_state(load(row["state"]), json.loads(row["info"]))
                yield Shard(int(row["first"]), int(row["count"]), reducer, row["texts"], row["heads"])
    finally:
        if started:
            ray.shutdown()


def _first_line(exc: BaseException) -> str:
    """The last non-empty line of an error's message that names it (Ray wraps a worker's error in its own
    traceback), else its type."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    named = [line for line in lines if "Error:" in line or "Exception:" in line]
    return (named or lines or [type(exc).__name__])[-1]
