"""`python -m atlas corpus`'s speed and memory: texts a second for a model over texts of an exact token count, beside
the bare traced forward passes of the same batches (what the reduction adds), and peak memory (RSS) of a whole run at
each corpus size, each in a fresh process, with the folder's size per 1,000 texts.

    python bench/corpus.py                                    # lm-english, 2,000 × 64 tokens; memory at 1k, 10k
    python bench/corpus.py --texts 500 --memory-sizes 1000 3000 --memory-model induction

Memory stays flat when the reducers are of a fixed size and the input streams: the peak at 10k texts should be the
peak at 1k (the target printed beside it). Prints `uptime` beside the figures: on a shared machine compare the
ratios of one run, not figures of two.
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
from common import CORPUS  # the repository on sys.path too

from analysis.corpus.run import Settings, run_corpus
from inference.catalog import find_checkpoint
from inference.checkpoint import Checkpoint, load_checkpoint
from inference.decoding import pad_rows
from inference.text import clean_text, encode_first_stack
from model.forward import forward


def write_texts(ckpt: Checkpoint, path: Path, count: int, tokens: int) -> None:
    """`count` distinct texts of `tokens` tokens each (the start token included), cut from plain prose at shifting
    offsets, a text a line."""
    ids = ckpt.tokenizer.encode(" ".join(CORPUS * 4))
    with path.open("w", encoding="utf-8") as file:
        for i in range(count):
            start = (i * 7) % (len(ids) - tokens)
            text = ckpt.tokenizer.decode(ids[start : start + tokens - 1]).replace("\n", " ")
            file.write(text.strip() + "\n")


@torch.inference_mode()
def bare_seconds(ckpt: Checkpoint, path: Path, batch: int) -> float:
    """Seconds of the traced forward passes alone over the file's texts, in the corpus's batches."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = [encode_first_stack(ckpt, clean_text(line).text, []) for line in lines]
    start = time.perf_counter()
    for i in range(0, len(rows), batch):
        forward(ckpt.model, pad_rows(rows[i : i + batch], ckpt.config.pad_id))
    return time.perf_counter() - start


def child(model: str, count: int, tokens: int, batch: int) -> None:
    """One whole run in this process: prints peak RSS (MB) and the folder's MB."""
    ckpt = load_checkpoint(find_checkpoint(model))
    with tempfile.TemporaryDirectory() as tmp:
        texts = Path(tmp) / "texts.txt"
        write_texts(ckpt, texts, count, tokens)
        out = run_corpus(ckpt, texts, Path(tmp) / "out", Settings(batch=batch), progress=False)
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, size / 2**20)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="lm-english")
    p.add_argument("--texts", type=int, default=2000)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: the fastest on a shared 2-core machine)")
    p.add_argument("--memory-model", default=None, help="the model of the memory runs (default: --model)")
    p.add_argument("--memory-sizes", type=int, nargs="*", default=[1000, 10000])
    p.add_argument("--child", nargs=4, metavar=("MODEL", "TEXTS", "TOKENS", "BATCH"), help=argparse.SUPPRESS)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.child:
        child(args.child[0], *(int(v) for v in args.child[1:]))
        return
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    print(f"torch threads: {args.threads}, batch {args.batch}\n")
    ckpt = load_checkpoint(find_checkpoint(args.model))
    tmp = Path(tempfile.mkdtemp())
    try:
        texts = tmp / "texts.txt"
        write_texts(ckpt, texts, args.texts, args.tokens)
        bare = bare_seconds(ckpt, texts, args.batch)
        start = time.perf_counter()
        run_corpus(ckpt, texts, tmp / "out", Settings(batch=args.batch), progress=False)
        whole = time.perf_counter() - start
    finally:
        shutil.rmtree(tmp)
    print(f"| {args.model}, {args.texts:,} texts × {args.tokens} tokens | texts/s | seconds |")
    print("|---|---|---|")
    print(f"| corpus run (forward + reduction + shards) | {args.texts / whole:.1f} | {whole:.1f} |")
    print(f"| traced forward passes alone | {args.texts / bare:.1f} | {bare:.1f} |")
    print(f"| the reduction's share of the run | {1 - bare / whole:.0%} | |\n")
    model = args.memory_model or args.model
    print(f"| {model}, texts × {args.tokens} tokens | peak RSS MB | folder MB | MB per 1,000 texts |")
    print("|---|---|---|---|")
    peaks = []
    for count in args.memory_sizes:
        command = [sys.executable, __file__, "--child", model, str(count), str(args.tokens), str(args.batch)]
        command += ["--threads", str(args.threads)]
        rss, size = (
            float(v) for v in subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()
        )
        peaks.append(rss)
        print(f"| {count:,} | {rss:.0f} | {size:.1f} | {size / count * 1000:.2f} |")
    if len(peaks) > 1:
        print(
            f"\npeak at {args.memory_sizes[-1]:,} / peak at {args.memory_sizes[0]:,}: {peaks[-1] / peaks[0]:.2f} "
            "(target: about 1, flat)"
        )


if __name__ == "__main__":
    main()
