"""What a checkpoint is measured on once, for the Lesson and the head pages: the induction probe and the steps built
on it, a text's way through the layers, the costs of attention and of decoding, how heads compose.
"""

from __future__ import annotations

import numpy as np

from analysis import circuits, lesson
from analysis.induction import InductionReport, measure
from analysis.lesson import CacheTiming, Copying, Cost, Stream, head_on_probe
from inference.checkpoint import Checkpoint
from ui.cache.models import heavy_chunk, load_model, model_worker, snapshot_worker
from ui.kept import kept


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


@kept("Timing one attention sub-layer at growing lengths…")
def attention_cost(path: str, stamp: float) -> Cost:
    """The measured cost of attention (analysis.lesson.attention_cost), once per checkpoint."""
    return model_worker(path, stamp).call(lesson.attention_cost)


@kept("Reading from the weights how the heads compose…")
def composition(path: str, stamp: float) -> circuits.Composition:
    """How the checkpoint's first stack's self-attention heads compose (analysis.circuits.composition), read from
    its weights once per checkpoint. In the asking page's thread, not the model's worker: it runs no text through
    the model, and on a deep model it takes minutes that the class's pages must not wait behind."""
    return circuits.composition(load_model(path, stamp).model)


@kept("Running the repeated run through that training step…")
def snapshot_head(
    path: str, stamp: float, step: int, length: int, sublayer: str, head: int
) -> tuple[np.ndarray, float]:
    """One head of the model as it was at training step `step` on the induction probe of `length`: its weights on
    the first probe and its induction score (analysis.lesson.head_on_probe), run by that snapshot's worker."""
    return snapshot_worker(path, stamp, step).call(head_on_probe, length, sublayer, head)
