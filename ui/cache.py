"""The cached model calls, shared by every browser session: a checkpoint loaded once, one model worker per
checkpoint, the Analysis of a text, training snapshots, ablations and the head ranking. Everything but the loaded
models and their workers (at most four, charged to it) is kept in the server's one byte budget (ui.kept).

A page reads from a `Source` (a loaded checkpoint and a text, or an opened trace file in their place) and draws a
`Shown` (the source with its Analysis). A call about a text takes the source and is cached by its key (path,
modification time, text; ui.kept reads it): hashing the loaded model or an Analysis on every rerun would cost more
than the call.
"""

from __future__ import annotations

import gc
import hashlib
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_run_yield_check, get_script_run_ctx

from analysis import agreement as agree
from analysis import attribution, circuits, fork, lesson, patching, score_parts
from analysis import token_attribution as tokens_back
from analysis.ablation import (
    Effect,
    RankingSetup,
    ablation_effect,
    most_important_first,
    rank_block,
    rank_by_attribution,
    ranking_setup,
)
from analysis.analyze import head_detail as analyze_head_detail
from analysis.analyze import positional_table as model_positional_table
from analysis.export import to_json, to_npz_bytes
from analysis.forced import Forced, ForcedRow, scored
from analysis.forced import forced as forced_rows
from analysis.imported import TraceError, read_trace
from analysis.induction import InductionReport, measure
from analysis.lesson import CacheTiming, Copying, Cost, Stream, head_on_probe
from analysis.record import Analysis, HeadDetail
from analysis.worker import PAGES, ModelWorker
from inference import catalog
from inference.checkpoint import Checkpoint, load_checkpoint
from inference.decoding import Sampling
from inference.memory import BUDGET, MISSING, ByteCache, measured_bytes
from inference.snapshots import Snapshot, list_snapshots, load_snapshot
from ui.kept import SHARE, kept

T = TypeVar("T")
TOP_K = 5  # the predictions kept per position
MAX_TOKENS = 64  # what a translator writes for the pages (the worker's default): its analysis, ablation, one head


@dataclass(frozen=True)
class Source:
    """What a page reads from: a loaded checkpoint and the text to analyse, or an opened trace file in their place
    (attention computed elsewhere, opened on views/trace.py: no weights, so nothing can be run on it). A page asks
    `has_model` what it may do with one, never which of the two it is."""

    name: str  # what the pages name it by (charts' file names): the checkpoint's name, or the file's as uploaded
    text: str  # the text to analyse; a trace file's: the text its attention was computed on
    entry: catalog.Entry | None = None  # the checkpoint; None for a trace file
    ckpt: Checkpoint | None = None
    stamp: float = 0.0  # the checkpoint's modification time (catalog.stamp): a rewritten checkpoint is a new key
    digest: str = ""  # a trace file's sha256: the key of its Analysis in TRACES, shared by sessions opening one file
    reference: str | None = None  # a translator's decoder reads this text (teacher forcing), not its own output

    @classmethod
    def checkpoint(cls, entry: catalog.Entry, ckpt: Checkpoint, stamp: float, text: str) -> Source:
        """The chosen, loaded checkpoint and the text to analyse."""
        return cls(entry.name, text, entry, ckpt, stamp)

    @classmethod
    def trace(cls, name: str, digest: str, text: str) -> Source:
        """An opened trace file (open_trace), named `name`, its bytes' sha256 `digest`."""
        return cls(name, text, digest=digest)

    @property
    def has_model(self) -> bool:
        """Whether a model stands behind it, to run on another text, ablate or probe: a checkpoint's, not a trace
        file's."""
        return self.ckpt is not None

    @property
    def path(self) -> str:
        """The checkpoint's folder ("" for a trace file)."""
        return str(self.entry.path) if self.entry is not None else ""

    @property
    def key(self) -> tuple:
        """What names this source in a cache (ui.kept): a checkpoint's path, modification time, text and reference;
        a trace file's bytes, not its name."""
        return (self.path, self.stamp, self.text, self.reference) if self.has_model else ("trace", self.digest)

    def with_text(self, text: str) -> Source:
        """The same checkpoint with another text (and no analysis)."""
        if not self.has_model:
            raise ValueError(f"the trace file {self.name} holds one text's attention: there is no model to run")
        return Source(self.name, text, self.entry, self.ckpt, self.stamp)

    def with_reference(self, reference: str | None) -> Source:
        """The same checkpoint and text, its decoder fed `reference` (teacher forcing) instead of its own output."""
        if not self.has_model:
            raise ValueError(f"the trace file {self.name} holds one text's attention: there is no model to run")
        return Source(self.name, self.text, self.entry, self.ckpt, self.stamp, reference=reference)

    def with_analysis(self, analysis: Analysis) -> Shown:
        """This source with its Analysis: what a page draws."""
        fields = (self.name, self.text, self.entry, self.ckpt, self.stamp, self.digest, self.reference)
        return Shown(*fields, analysis=analysis)


@dataclass(frozen=True)
class Shown(Source):
    """A source with its Analysis, looked up once per rerun (`shown`): what a page draws. The page hands it to every
    widget and chart, which read `analysis` instead of looking it up again."""

    analysis: Analysis = field(kw_only=True)

    @property
    def source(self) -> Source:
        """This without its Analysis: what a session may keep (a button's argument, a fragment's: see `held`)
        without pinning the analysis out of the byte budget's reach."""
        return Source(self.name, self.text, self.entry, self.ckpt, self.stamp, self.digest, self.reference)


class TraceGoneError(LookupError):
    """The server let an opened trace's Analysis go (the byte budget needed room): it must be opened again."""


# Opened traces' Analyses by sha256, in the server's byte budget like everything else kept: a session holds only the
# file's name, text and hash (a Source), so a class opening traces cannot take more than this store's share; the least
# recently drawn goes first, and its session is told to open it again.
TRACES = ByteCache(SHARE)
# The largest trace file an uploader takes: Streamlit refuses a larger one itself (its own message), and
# .streamlit/config.toml's server.maxUploadSize is the same number for the whole server. What a trace takes as .npz,
# as JSON and parsed, by length and model: python bench/trace_size.py.
MAX_UPLOAD_MB = 100
# Trace files are parsed one at a time, server-wide: ten opened at once cost one parse's memory, not ten.
READING = threading.Lock()
# The Analysis each page last handed its fragment, by its source's key, held weakly. Streamlit keeps a fragment's
# arguments in the session until the page runs again, so a Shown there would pin its analysis (70 MB for SmolLM2 at
# 255 tokens) in every session, out of the byte budget's reach: a fragment is given the bare source (`held`) and
# takes the analysis back from here while anything (the caches) still holds it (`redrawn`).
DRAWN: weakref.WeakValueDictionary[tuple, Analysis] = weakref.WeakValueDictionary()


def open_trace(data: bytes, name: str) -> Source:
    """Read a trace file's bytes (analysis.imported.read_trace) once per content, keep its Analysis in TRACES and
    return the Source naming it; raises TraceError, also for a trace larger than the store may keep."""
    digest = hashlib.sha256(data).hexdigest()

    def read() -> Analysis:
        with READING:  # one file parsed at a time, each within what the store may keep: measured before parsing
            return read_trace(data, name, max_bytes=min(TRACES.max_bytes, BUDGET.owner_room()))

    analysis = TRACES.get_or_compute(digest, read)
    if TRACES.get(digest, MISSING) is MISSING:
        size, room = measured_bytes(analysis), min(TRACES.max_bytes, BUDGET.owner_room())
        raise TraceError(
            f"{name}: its attention takes {size / 2**20:,.0f} MB in memory, more than this server keeps for a trace "
            f"({room / 2**20:,.0f} MB now): export a shorter text, or fewer layers"
        )
    return Source.trace(name, digest, analysis.text)


def held(ctx: Shown) -> Source:
    """`ctx` for a fragment: its source, its analysis kept only weakly (DRAWN); the fragment calls `redrawn`."""
    DRAWN[ctx.key] = ctx.analysis
    return ctx.source


def redrawn(source: Source) -> Shown:
    """What a fragment draws: `source` with the analysis its page drew while anything still holds it, else looked
    up again (`shown`)."""
    kept = DRAWN.get(source.key)
    return shown(source) if kept is None else source.with_analysis(kept)


def session_id() -> str | None:
    """The browser session running this page (a model worker serves sessions in turn); None outside a page."""
    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else ctx.session_id


BUDGET.owner = session_id  # what a page's work keeps counts in its session's share of the byte budget


@contextmanager
def page_running(first: bool = False) -> Iterator[None]:
    """Around a page's run: this session is drawing a page, which heavy work leaves room for (analysis.worker);
    `first`: a live class's page (its teacher's or a follower's), which no heavy chunk starts beside."""
    with PAGES.running(session_id(), first):
        yield


def heavy_chunk(worker: ModelWorker, fn: Callable[..., T], *args, tokens: int = 0) -> T:
    """`fn(checkpoint, *args)`, a chunk of long work, in this session's heavy lane of the worker (analysis.worker:
    the class's pages go first, the heavy sessions share the rest). Dropped unrun when this session stops waiting:
    it left, pressed Cancel or changed a widget (Streamlit then stops the page's run at this wait)."""
    return worker.call(fn, *args, tokens=tokens, heavy=True, waiting=get_run_yield_check())


@st.cache_resource(max_entries=4, show_spinner="Loading the model…")
def load_model(path: str, stamp: float) -> Checkpoint:
    """Load a checkpoint once per (path, modification time), its bytes charged to the server's budget while it is
    loaded (inference.memory); raises CheckpointError."""
    ckpt = load_checkpoint(path)
    BUDGET.charge(ckpt, measured_bytes(ckpt.model))
    return ckpt


def _stop(worker: ModelWorker) -> None:
    worker.stop()


@st.cache_resource(max_entries=4, show_spinner=False, on_release=_stop)
def model_worker(path: str, stamp: float) -> ModelWorker:
    """The worker that runs this checkpoint's model for every session (analysis.worker: a thread for the pages'
    light work, batching requests made at once, and a lower-priority one for heavy chunks). Owned by the cache:
    evicted or cleared, it is stopped (its threads end, what it kept is dropped)."""
    return ModelWorker(load_model(path, stamp), owner=session_id)


def analysis(
    ctx: Source, full: bool = False, continuation: int = 0, sampling: Sampling | None = None, heavy: bool = False
) -> Analysis:
    """The model's Analysis of `ctx.text` (every head, the predictions); raises InputError.

    The page submits to the checkpoint's worker and waits: sessions typing at once share one batch. The worker
    keeps results (analysis.worker): a rerun gets the same object back, not a copy. `full=True`: with the raw
    scores and V of every block (the attention-math page, the export); else the pages' lighter copy. A language
    model first writes `continuation` tokens (greedy, or `sampling`). `heavy`: one of many texts the page asks for
    at once (a detector's), queued in the session's heavy lane. A translator's source with a `reference`: its
    decoder reads the reference (teacher forcing) instead of writing its own output."""
    worker = model_worker(ctx.path, ctx.stamp)
    asked = {"k": TOP_K, "full": full, "continuation": continuation, "sampling": sampling}
    kept = worker.cached(ctx.text, ctx.reference, **asked)
    if kept is not None:
        return kept
    with st.spinner("Running the model…"):
        return worker.analyze(
            ctx.text, ctx.reference, **asked, heavy=heavy, waiting=get_run_yield_check() if heavy else None
        )


def shown(source: Source, full: bool = False, heavy: bool = False) -> Shown:
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


def checkpoints(root: Path) -> list[catalog.Entry]:
    """The checkpoints under `root` (catalog.list_checkpoints), read again only when the folder's stamp changes; with
    the installed model packages when `catalog.pretrained_listed` says so, which is part of the key: a list made
    without them is never served where they are listed (seen in CI: a page showed lm-english for SmolLM2)."""
    return checkpoint_entries(str(root), folder_stamp(root), catalog.pretrained_listed(root))


@st.cache_resource(max_entries=4, show_spinner=False)
def checkpoint_entries(root: str, stamp: tuple, packages: bool) -> list[catalog.Entry]:
    """The checkpoints under `root`, read again only when a folder's stamp changes (catalog.folder_stamp)."""
    return catalog.list_checkpoints(Path(root), packages)


STAMP_FRESH_S = 1.0  # a checkpoint replaced in place is seen within this
_STAMPS: dict[str, tuple[float, int, tuple]] = {}  # folder → (when stamped, the folder's own mtime, its stamp)
_STAMPS_LOCK = threading.Lock()


def folder_stamp(root: Path, clock: Callable[[], float] = time.monotonic) -> tuple:
    """catalog.folder_stamp of `root`, taken at most once every STAMP_FRESH_S for the whole server, and again at
    once when the folder itself changes (a checkpoint added, removed or renamed changes its mtime). It is a few
    hundred stat calls: every run of every page took it, 30 followers of a class 30 times for one move.
    A checkpoint's files replaced in place show within STAMP_FRESH_S (its model's own stamp, catalog.stamp, is
    exact: the weights are never stale)."""
    try:
        mtime = root.stat().st_mtime_ns
    except OSError:
        mtime = -1
    now = clock()
    with _STAMPS_LOCK:
        held = _STAMPS.get(str(root))
    if held is not None and held[1] == mtime and now - held[0] < STAMP_FRESH_S:
        return held[2]
    stamp = catalog.folder_stamp(root)
    with _STAMPS_LOCK:
        if len(_STAMPS) >= 16:  # folders a server reads: its own, and a test's few
            _STAMPS.clear()
        _STAMPS[str(root)] = (now, mtime, stamp)
    return stamp


@kept()
def snapshots(path: str, stamp: float) -> list[Snapshot]:
    """The checkpoint's training snapshots, earliest first ([] when it has none); raises CheckpointError."""
    return list_snapshots(path)


def _worker_bytes(worker: ModelWorker) -> int:
    return measured_bytes(worker.ckpt.model)  # its results are in stores of their own, counted there


@kept("Loading the weights of that training step…", size=_worker_bytes, on_evict=_stop)
def snapshot_worker(path: str, stamp: float, step: int) -> ModelWorker:
    """A worker for the checkpoint's model as it was at training step `step`, shared by every session; it keeps
    fewer results than the shipped model's worker (a snapshot is looked at, not explored). Its model's bytes count
    in the server's budget; evicted, it is stopped."""
    snapshot = load_snapshot(load_model(path, stamp), step)
    return ModelWorker(snapshot, pages_bytes=16 * 2**20, full_bytes=0, owner=session_id)


def snapshot_analysis(ctx: Source, step: int, target: str | None = None) -> Analysis:
    """The Analysis of `ctx.text` by the model as it was at training step `step`; raises InputError. `target`: an
    encoder-decoder's output given to its decoder (teacher forcing) instead of the output it writes itself, so
    that every step's decoder reads the same tokens."""
    worker = snapshot_worker(ctx.path, ctx.stamp, step)
    kept = worker.cached(ctx.text, target, k=TOP_K)
    if kept is not None:
        return kept
    with st.spinner(f"Running the model of step {step:,}…"):
        return worker.analyze(ctx.text, target, k=TOP_K)


@kept("Feeding the reference to the decoder…")
def forced(ctx: Source, reference: str) -> Forced:
    """Each token of `reference` (a translation of `ctx.text`, or a language model's continuation of it) with the
    model's probability, rank and own choice there (analysis.forced); raises InputError. Run by the worker."""
    worker = model_worker(ctx.path, ctx.stamp)
    return worker.call(forced_rows, ctx.text, reference, tokens=worker.tokens(ctx.text + reference))


@kept()
def certainty(ctx: Source, target_ids: tuple[int, ...], start: int) -> tuple[ForcedRow, ...]:
    """How sure the model was of each token of `target_ids[start:]`, the decoder input an analysis of `ctx.text`
    gave (analysis.forced.scored): its output's pieces, shaded by the page. Run by the worker."""
    worker = model_worker(ctx.path, ctx.stamp)
    return worker.call(scored, ctx.text, target_ids, start, tokens=len(target_ids))


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


def _probe(ckpt: Checkpoint) -> InductionReport:
    return measure(ckpt.model, ckpt.config.vocab_size, ckpt.config.bos_id)


@kept("Measuring every head on a run of random tokens, repeated…")
def induction_report(path: str, stamp: float) -> InductionReport | None:
    """A decoder-only model's induction and previous-token scores per head and its copy losses (analysis.induction),
    measured once per checkpoint by its worker; None for a model without a decoder-only stack."""
    if load_model(path, stamp).config.has_encoder:  # the probe runs a language model
        return None
    return model_worker(path, stamp).call(_probe)


@kept("Switching heads off on the repeated run…")
def copying(path: str, stamp: float) -> Copying:
    """The Lesson's induction step for a decoder-only checkpoint (analysis.lesson.copying): the probe its scores
    were measured on, the best induction head's weights and the second copy's loss with heads switched off; run
    once per checkpoint by its worker."""
    report = induction_report(path, stamp)
    if report is None:
        raise ValueError("the induction probe needs a decoder-only model")
    return heavy_chunk(model_worker(path, stamp), lesson.copying, report)


@kept("Recording the text's way through the layers…")
def stream(path: str, stamp: float, text: str) -> Stream:
    """The first stack as one forward pass recorded it (analysis.lesson.stream), run by the checkpoint's worker."""
    return model_worker(path, stamp).call(lesson.stream, text)


@kept("Tracing the induction circuit: composition, patching, attribution…")
def circuit(path: str, stamp: float) -> lesson.Circuit | None:
    """The Lesson's induction circuit for a decoder-only checkpoint (analysis.lesson.circuit), on the heads its
    probe found; run by its worker once per checkpoint. None for a model without a decoder-only stack."""
    report = induction_report(path, stamp)
    return None if report is None else heavy_chunk(model_worker(path, stamp), lesson.circuit, report)


@kept("Timing the decoder with and without its cache…")
def cache_timing(path: str, stamp: float, text: str, max_tokens: int) -> CacheTiming:
    """Decoding `text` timed with and without the key/value cache (analysis.lesson.cache_timing)."""
    return model_worker(path, stamp).call(lesson.cache_timing, text, max_tokens)


@kept("Timing one attention block at growing lengths…")
def attention_cost(path: str, stamp: float) -> Cost:
    """The measured cost of attention (analysis.lesson.attention_cost), once per checkpoint."""
    return model_worker(path, stamp).call(lesson.attention_cost)


@kept("Reading from the weights how the heads compose…")
def composition(path: str, stamp: float) -> circuits.Composition:
    """How the checkpoint's first stack's self-attention heads compose (analysis.circuits.composition), read from
    its weights once per checkpoint. In the asking page's thread, not the model's worker: it runs no text through
    the model, and on a deep model it takes minutes that the class's pages must not wait behind."""
    return circuits.composition(load_model(path, stamp).model)


def _attribute(ckpt: Checkpoint, text: str, target_ids: tuple[int, ...], position: int, token: int, versus: int | None):
    source, target = attribution.decoder_inputs(ckpt, text, target_ids)
    return attribution.attribute(ckpt, source, target, position, token, versus)


@kept("Splitting the prediction into what each part wrote…")
def logit_attribution(ctx: Shown, position: int, token: int, versus: int | None) -> attribution.Attribution:
    """The logit of `token` after decoder position `position` (minus `versus`'s), split into what each head, each
    feed-forward and the rest wrote (analysis.attribution), for the pass the text's analysis made; run by the
    model's worker."""
    worker = model_worker(ctx.path, ctx.stamp)
    ids = ctx.analysis.target_ids
    return worker.call(_attribute, ctx.text, ids, position, token, versus, tokens=worker.tokens(ctx.text))


def _lens(ckpt: Checkpoint, text: str, target_ids: tuple[int, ...]) -> attribution.LogitLens:
    return attribution.logit_lens(ckpt, *attribution.decoder_inputs(ckpt, text, target_ids))


@kept("Reading each layer's stream as if it were the last…")
def logit_lens(ctx: Shown) -> attribution.LogitLens:
    """Each layer's top guess at each decoder position (analysis.attribution.logit_lens); run by the worker."""
    worker = model_worker(ctx.path, ctx.stamp)
    return worker.call(_lens, ctx.text, ctx.analysis.target_ids, tokens=worker.tokens(ctx.text))


def _token_attribution(ckpt: Checkpoint, analysis: Analysis, position: int, token: int) -> tokens_back.TokenAttribution:
    return tokens_back.token_attribution(ckpt, analysis, position, token)


@kept("Following the prediction back to each input token…")
def token_attribution(ctx: Shown, position: int, token: int) -> tokens_back.TokenAttribution:
    """Each input token's number toward `token` after decoder position `position` under every method
    (analysis.token_attribution): one heavy chunk of the model's worker (tens of passes with their gradients), so
    that a class's pages go first."""
    worker = model_worker(ctx.path, ctx.stamp)
    passes = tokens_back.STEPS + 2
    return heavy_chunk(
        worker, _token_attribution, ctx.analysis, position, token, tokens=passes * worker.tokens(ctx.text)
    )


def _score_parts(ckpt: Checkpoint, text: str, target_ids: tuple[int, ...], block: str, head: int, q: int, k: int):
    ids, source = score_parts.pass_inputs(ckpt, text, target_ids)
    return score_parts.score_parts(ckpt.model, ids, source, block, head, q, k)


@kept("Splitting the score into what wrote it…")
def score_split(ctx: Shown, block: str, head: int, query: int, key: int) -> score_parts.ScoreParts:
    """Head `head`'s raw score of `query` for `key` in `block` (0-based) split into the stream's parts on each side
    (analysis.score_parts), for the pass the text's analysis made; run by the model's worker."""
    worker = model_worker(ctx.path, ctx.stamp)
    ids = ctx.analysis.target_ids
    return worker.call(_score_parts, ctx.text, ids, block, head, query, key, tokens=worker.tokens(ctx.text))


def _fork(ckpt: Checkpoint, text: str, prompt: tuple[int, ...], choice: int, max_tokens: int) -> fork.Fork:
    tok = ckpt.tokenizer
    source = fork.source_of(ckpt, text)
    return fork.fork(ckpt.model, list(prompt), source, 0, choice, max_tokens, tok.pieces, tok.never_written)


@kept("Writing both continuations…")
def forked(ctx: Source, prompt: tuple[int, ...], choice: int, max_tokens: int) -> fork.Fork:
    """The decoder's likeliest next token after `prompt` (its ids, bos first) and its `choice`-th (from 1), each
    continued greedily for up to `max_tokens` tokens (analysis.fork), one cache of the prompt shared; by the worker."""
    worker = model_worker(ctx.path, ctx.stamp)
    return worker.call(_fork, ctx.text, prompt, choice, max_tokens, tokens=worker.tokens(ctx.text) + max_tokens)


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


@kept("Running the repeated run through that training step…")
def snapshot_head(path: str, stamp: float, step: int, length: int, block: str, head: int) -> tuple[np.ndarray, float]:
    """One head of the model as it was at training step `step` on the induction probe of `length`: its weights on
    the first probe and its induction score (analysis.lesson.head_on_probe), run by that snapshot's worker."""
    return snapshot_worker(path, stamp, step).call(head_on_probe, length, block, head)


@kept()
def positional_table(path: str, stamp: float) -> np.ndarray:
    """The checkpoint's positional table (analysis.analyze.positional_table), read-only: every session shares it."""
    table = model_positional_table(load_model(path, stamp))
    table.flags.writeable = False
    return table


@kept("Computing that head's scores and values…")
def head_detail(ctx: Source, block: str, head: int) -> HeadDetail:
    """One head's raw scores and values for `ctx.text` (analysis.analyze.head_detail), run by the worker when the
    attention-math page opens that head: the pages' analysis keeps no scores or values. A translator's output is
    the one its analysis decoded (ModelWorker.output), fed as it is."""
    worker = model_worker(ctx.path, ctx.stamp)
    target = worker.output(ctx.text, MAX_TOKENS) if ctx.ckpt.config.has_cross_attention else None
    return worker.call(
        analyze_head_detail, ctx.text, block, head, TOP_K, MAX_TOKENS, target, tokens=worker.tokens(ctx.text)
    )


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


def export_bytes(ctx: Source, fmt: str) -> bytes:
    """The whole Analysis as JSON or NPZ (analysis.export, docs/trace-format.md); run when a download button is
    clicked. A trace is written as it was read: opened again, it draws the same."""
    full = shown(ctx, full=True).analysis
    return to_json(full).encode("utf-8") if fmt == "json" else to_npz_bytes(full)


_heap_frozen = False


def freeze_heap_once() -> None:
    """On the process's first rerun, move every object alive (torch, pandas, plotly, Streamlit: the imports) out
    of the garbage collector's reach, so that a full collection walks only what reruns create. A module global:
    modules outlive reruns."""
    global _heap_frozen
    if not _heap_frozen:
        gc.freeze()
        _heap_frozen = True
