"""A task's batches and the model's loss on them: pairs of similar length (encoder-decoder), the induction task's
sequences drawn on the fly, or windows of a text (language model), each ordered by the run's seed; the fixed
validation batches, also as the run that trained a checkpoint measured it (run_validation_batches).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn
from tqdm import tqdm

from inference.checkpoint import Checkpoint
from inference.decoding import pad_rows
from inference.tokenizer import Tokenizer
from model.config import ModelConfig
from model.forward import forward
from training.data.common import read_lines
from training.data.induction import random_run
from training.tasks import TaskSpec, data_dir

FIRST_WORD = 4  # ids below are the special pieces (pad, unk, <s>, </s>)


def encode_pairs(tok: Tokenizer, folder: Path, split: str, max_len: int) -> list[tuple[list[int], list[int]]]:
    """(source + eos, bos + target + eos) id pairs, dropping pairs longer than `max_len` on either side."""
    sources, targets = read_lines(folder / f"{split}.src"), read_lines(folder / f"{split}.tgt")
    pairs = []
    for s, t in zip(sources, targets, strict=True):
        src, tgt = tok.encode(s) + [tok.eos_id], [tok.bos_id] + tok.encode(t) + [tok.eos_id]
        if len(src) <= max_len and len(tgt) <= max_len:
            pairs.append((src, tgt))
    return pairs


def pair_batches(pairs: list, batch_tokens: int, rng: random.Random, pad_id: int) -> Iterator[tuple[Tensor, Tensor]]:
    """Endless batches of similar-length pairs, about `batch_tokens` padded target tokens each."""
    while True:
        order = list(range(len(pairs)))
        rng.shuffle(order)
        for start in range(0, len(order), 4096):  # sort within large shuffled pools: little padding, still random
            pool = sorted(order[start : start + 4096], key=lambda i: (len(pairs[i][1]), len(pairs[i][0])))
            batches, batch, width = [], [], 0
            for i in pool:
                width = max(width, len(pairs[i][1]), len(pairs[i][0]))
                if batch and width * (len(batch) + 1) > batch_tokens:
                    batches.append(batch)
                    batch, width = [], max(len(pairs[i][1]), len(pairs[i][0]))
                batch.append(i)
            batches.append(batch)
            rng.shuffle(batches)
            for b in batches:
                yield pad_rows([pairs[i][0] for i in b], pad_id), pad_rows([pairs[i][1] for i in b], pad_id)


def fixed_batches(pairs: list, batch_tokens: int, pad_id: int) -> list[tuple[Tensor, Tensor]]:
    """Every pair once, sorted by length, in batches of about `batch_tokens` padded tokens (validation)."""
    ordered = sorted(pairs, key=lambda p: (len(p[1]), len(p[0])))
    batches, batch = [], []
    for pair in ordered:
        if batch and max(len(pair[0]), len(pair[1])) * (len(batch) + 1) > batch_tokens:
            batches.append(batch)
            batch = []
        batch.append(pair)
    batches.append(batch)
    return [(pad_rows([p[0] for p in b], pad_id), pad_rows([p[1] for p in b], pad_id)) for b in batches if b]


def encode_stream(tok: Tokenizer, lines: list[str]) -> tuple[Tensor, Tensor]:
    """All lines as one id stream (bos line eos …) and the offset of each line's bos."""
    ids, starts = [], []
    for line in tqdm(lines, desc="tokenizing", unit="line", mininterval=2, leave=False):
        starts.append(len(ids))
        ids += [tok.bos_id] + tok.encode(line) + [tok.eos_id]
    return torch.tensor(ids), torch.tensor(starts)


def lm_batches(
    stream: Tensor, starts: Tensor, block: int, batch: int, rng: random.Random, spec: TaskSpec | None = None
) -> Iterator[Tensor]:
    """Endless (batch, block + 1) windows of the stream. A window begins at a document's `<s>` (as inference
    does), the document drawn with a probability proportional to its length (a token drawn uniformly, and the
    start of its document: drawing documents uniformly would fill most windows with the corpus's many one-sentence
    documents), or, for `spec.anywhere_share` of them, at any token; `spec.repeat_span_share` of the windows repeat a
    span of their own text later in the window, and `spec.repeat_random_share` are `<s>` and a run of random
    tokens repeated (see :func:`repeat_span`, :func:`repeated_random`): text that rewards copying from the
    context, which is how induction heads are made to form (Olsson et al. 2022)."""
    anywhere = spec.anywhere_share if spec else 0.0
    span_share = spec.repeat_span_share if spec else 0.0
    random_share = spec.repeat_random_share if spec else 0.0
    usable = starts[starts + block + 1 <= len(stream)].tolist()
    last = len(stream) - block - 1
    end = len(stream)  # a token in a document too near the end to fill a window counts for the one before
    vocab = int(stream.max()) + 1
    bos = int(stream[usable[0]]) if usable else 0
    while True:
        windows = []
        for _ in range(batch):
            if rng.random() < anywhere:
                p = rng.randrange(last + 1)
            else:  # the document holding a uniformly drawn token
                p = usable[bisect.bisect_right(usable, rng.randrange(end)) - 1]
            window = stream[p : p + block + 1]
            roll = rng.random()
            if roll < span_share:
                window = repeat_span(window, rng)
            elif roll < span_share + random_share:
                window = repeated_random(block + 1, bos, vocab, rng)
            windows.append(window)
        yield torch.stack(windows)


def repeat_span(window: Tensor, rng: random.Random, shortest: int = 8) -> Tensor:
    """The window with a span of its first half copied in again at a later point, the rest pushed on and cut to
    the same length: "… A … A …", so the tokens of the second A are predictable from the first."""
    n = len(window)
    length = rng.randint(shortest, max(shortest, n // 4))
    first = rng.randrange(0, max(1, n // 2 - length))
    at = rng.randint(first + length, max(first + length, n - length))
    return torch.cat([window[:at], window[first : first + length], window[at:]])[:n]


def repeated_random(
    n: int, bos: int, vocab: int, rng: random.Random, shortest: int = 8, first_ordinary: int = 4
) -> Tensor:
    """`<s>` and a run of random ordinary tokens, repeated until the window is full (n tokens)."""
    length = rng.randint(shortest, max(shortest, (n - 1) // 2))
    run = [rng.randrange(first_ordinary, vocab) for _ in range(length)]
    ids = [bos] + run * (n // length + 1)
    return torch.tensor(ids[:n])


def induction_batches(vocab_size: int, bos: int, pad: int, batch: int, rng: random.Random) -> Iterator[Tensor]:
    """Endless batches of the induction task: each row `<s>` and a run of random words twice, padded."""
    n_words = vocab_size - FIRST_WORD
    while True:
        rows = []
        for _ in range(batch):
            run = [FIRST_WORD + i for i in random_run(rng, n_words)]
            rows.append([bos, *run, *run])
        yield pad_rows(rows, pad)


def sequence_batches(tok: Tokenizer, lines: list[str], batch: int = 32) -> list[Tensor]:
    """Each line as its own row, `<s>` first, no `</s>` (the induction task's sequences), padded, `batch` a batch."""
    rows = [[tok.bos_id, *tok.encode(line)] for line in lines]
    return [pad_rows(rows[i : i + batch], tok.pad_id) for i in range(0, len(rows), batch)]


def lm_eval_windows(stream: Tensor, block: int, limit: int = 400) -> list[Tensor]:
    step = block + 1
    return [stream[i : i + step] for i in range(0, min(len(stream) - step, limit * step), step)]


def validation_batches(
    tok: Tokenizer, folder: Path, kind: str, max_len: int, batch_tokens: int, block_size: int, split: str = "valid"
) -> list:
    """The fixed batches of a task's valid split, which every validation (and training.average) measures: pairs
    sorted by length (encoder-decoder), or windows of `block_size` + 1 tokens, 16 to a batch (language model).
    `split="test"`: the same batches of the test split (training.quantize measures a change of weights on them)."""
    if kind == "encoder-decoder":
        return fixed_batches(encode_pairs(tok, folder, split, max_len), batch_tokens, tok.pad_id)
    if folder.name == "induction":
        return sequence_batches(tok, read_lines(folder / f"{split}.txt"))
    stream, _ = encode_stream(tok, read_lines(folder / f"{split}.txt"))
    windows = [w.unsqueeze(0) for w in lm_eval_windows(stream, block_size)]
    return [torch.cat(windows[i : i + 16]) for i in range(0, len(windows), 16)]


def run_validation_batches(ckpt: Checkpoint, data_root: Path, split: str = "valid") -> list:
    """The validation batches the run that trained `ckpt` measured it on, from the settings its card records (or
    the same batches of another split)."""
    training = ckpt.card["hyperparameters"]["training"]
    folder = data_dir(training["name"], data_root)
    return validation_batches(
        ckpt.tokenizer,
        folder,
        ckpt.config.kind,
        ckpt.config.max_len,
        training["batch_tokens"],
        training["block_size"],
        split,
    )


def explicit_heads(device: torch.device) -> bool:
    """Whether a training pass on `device` computes its heads step by step (QKᵀ, mask, softmax, V: the path the
    pages show, record=True) rather than by torch's fused kernel. On a GPU it does: the kernel torch picks there
    (cuDNN) plans every new batch shape, and the translator's batches change shape every step; the kernels left
    without cuDNN are not yet checked against the explicit path on such masks (scripts/gpu_attention.py does)."""
    return device.type == "cuda"


def loss_of(
    model: nn.Module, batch: Tensor | tuple[Tensor, Tensor], kind: str, criterion: nn.Module
) -> tuple[Tensor, int]:
    """Mean loss over the non-padding target tokens of a batch, and their number; the batch goes to the model's
    device (batches are built on the CPU)."""
    device = next(model.parameters()).device
    source, text = batch if kind == "encoder-decoder" else (None, batch)  # a pair batch: (source, target)
    source = None if source is None else source.to(device, non_blocking=True)
    text = text.to(device, non_blocking=True)
    logits, _ = forward(model, text[:, :-1], source, record=explicit_heads(device))
    gold = text[:, 1:]
    loss = criterion(logits.reshape(-1, logits.shape[-1]), gold.reshape(-1))
    return loss, int((gold != criterion.ignore_index).sum())


@torch.no_grad()
def evaluate_loss(model: nn.Module, batches: list, kind: str, pad_id: int) -> float:
    model.eval()
    criterion = nn.CrossEntropyLoss(ignore_index=pad_id, reduction="sum")
    total, count = 0.0, 0
    for batch in batches:
        loss, n = loss_of(model, batch, kind, criterion)
        total, count = total + float(loss), count + n
    model.train()
    return total / max(count, 1)


@dataclass
class TrainingData:
    """A run's endless training batches, its fixed validation batches, and their sizes (for the card)."""

    batches: Iterator
    valid: list
    size: dict[str, int]


def training_data(
    spec: TaskSpec, tok: Tokenizer, folder: Path, config: ModelConfig, rng: random.Random
) -> TrainingData:
    """The task's batches: pairs of similar length (encoder-decoder), the induction task's sequences drawn on the
    fly, or windows of the text (language model); `rng` orders them."""
    if config.has_cross_attention:  # pairs of texts, source and target
        train_pairs = encode_pairs(tok, folder, "train", spec.max_train_len)
        batches = pair_batches(train_pairs, spec.batch_tokens, rng, tok.pad_id)
    elif spec.name == "induction":
        stream = torch.zeros(0)  # drawn on the fly: no training file
        per_batch = max(1, spec.batch_tokens // spec.block_size)
        batches = induction_batches(config.vocab_size, tok.bos_id, tok.pad_id, per_batch, rng)
    else:
        stream, starts = encode_stream(tok, read_lines(folder / "train.txt"))
        per_batch = max(1, spec.batch_tokens // spec.block_size)
        batches = lm_batches(stream, starts, spec.block_size, per_batch, rng, spec)
    valid = validation_batches(tok, folder, config.kind, config.max_len, spec.batch_tokens, spec.block_size)
    if config.has_cross_attention:
        size = {"train_pairs": len(train_pairs), "valid_pairs": sum(src.shape[0] for src, _ in valid)}
    else:
        size = {"train_tokens": len(stream), "valid_tokens": sum(v.numel() for v in valid)}
    return TrainingData(batches, valid, size)
