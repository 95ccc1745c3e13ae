"""Run a model over a corpus and reduce every head as the texts stream by (analysis.corpus.reduce), into a folder
of Parquet shards and a manifest.

The texts go in shards of `shard` texts, each in padded batches of `batch`, through the model's traced forward
pass. Each shard is reduced into an empty reducer of its own and merged into the corpus's, in order (Reducer.merge):
the one procedure whether the shard ran here or on a Ray worker (analysis.corpus.cluster). After each shard: its
tables (`shards/texts-NNNNN.parquet`, `shards/heads-NNNNN.parquet`), then the
reducer's state (`state/after-NNNNN.safetensors` + `.json`), then the manifest naming both, each written whole
(a temporary file renamed). A run killed at any point and started again with the same model, texts and settings
continues after the last shard the manifest names and ends with the same files as one that never stopped; the
final tables (heads, offsets, contexts, sample) are written once every shard is done.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from itertools import islice
from pathlib import Path

import numpy as np
import pyarrow as pa
from safetensors.numpy import load_file, save

from analysis.corpus.patterns import CustomPattern
from analysis.corpus.patterns import load as load_patterns
from analysis.corpus.reduce import OFFSETS, SUBLAYERS_KEY, Reducer
from analysis.corpus.shard import Settings, new_reducer, parquet_bytes, reduce_shard
from analysis.corpus.texts import CorpusError, Text, corpus_files, count_texts, fingerprint, stream
from inference.checkpoint import Checkpoint
from inference.files import write_file
from model.names import attention_type

FORMAT = 1
MANIFEST = "manifest.json"
FINAL = ("heads", "offsets", "contexts", "sample")
DEFAULTS = Settings()


def _identity(ckpt: Checkpoint, files: list[Path], settings: Settings, patterns: tuple[CustomPattern, ...]) -> dict:
    identity = {
        "model": {"name": ckpt.name, "path": str(Path(ckpt.path).resolve()), "config": asdict(ckpt.config)},
        "input": fingerprint(files),
        "settings": asdict(settings),
    }
    if patterns:  # a run without them keeps the identity runs had before custom patterns, and resumes theirs
        identity["patterns"] = [p.identity() for p in patterns]
    return identity


def read_manifest(out: Path) -> dict | None:
    path = out / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise CorpusError(f"{path}: not a corpus manifest this app can read: choose another --out") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CorpusError(f"{path}: not a corpus manifest of format {FORMAT}: choose another --out")
    return manifest


def _open_out(out: Path, identity: dict) -> dict | None:
    """The manifest to resume from (None: a fresh run); a folder that holds something else is a CorpusError."""
    if out.exists() and not out.is_dir():
        raise CorpusError(f"{out}: is a file, not a folder: give --out a new or empty folder")
    manifest = read_manifest(out) if out.exists() else None
    if manifest is None:
        if out.exists() and any(out.iterdir()) and not _first_shard_only(out):
            raise CorpusError(f"{out}: the folder holds files but no corpus: give --out a new or empty folder")
        return None
    if manifest.get("identity") != identity:
        theirs = manifest.get("identity", {}).get("model", {}).get("name", "another model")
        raise CorpusError(
            f"{out}: holds another corpus ({theirs}, other texts, settings or patterns): give --out a new folder, or "
            "remove this one to start again"
        )
    return manifest


OURS = {
    "shards": re.compile(r"(texts|heads)-\d{5}\.parquet|\.atlas-[0-9a-f]+\.tmp"),
    "state": re.compile(r"after-\d{5}\.(safetensors|json)|\.atlas-[0-9a-f]+\.tmp"),
}


def _first_shard_only(out: Path) -> bool:
    """Whether `out` holds only what a run stopped in its first shard leaves (before any manifest): that run
    starts again there."""
    for entry in out.iterdir():
        if entry.name not in OURS or not entry.is_dir() or entry.is_symlink():
            return False
        if not all(OURS[entry.name].fullmatch(f.name) and f.is_file() for f in entry.iterdir()):
            return False
    return True


def _write_json(path: Path, value: object) -> None:
    write_file(path, (json.dumps(value, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))


def run_corpus(
    ckpt: Checkpoint,
    texts: str | Path,
    out: str | Path,
    settings: Settings = DEFAULTS,
    progress: bool = True,
    max_shards: int | None = None,
    ray: str | None = None,
    workers: int | None = None,
    patterns: Sequence[str] | Mapping[str, str | Callable] | None = None,
) -> Path:
    """Reduce `ckpt`'s self-attention heads over the corpus at `texts` into the folder `out` (see the module's
    docstring); resumes a run of the same model, texts, settings and patterns found there. `max_shards`: stop
    after that many shards in this call (what an interrupted run leaves). `patterns`: custom patterns scored
    beside the built-in ones (analysis.corpus.patterns: NAME=SOURCE specs, or a mapping name → source or
    function). `ray`: reduce the shards on Ray Data's workers instead (analysis.corpus.cluster): "" a Ray started
    here (or the one this process is connected to), else a cluster's address; `workers` of them, one model each.
    Returns `out`."""
    settings.check()
    custom = load_patterns(patterns)
    bad_workers = isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    if workers is not None and (ray is None or bad_workers):
        raise CorpusError(f"--workers is a whole number from 1, with --ray, not {workers!r}")
    if ckpt.config.has_cross_attention:
        raise CorpusError(
            f"{ckpt.name} is an encoder-decoder: its decoder reads its own output, which a corpus pass does not "
            "write; run a language model or an encoder"
        )
    files = corpus_files(Path(texts))
    total = count_texts(files)
    if not total:
        raise CorpusError(f"{texts}: holds no texts (only blank lines): give a file with a text a line")
    out = Path(out)
    identity = _identity(ckpt, files, settings, custom)
    manifest = _open_out(out, identity)
    if manifest is not None and manifest.get("complete"):
        return out
    (out / "shards").mkdir(parents=True, exist_ok=True)
    (out / "state").mkdir(exist_ok=True)
    done = [] if manifest is None else manifest["shards"]
    reducer = new_reducer(ckpt, settings, custom) if manifest is None else _load_state(out, manifest["state"], custom)
    texts_iter = stream(files)
    skipped = len(done) * settings.shard
    for _ in islice(texts_iter, skipped):
        pass
    bar = _bar(total, skipped, progress)
    state, resumed = (None if manifest is None else manifest["state"]), len(done)
    chunks = islice(_chunks(texts_iter, settings.shard, skipped + 1), max_shards)
    try:
        if ray is None:
            reduced = (reduce_shard(ckpt, c, first, settings, reducer.empty(), bar.update) for first, c in chunks)
        else:
            from analysis.corpus.cluster import reduce_on_ray  # Ray is imported only when asked for

            reduced = reduce_on_ray(ckpt, chunks, settings, ray, workers, bar.update, custom)
        for shard in reduced:
            reducer.merge(shard.reducer)
            index, name = len(done), f"{len(done):05d}"
            write_file(out / "shards" / f"texts-{name}.parquet", shard.texts)
            write_file(out / "shards" / f"heads-{name}.parquet", shard.heads)
            state = f"after-{index + 1:05d}"
            _save_state(out, state, reducer)
            done = [*done, {"shard": name, "texts": [shard.first, shard.first + shard.count - 1]}]
            _write_json(out / MANIFEST, _manifest_of(identity, total, done, state, reducer, complete=False))
            for old in (out / "state").iterdir():  # the manifest names the newest; older states are spent
                if not old.name.startswith(state):
                    old.unlink()
    finally:
        bar.close()
    if max_shards is not None and len(done) - resumed == max_shards and next(texts_iter, None) is not None:
        return out  # stopped before the end, as a killed run would
    if not reducer.texts:
        raise CorpusError(f"{texts}: {ckpt.name} could read none of its texts (texts in shards/ say why)")
    _write_final(out, reducer)
    _write_json(out / MANIFEST, _manifest_of(identity, total, done, state, reducer, True))
    return out


def _chunks(texts: Iterator[Text], size: int, first: int) -> Iterator[tuple[int, list[Text]]]:
    """(number of its first text, from 1; the texts) of each shard of `size` texts."""
    while chunk := list(islice(texts, size)):
        yield first, chunk
        first += len(chunk)


def _bar(total: int, initial: int, shown: bool):
    from tqdm import tqdm  # the progress bar: texts a second and the time left

    return tqdm(total=total, initial=initial, unit="text", desc="corpus", disable=not shown, dynamic_ncols=True)


def _manifest_of(identity: dict, total: int, done: list, state: str, reducer: Reducer, complete: bool) -> dict:
    return {
        "format": FORMAT,
        "identity": identity,
        "texts": total,
        "shards": done,
        "state": state,
        "complete": complete,
        SUBLAYERS_KEY: reducer.sublayers,
        "heads": reducer.n_heads,
        "scores": list(reducer.columns),
        "offsets": OFFSETS,
        "tables": list(FINAL) if complete else [],
    }


def _save_state(out: Path, name: str, reducer: Reducer) -> None:
    arrays, info = reducer.state()
    write_file(out / "state" / f"{name}.safetensors", save(arrays))
    _write_json(out / "state" / f"{name}.json", info)


def _load_state(out: Path, name: str, patterns: tuple[CustomPattern, ...]) -> Reducer:
    try:
        arrays = load_file(out / "state" / f"{name}.safetensors")
        info = json.loads((out / "state" / f"{name}.json").read_text(encoding="utf-8"))
    except Exception as exc:  # safetensors' own error shares no base with OSError's
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CorpusError(
            f"{out}: its saved state {name} cannot be read ({message}): remove it to start again"
        ) from None
    return Reducer.from_state(arrays, info, patterns)


def _write_final(out: Path, r: Reducer) -> None:
    """The corpus's tables, layers and heads from 1, positions from 1."""
    layers = r.layers()
    scores = r.head_scores()  # (S, L, H)
    attention = [attention_type(name) for name in r.sublayers]
    cells = [(li, h) for li in range(len(layers)) for h in range(r.n_heads)]
    heads: dict[str, object] = {
        "attention": [attention[li] for li, _ in cells],
        "layer": [layers[li] for li, _ in cells],
        "head": [h + 1 for _, h in cells],
    }
    for s, column in enumerate(r.columns):
        heads[column] = [float(scores[s, li, h]) for li, h in cells]
    write_file(out / "heads.parquet", parquet_bytes(heads))
    means = r.offset_means()
    offsets = {"layer": [], "head": [], "offset": [], "weight": []}
    for li, h in cells:
        for b in range(2 * OFFSETS + 1):
            offsets["layer"].append(layers[li])
            offsets["head"].append(h + 1)
            offsets["offset"].append(b - OFFSETS)
            offsets["weight"].append(float(means[li, h, b]))
    write_file(out / "offsets.parquet", parquet_bytes(offsets))
    contexts: dict[str, list] = {k: [] for k in ("layer", "head", "rank", "text", "query", "key", "weight")}
    contexts |= {"snippet": [], "query_piece": [], "key_piece": []}
    for li, h in cells:
        for rank, text in enumerate(r.top_text[li][h]):
            t, q, k = (int(v) for v in r.top_where[li, h, rank])
            for column, value in zip(contexts, (layers[li], h + 1, rank + 1, t, q + 1, k + 1)):
                contexts[column].append(value)
            contexts["weight"].append(float(r.top_weight[li, h, rank]))
            contexts["snippet"].append(text[0])
            contexts["query_piece"].append(text[1])
            contexts["key_piece"].append(text[2])
    write_file(out / "contexts.parquet", parquet_bytes(contexts))
    n = len(r.sample_piece)
    sample = {
        "layer": np.repeat(layers, r.n_heads * n),
        "head": np.tile(np.repeat(np.arange(1, r.n_heads + 1), n), len(layers)),
        "text": np.tile(r.sample_where[:, 0], len(cells)),
        "position": np.tile(r.sample_where[:, 1] + 1, len(cells)),
        "piece": r.sample_piece * len(cells),
        "context": r.sample_context * len(cells),
        "query_vector": _vectors(r.sample_q),
        "key_vector": _vectors(r.sample_k),
    }
    write_file(out / "sample.parquet", parquet_bytes(sample))


def _vectors(values: np.ndarray) -> pa.FixedSizeListArray:
    """(L, H, N, d) vectors as one Parquet column of d floats a row, rows in (layer, head, sample) order."""
    d = values.shape[-1]
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1).astype(np.float32)), d)
