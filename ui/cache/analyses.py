"""A text's Analysis, from the checkpoint's worker, and what the pages ask of it: a fragment's weak hold on it, a
snapshot's, one head's scores and values, a reference forced through the decoder, a fork, the downloads.
"""

from __future__ import annotations

import weakref

import streamlit as st

from analysis import fork
from analysis.analyze import head_detail as analyze_head_detail
from analysis.export import to_json, to_npz_bytes
from analysis.forced import Forced, ForcedRow, scored
from analysis.forced import forced as forced_rows
from analysis.record import Analysis, HeadDetail
from inference.checkpoint import Checkpoint
from inference.decoding import Sampling
from inference.memory import MISSING
from ui.cache.models import MAX_TOKENS, TOP_K, model_worker, snapshot_worker
from ui.cache.sources import TRACES, Shown, Source, TraceGoneError
from ui.kept import kept
from ui.streamlit_private import run_yield_check

# The Analysis each page last handed its fragment, by its source's key, held weakly. Streamlit keeps a fragment's
# arguments in the session until the page runs again, so a Shown there would pin its analysis (70 MB for SmolLM2 at
# 255 tokens) in every session, out of the byte budget's reach: a fragment is given the bare source (`held`) and
# takes the analysis back from here while anything (the caches) still holds it (`redrawn`).
DRAWN: weakref.WeakValueDictionary[tuple, Analysis] = weakref.WeakValueDictionary()


def held(shown: Shown) -> Source:
    """`shown` for a fragment: its source, its analysis kept only weakly (DRAWN); the fragment calls `redrawn`."""
    DRAWN[shown.key] = shown.analysis
    return shown.source


def redrawn(source: Source) -> Shown:
    """What a fragment draws: `source` with the analysis its page drew while anything still holds it, else looked
    up again (`analysed`)."""
    kept = DRAWN.get(source.key)
    return analysed(source) if kept is None else source.with_analysis(kept)


def analysis(
    source: Source, full: bool = False, continuation: int = 0, sampling: Sampling | None = None, heavy: bool = False
) -> Analysis:
    """The model's Analysis of `source.text` (every head, the predictions); raises InputError.

    The page submits to the checkpoint's worker and waits: sessions typing at once share one batch. The worker
    keeps results (analysis.worker): a rerun gets the same object back, not a copy. `full=True`: with the raw
    scores and V of every sub-layer (the attention-math page, the export); else the pages' lighter copy. A language
    model first writes `continuation` tokens (greedy, or `sampling`). `heavy`: one of many texts the page asks for
    at once (a detector's), queued in the session's heavy lane. A translator's source with a `reference`: its
    decoder reads the reference (teacher forcing) instead of writing its own output."""
    worker = model_worker(source.path, source.stamp)
    asked = {"k": TOP_K, "full": full, "continuation": continuation, "sampling": sampling}
    kept = worker.cached(source.text, source.reference, **asked)
    if kept is not None:
        return kept
    with st.spinner("Running the model…"):
        return worker.analyze(
            source.text, source.reference, **asked, heavy=heavy, waiting=run_yield_check() if heavy else None
        )


def analysed(source: Source, full: bool = False, heavy: bool = False) -> Shown:
    """`source` with its Analysis: a checkpoint's of its text (see `analysis`; raises InputError), a trace file's as
    opened (raises TraceGoneError when the server no longer holds it)."""
    if source.has_model:
        return source.with_analysis(analysis(source, full, heavy=heavy))
    found = TRACES.get(source.digest, MISSING)
    if found is MISSING:
        raise TraceGoneError(
            f"The trace file {source.name} is no longer held by the server: its memory went to newer work. Open it "
            "again on the page “Open a trace file”."
        )
    return source.with_analysis(found)


def snapshot_analysis(source: Source, step: int, target: str | None = None) -> Analysis:
    """The Analysis of `source.text` by the model as it was at training step `step`; raises InputError. `target`: an
    encoder-decoder's output given to its decoder (teacher forcing) instead of the output it writes itself, so
    that every step's decoder reads the same tokens."""
    worker = snapshot_worker(source.path, source.stamp, step)
    kept = worker.cached(source.text, target, k=TOP_K)
    if kept is not None:
        return kept
    with st.spinner(f"Running the model of step {step:,}…"):
        return worker.analyze(source.text, target, k=TOP_K)


@kept("Feeding the reference to the decoder…")
def forced(source: Source, reference: str) -> Forced:
    """Each token of `reference` (a translation of `source.text`, or a language model's continuation of it) with the
    model's probability, rank and own choice there (analysis.forced); raises InputError. Run by the worker."""
    worker = model_worker(source.path, source.stamp)
    return worker.call(forced_rows, source.text, reference, tokens=worker.tokens(source.text + reference))


@kept()
def certainty(source: Source, target_ids: tuple[int, ...], start: int) -> tuple[ForcedRow, ...]:
    """How sure the model was of each token of `target_ids[start:]`, the decoder input an analysis of `source.text`
    gave (analysis.forced.scored): its output's pieces, shaded by the page. Run by the worker."""
    worker = model_worker(source.path, source.stamp)
    return worker.call(scored, source.text, target_ids, start, tokens=len(target_ids))


def _fork(ckpt: Checkpoint, text: str, prompt: tuple[int, ...], choice: int, max_tokens: int) -> fork.Fork:
    tok = ckpt.tokenizer
    source = fork.source_of(ckpt, text)
    return fork.fork(ckpt.model, list(prompt), source, 0, choice, max_tokens, tok.pieces, tok.never_written)


@kept("Writing both continuations…")
def forked(source: Source, prompt: tuple[int, ...], choice: int, max_tokens: int) -> fork.Fork:
    """The decoder's likeliest next token after `prompt` (its ids, bos first) and its `choice`-th (from 1), each
    continued greedily for up to `max_tokens` tokens (analysis.fork), one cache of the prompt shared; by the worker."""
    worker = model_worker(source.path, source.stamp)
    return worker.call(_fork, source.text, prompt, choice, max_tokens, tokens=worker.tokens(source.text) + max_tokens)


@kept("Computing that head's scores and values…")
def head_detail(source: Source, sublayer: str, head: int) -> HeadDetail:
    """One head's raw scores and values for `source.text` (analysis.analyze.head_detail), run by the worker when the
    attention-math page opens that head: the pages' analysis keeps no scores or values. A translator's output is
    the one its analysis decoded (ModelWorker.output), fed as it is."""
    worker = model_worker(source.path, source.stamp)
    target = worker.output(source.text, MAX_TOKENS) if source.ckpt.config.has_cross_attention else None
    return worker.call(
        analyze_head_detail, source.text, sublayer, head, TOP_K, MAX_TOKENS, target, tokens=worker.tokens(source.text)
    )


def export_bytes(source: Source, fmt: str) -> bytes:
    """The whole Analysis as JSON or NPZ (analysis.export, docs/trace-format.md); run when a download button is
    clicked. A trace is written as it was read: opened again, it draws the same."""
    full = analysed(source, full=True).analysis
    return to_json(full).encode("utf-8") if fmt == "json" else to_npz_bytes(full)
