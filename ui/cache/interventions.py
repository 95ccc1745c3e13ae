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
    rank_by_attribution,
    rank_sublayer,
    ranking_setup,
)
from ui.cache.models import MAX_TOKENS, TOP_K, heavy_chunk, model_worker
from ui.cache.sources import Source
from ui.kept import kept


@kept("Running the model without those heads…")
def ablation(source: Source, heads: tuple[tuple[str, tuple[int, ...]], ...], mode: str) -> Effect:
    """Predictions with `heads` ((sub-layer name, heads) pairs) switched off, beside the intact model's; the
    worker runs it. A translator's intact output is the one its analysis decoded (ModelWorker.output): once."""
    worker = model_worker(source.path, source.stamp)
    output = worker.output(source.text, MAX_TOKENS)[1:] if source.ckpt.config.has_cross_attention else None
    return worker.call(
        ablation_effect, source.text, dict(heads), mode, TOP_K, output, tokens=worker.tokens(source.text)
    )


@kept()
def _ranking_setup(source: Source) -> RankingSetup:
    worker = model_worker(source.path, source.stamp)
    return heavy_chunk(worker, ranking_setup, source.text, tokens=worker.tokens(source.text))


@kept()
def _heads_ranking(source: Source, mode: str, sublayer: str, heads: tuple[int, ...]) -> list[tuple[str, int, float]]:
    worker = model_worker(source.path, source.stamp)
    return heavy_chunk(
        worker, rank_sublayer, _ranking_setup(source), sublayer, mode, heads, tokens=worker.tokens(source.text)
    )


def head_ranking(
    source: Source, mode: str, progress: Callable[[int, int, str], None] | None = None
) -> list[tuple[str, int, float]]:
    """Every head switched off alone, the most important first (analysis.ablation.head_importance), a few heads per
    chunk of the model's worker (ModelWorker.chunk_rows: one pass a head), so that other sessions' pages run between
    them; `progress(done, sub-layers, sub-layer)` before each chunk. Cached per chunk."""
    setup = _ranking_setup(source)
    worker = model_worker(source.path, source.stamp)
    step = worker.chunk_rows(worker.tokens(source.text))
    table = []
    for done, (sublayer, n_heads) in enumerate(setup.sublayers):
        for first in range(0, n_heads, step):
            if progress is not None:
                progress(done, len(setup.sublayers), sublayer)
            table += _heads_ranking(source, mode, sublayer, tuple(range(first, min(n_heads, first + step))))
    return most_important_first(table)


@kept("Ranking every head with one backward pass…")
def head_ranking_approximate(source: Source, mode: str) -> list[tuple[str, int, float]]:
    """Every head's ablation approximated at once (analysis.ablation.rank_by_attribution), by the model's worker."""
    worker = model_worker(source.path, source.stamp)
    return heavy_chunk(worker, rank_by_attribution, _ranking_setup(source), mode, tokens=worker.tokens(source.text))


@kept()
def _patch_runs(source: Source, second: str, answer: int | None, versus: int | None) -> patching.Runs:
    worker = model_worker(source.path, source.stamp)
    return heavy_chunk(
        worker, patching.prepare, source.text, second, answer, versus, tokens=2 * worker.tokens(source.text)
    )


@kept()
def _patch_batch(
    source: Source, second: str, answer: int | None, versus: int | None, what: str, start: int, size: int
) -> np.ndarray:
    worker = model_worker(source.path, source.stamp)
    runs = _patch_runs(source, second, answer, versus)
    chosen = patching.cells(source.ckpt, runs, what)[start : start + size]
    tokens = len(chosen) * worker.tokens(second)
    return heavy_chunk(worker, patching.run_cells, runs, what, chosen, tokens=tokens)


def activation_patching(
    source: Source,
    second: str,
    what: str,
    answer: int | None,
    versus: int | None,
    progress: Callable[[int, int], None] | None = None,
) -> patching.Patching:
    """`second` run with each head (or each layer × position of the stream) taken from `source.text`'s run
    (analysis.patching), a few patched runs per chunk of the model's worker (at most patching.BATCH, within
    ModelWorker.chunk_rows), so that other sessions' pages run between them; `progress(done, total)` before each.
    Cached per chunk; raises PairError."""
    runs = _patch_runs(source, second, answer, versus)
    todo = patching.cells(source.ckpt, runs, what)
    worker = model_worker(source.path, source.stamp)
    size = min(patching.BATCH, worker.chunk_rows(worker.tokens(second)))
    values = []
    for start in range(0, len(todo), size):
        if progress is not None:
            progress(start, len(todo))
        values.append(_patch_batch(source, second, answer, versus, what, start, size))
    return patching.finish(source.ckpt, runs, what, np.concatenate(values))


@kept("Approximating each head's patch with one backward pass…")
def attribution_patching(source: Source, second: str, answer: int | None, versus: int | None) -> patching.Patching:
    """Every head's patch approximated (analysis.patching.attribution_patch), run by the model's worker."""
    worker = model_worker(source.path, source.stamp)
    tokens = 2 * worker.tokens(second)
    return heavy_chunk(worker, patching.attribution_patch, source.text, second, answer, versus, tokens=tokens)


@kept()
def _agreement_setup(source: Source, position: int) -> agree.Setup:
    worker = model_worker(source.path, source.stamp)
    return heavy_chunk(worker, agree.setup, source.text, position, tokens=3 * worker.tokens(source.text))


@kept()
def _agreement_one_pass(source: Source, position: int) -> dict[str, np.ndarray]:
    worker = model_worker(source.path, source.stamp)
    s = _agreement_setup(source, position)
    return heavy_chunk(worker, agree.one_pass_scores, s, tokens=3 * worker.tokens(source.text))


@kept()
def _agreement_ablation(source: Source, position: int, mode: str, layer: int, heads: tuple[int, ...]) -> np.ndarray:
    worker = model_worker(source.path, source.stamp)
    s = _agreement_setup(source, position)
    tokens = len(heads) * worker.tokens(source.text)
    return heavy_chunk(worker, agree.ablation_scores, s, mode, layer, heads, tokens=tokens)


@kept()
def _agreement_patch(source: Source, position: int, start: int, size: int) -> np.ndarray:
    worker = model_worker(source.path, source.stamp)
    runs = _agreement_setup(source, position).runs
    chosen = patching.cells(source.ckpt, runs, "heads")[start : start + size]
    return heavy_chunk(
        worker, patching.run_cells, runs, "heads", chosen, tokens=len(chosen) * worker.tokens(source.text)
    )


def agreement(source: Source, position: int, progress: Callable[[int, int], None] | None = None) -> agree.Agreement:
    """Every self-attention head's importance for the prediction after `position` by every method
    (analysis.agreement), in chunks of the model's worker — the one-pass methods, a few ablated heads, a batch of
    patched runs — so that other sessions' pages run between them; `progress(done, total)` before each. Cached per
    chunk, so per (model, text, position)."""
    s = _agreement_setup(source, position)
    worker = model_worker(source.path, source.stamp)
    layers, n_heads = source.ckpt.config.n_decoder_layers, source.ckpt.config.n_heads
    step = worker.chunk_rows(worker.tokens(source.text))
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
    scores = dict(_agreement_one_pass(source, position))
    found: dict[str, list[np.ndarray]] = {"zero": [], "mean": []}
    for done, (mode, layer, heads) in enumerate(ablations, start=1):
        tell(done, total)
        found[mode].append(_agreement_ablation(source, position, mode, layer, heads))
    for mode, parts in found.items():
        scores[f"ablation ({mode})"] = np.concatenate(parts).reshape(layers, n_heads)
    values = []
    for done, start in enumerate(patches, start=1 + len(ablations)):
        tell(done, total)
        values.append(_agreement_patch(source, position, start, size))
    if s.runs is None:
        scores["activation patching"] = np.full((layers, n_heads), np.nan)
    else:
        scores["activation patching"] = patching.finish(source.ckpt, s.runs, "heads", np.concatenate(values)).scores
    return agree.finish(source.ckpt, s, scores)
