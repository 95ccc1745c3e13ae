"""The model run with heads switched off or patched, in chunks of its worker's heavy lane so that other sessions'
pages run between them: ablation, the head ranking, activation and attribution patching, the methods' agreement.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from analysis import agreement as agree
from analysis import patching
from analysis.ablation import (
    Effect,
    RankingSetup,
    ablation_effect,
    most_important_first,
    rank_block,
    rank_by_attribution,
    ranking_setup,
)
from ui.cache.models import MAX_TOKENS, TOP_K, heavy_chunk, model_worker
from ui.cache.sources import Source
from ui.kept import kept


@kept("Running the model without those heads…")
def ablation(ctx: Source, heads: tuple[tuple[str, tuple[int, ...]], ...], mode: str) -> Effect:
    """Predictions with `heads` ((block name, heads) pairs) switched off, beside the intact model's; the
    worker runs it. A translator's intact output is the one its analysis decoded (ModelWorker.output): once."""
    worker = model_worker(ctx.path, ctx.stamp)
    output = worker.output(ctx.text, MAX_TOKENS)[1:] if ctx.ckpt.config.has_cross_attention else None
    return worker.call(ablation_effect, ctx.text, dict(heads), mode, TOP_K, output, tokens=worker.tokens(ctx.text))


@kept()
def _ranking_setup(ctx: Source) -> RankingSetup:
    worker = model_worker(ctx.path, ctx.stamp)
    return heavy_chunk(worker, ranking_setup, ctx.text, tokens=worker.tokens(ctx.text))


@kept()
def _heads_ranking(ctx: Source, mode: str, block: str, heads: tuple[int, ...]) -> list[tuple[str, int, float]]:
    worker = model_worker(ctx.path, ctx.stamp)
    return heavy_chunk(worker, rank_block, _ranking_setup(ctx), block, mode, heads, tokens=worker.tokens(ctx.text))


def head_ranking(
    ctx: Source, mode: str, progress: Callable[[int, int, str], None] | None = None
) -> list[tuple[str, int, float]]:
    """Every head switched off alone, the most important first (analysis.ablation.head_importance), a few heads per
    chunk of the model's worker (ModelWorker.chunk_rows: one pass a head), so that other sessions' pages run between
    them; `progress(done, blocks, block)` before each chunk. Cached per chunk."""
    setup = _ranking_setup(ctx)
    worker = model_worker(ctx.path, ctx.stamp)
    step = worker.chunk_rows(worker.tokens(ctx.text))
    table = []
    for done, (block, n_heads) in enumerate(setup.blocks):
        for first in range(0, n_heads, step):
            if progress is not None:
                progress(done, len(setup.blocks), block)
            table += _heads_ranking(ctx, mode, block, tuple(range(first, min(n_heads, first + step))))
    return most_important_first(table)


@kept("Ranking every head with one backward pass…")
def head_ranking_approximate(ctx: Source, mode: str) -> list[tuple[str, int, float]]:
    """Every head's ablation approximated at once (analysis.ablation.rank_by_attribution), by the model's worker."""
    worker = model_worker(ctx.path, ctx.stamp)
    return heavy_chunk(worker, rank_by_attribution, _ranking_setup(ctx), mode, tokens=worker.tokens(ctx.text))


@kept()
def _patch_runs(ctx: Source, second: str, answer: int | None, versus: int | None) -> patching.Runs:
    worker = model_worker(ctx.path, ctx.stamp)
    return heavy_chunk(worker, patching.prepare, ctx.text, second, answer, versus, tokens=2 * worker.tokens(ctx.text))


@kept()
def _patch_batch(
    ctx: Source, second: str, answer: int | None, versus: int | None, what: str, start: int, size: int
) -> np.ndarray:
    worker = model_worker(ctx.path, ctx.stamp)
    runs = _patch_runs(ctx, second, answer, versus)
    chosen = patching.cells(ctx.ckpt, runs, what)[start : start + size]
    tokens = len(chosen) * worker.tokens(second)
    return heavy_chunk(worker, patching.run_cells, runs, what, chosen, tokens=tokens)


def activation_patching(
    ctx: Source,
    second: str,
    what: str,
    answer: int | None,
    versus: int | None,
    progress: Callable[[int, int], None] | None = None,
) -> patching.Patching:
    """`second` run with each head (or each layer × position of the stream) taken from `ctx.text`'s run
    (analysis.patching), a few patched runs per chunk of the model's worker (at most patching.BATCH, within
    ModelWorker.chunk_rows), so that other sessions' pages run between them; `progress(done, total)` before each.
    Cached per chunk; raises PairError."""
    runs = _patch_runs(ctx, second, answer, versus)
    todo = patching.cells(ctx.ckpt, runs, what)
    worker = model_worker(ctx.path, ctx.stamp)
    size = min(patching.BATCH, worker.chunk_rows(worker.tokens(second)))
    values = []
    for start in range(0, len(todo), size):
        if progress is not None:
            progress(start, len(todo))
        values.append(_patch_batch(ctx, second, answer, versus, what, start, size))
    return patching.finish(ctx.ckpt, runs, what, np.concatenate(values))


@kept("Approximating each head's patch with one backward pass…")
def attribution_patching(ctx: Source, second: str, answer: int | None, versus: int | None) -> patching.Patching:
    """Every head's patch approximated (analysis.patching.attribution_patch), run by the model's worker."""
    worker = model_worker(ctx.path, ctx.stamp)
    tokens = 2 * worker.tokens(second)
    return heavy_chunk(worker, patching.attribution_patch, ctx.text, second, answer, versus, tokens=tokens)


@kept()
def _agreement_setup(ctx: Source, position: int) -> agree.Setup:
    worker = model_worker(ctx.path, ctx.stamp)
    return heavy_chunk(worker, agree.setup, ctx.text, position, tokens=3 * worker.tokens(ctx.text))


@kept()
def _agreement_one_pass(ctx: Source, position: int) -> dict[str, np.ndarray]:
    worker = model_worker(ctx.path, ctx.stamp)
    s = _agreement_setup(ctx, position)
    return heavy_chunk(worker, agree.one_pass_scores, s, tokens=3 * worker.tokens(ctx.text))


@kept()
def _agreement_ablation(ctx: Source, position: int, mode: str, layer: int, heads: tuple[int, ...]) -> np.ndarray:
    worker = model_worker(ctx.path, ctx.stamp)
    s = _agreement_setup(ctx, position)
    tokens = len(heads) * worker.tokens(ctx.text)
    return heavy_chunk(worker, agree.ablation_scores, s, mode, layer, heads, tokens=tokens)


@kept()
def _agreement_patch(ctx: Source, position: int, start: int, size: int) -> np.ndarray:
    worker = model_worker(ctx.path, ctx.stamp)
    runs = _agreement_setup(ctx, position).runs
    chosen = patching.cells(ctx.ckpt, runs, "heads")[start : start + size]
    return heavy_chunk(worker, patching.run_cells, runs, "heads", chosen, tokens=len(chosen) * worker.tokens(ctx.text))


def agreement(ctx: Source, position: int, progress: Callable[[int, int], None] | None = None) -> agree.Agreement:
    """Every self-attention head's importance for the prediction after `position` by every method
    (analysis.agreement), in chunks of the model's worker — the one-pass methods, a few ablated heads, a batch of
    patched runs — so that other sessions' pages run between them; `progress(done, total)` before each. Cached per
    chunk, so per (model, text, position)."""
    s = _agreement_setup(ctx, position)
    worker = model_worker(ctx.path, ctx.stamp)
    layers, n_heads = ctx.ckpt.config.n_decoder_layers, ctx.ckpt.config.n_heads
    step = worker.chunk_rows(worker.tokens(ctx.text))
    ablations = [
        (mode, layer, tuple(range(first, min(n_heads, first + step))))
        for mode in ("zero", "mean")
        for layer in range(layers)
        for first in range(0, n_heads, step)
    ]
    size = min(patching.BATCH, step)
    patches = [] if s.runs is None else list(range(0, layers * n_heads, size))
    total = 1 + len(ablations) + len(patches)
    tell = progress or (lambda done, total: None)
    tell(0, total)
    scores = dict(_agreement_one_pass(ctx, position))
    found: dict[str, list[np.ndarray]] = {"zero": [], "mean": []}
    for done, (mode, layer, heads) in enumerate(ablations, start=1):
        tell(done, total)
        found[mode].append(_agreement_ablation(ctx, position, mode, layer, heads))
    for mode, parts in found.items():
        scores[f"ablation ({mode})"] = np.concatenate(parts).reshape(layers, n_heads)
    values = []
    for done, start in enumerate(patches, start=1 + len(ablations)):
        tell(done, total)
        values.append(_agreement_patch(ctx, position, start, size))
    if s.runs is None:
        scores["activation patching"] = np.full((layers, n_heads), np.nan)
    else:
        scores["activation patching"] = patching.finish(ctx.ckpt, s.runs, "heads", np.concatenate(values)).scores
    return agree.finish(ctx.ckpt, s, scores)
