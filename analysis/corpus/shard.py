"""One shard of a corpus through the model and into a reducer of its own (analysis.corpus.reduce), the same
wherever it runs: here (analysis.corpus.run) or on a Ray worker (analysis.corpus.cluster). Its two tables come back
as Parquet bytes: a row a text, and a row a text and head (that text's own scores)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from analysis.corpus.patterns import CustomPattern
from analysis.corpus.reduce import SCORES, Batch, Reducer, columns
from analysis.corpus.texts import CorpusError, Text
from inference.checkpoint import Checkpoint
from inference.decoding import pad_rows
from inference.text import InputError, clean_text, encode_first_stack
from model.forward import forward

COLUMNS = columns(SCORES)  # the built-in scores' columns; a run's own: Reducer.columns, its custom patterns' too


@dataclass(frozen=True)
class Settings:
    """What a run reduces with; a resumed run must have the same."""

    batch: int = 16  # texts a forward pass
    shard: int = 1000  # texts a shard: what a killed run loses at most
    top_k: int = 20  # contexts kept a head
    sample: int = 256  # (text, position)s whose query and key vectors are kept, the same for every head
    seed: int = 0  # of the sample's hash

    def check(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "seed" else 1):
                raise CorpusError(f"{name} must be a whole number from {0 if name == 'seed' else 1}, not {value!r}")


@dataclass(frozen=True)
class Shard:
    """One shard reduced on its own: texts `first` … `first + count − 1`, its reducer (to merge in order), and
    its two tables as Parquet bytes (texts; per-text head scores)."""

    first: int
    count: int
    reducer: Reducer
    texts: bytes
    heads: bytes


def parquet_bytes(table: dict[str, object]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(table), sink)
    return sink.getvalue()


def reduce_shard(
    ckpt: Checkpoint, chunk: list[Text], first: int, settings: Settings, reducer: Reducer, done: Callable[[int], object]
) -> Shard:
    """One shard through the model into `reducer` (an empty one): the same wherever it runs."""
    reducer, (texts, heads) = _shard(ckpt, chunk, first, settings, reducer, done)
    return Shard(first, len(chunk), reducer, parquet_bytes(texts), parquet_bytes(heads))


@torch.inference_mode()
def new_reducer(ckpt: Checkpoint, settings: Settings, patterns: tuple[CustomPattern, ...] = ()) -> Reducer:
    """An empty reducer for the model's self-attention sub-layers, their shapes read from a pass over the start
    token, scoring PATTERNS and then `patterns`."""
    _, trace = forward(ckpt.model, torch.tensor([[ckpt.config.bos_id]]))
    return Reducer.for_trace(trace, settings.top_k, settings.sample, settings.seed, patterns)


def _encoded(ckpt: Checkpoint, chunk: list[Text], first: int) -> Iterator[tuple[int, Text, list[int] | str]]:
    """(text number, text, its ids or why the model cannot read it) for each text of the chunk."""
    for offset, text in enumerate(chunk):
        try:
            yield first + offset, text, encode_first_stack(ckpt, clean_text(text.text).text, [])
        except InputError as exc:
            yield first + offset, text, str(exc)


@torch.inference_mode()
def _shard(
    ckpt: Checkpoint, chunk: list[Text], first: int, settings: Settings, reducer: Reducer, done: Callable[[int], object]
):
    """Reduce one shard's texts; returns the reducer and the shard's two tables (texts, per-text head scores)."""
    rows: dict[str, list] = {"text": [], "source": [], "tokens": [], "skipped": [], "content": []}
    per_text: list[np.ndarray] = []
    numbers: list[int] = []
    encoded = list(_encoded(ckpt, chunk, first))
    for number, text, ids in encoded:
        rows["text"].append(number)
        rows["source"].append(text.where)
        rows["tokens"].append(len(ids) if isinstance(ids, list) else 0)
        rows["skipped"].append(None if isinstance(ids, list) else ids)
        rows["content"].append(text.text)
    readable = [(n, ids) for n, _, ids in encoded if isinstance(ids, list)]
    for start in range(0, len(readable), settings.batch):
        part = readable[start : start + settings.batch]
        ids = pad_rows([r for _, r in part], ckpt.config.pad_id)
        _, trace = forward(ckpt.model, ids)
        pieces = [ckpt.tokenizer.pieces(r) for _, r in part]
        batch = Batch(trace, ids, [n for n, _ in part], [len(r) for _, r in part], pieces)
        per_text.append(reducer.update(batch))
        numbers += batch.texts
        done(len(part))
    done(len(chunk) - len(readable))
    return reducer, (rows, _text_heads(reducer, numbers, per_text))


def _text_heads(reducer: Reducer, numbers: list[int], per_text: list[np.ndarray]) -> dict[str, object]:
    """A row per text, layer and head (from 1): each score of that text."""
    if not per_text:
        columns: dict[str, object] = {"text": pa.array([], pa.int64()), "layer": pa.array([], pa.int64())}
        columns["head"] = pa.array([], pa.int64())
        return columns | {c: pa.array([], pa.float64()) for c in reducer.columns}
    scores = np.concatenate(per_text)  # (N, S, L, H)
    n, _, layers, heads = scores.shape
    grid = np.stack(np.meshgrid(np.arange(n), np.arange(layers), np.arange(heads), indexing="ij"), -1).reshape(-1, 3)
    table: dict[str, object] = {
        "text": np.asarray(numbers, dtype=np.int64)[grid[:, 0]],
        "layer": np.asarray(reducer.layers(), dtype=np.int64)[grid[:, 1]],
        "head": grid[:, 2].astype(np.int64) + 1,
    }
    for s, column in enumerate(reducer.columns):
        table[column] = scores[:, s].reshape(-1)
    return table
