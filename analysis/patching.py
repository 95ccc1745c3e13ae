"""Activation patching on a minimal pair: which heads and which positions of the stream carry the difference.

Two texts of the same length (Compare's pair): the *clean* one, where the model gives `answer`, and the
*corrupted* one, where it gives `versus` instead (by default each text's own top guess for the next token). The
metric is the logit difference answer − versus at the last position. Patching runs the corrupted text again with
one activation taken from the clean run:

- a head's output (softmax(QKᵀ/√d)V, before W^O) at every position, one head at a time (`what="heads"`);
- the residual stream entering a layer at one position (`what="residual"`).

Each result is normalised: (patched − corrupted) / (clean − corrupted), 0 where the patch changes nothing and 1
where it restores the clean answer entirely (Heimersheim & Nanda 2024, "How to use and interpret activation
patching"; TransformerLens's `patching` module). Patching the whole stream entering the last layer gives 1
exactly, patching nothing 0 (tests/test_patching.py). The patched runs go in batches of `batch` rows, with
`progress(done, total)` between them.

Attribution patching (Nanda 2023) approximates the head results with one backward pass: each head's
(clean − corrupted) output times the metric's gradient at the corrupted run, normalised the same way — linear in
the patch, so exact for small changes and only a guide for large ones.

`patch` pairs a language model's two texts. A translator (`prepare_translator`, `patch_translator`) pairs two
sources of the same token count with one target held fixed for both (teacher-forced), so every position of both
runs aligns: the metric is answer − versus at one decoder position, and every head of both stacks (the
encoder's, the decoder's self- and cross-attention) or the stream entering every layer of both stacks at each
of its positions is patched (`SourcePatching`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from inference.checkpoint import Checkpoint
from inference.decoding import top_k
from inference.text import clean_text, encode_prefix
from model.attention import Patch
from model.forward import forward
from model.names import layer_name, parse_sublayer_name, sublayer_name

WHATS = ("heads", "residual")
BATCH = 16  # patched runs per forward pass: the pass's memory is this many times one run's


@dataclass(frozen=True)
class Patching:
    """Normalised patching results (0 = as corrupted, 1 = as clean), 0-based layers, heads and positions.

    what: "heads" → scores (L, H); "residual" → scores (L, T), the stream entering each layer at each position.
    answer / versus: the token ids compared; clean / corrupted: the logit difference answer − versus of each run.
    approximate: True for attribution patching (one backward pass), False for patched runs.
    """

    what: str
    scores: np.ndarray
    answer: int
    versus: int
    clean: float
    corrupted: float
    approximate: bool = False


class PairError(ValueError):
    """Two texts that patching cannot pair: other token counts, the same answer, a model that is not a language
    model."""


def pair_ids(ckpt: Checkpoint, clean: str, corrupted: str, notes: list[str] | None = None) -> tuple[Tensor, Tensor]:
    """The two texts' ids (1, T) each, as the model reads them; PairError when they cannot be paired. `notes`
    gets what was changed in reading them (a text cut to the model's positions)."""
    if ckpt.config.has_encoder:
        raise PairError(
            "this pairs two texts read by a language model, and an encoder-only model predicts no next token: "
            "choose a language model (a translator's two sources are patched with one target held fixed: "
            "atlas.patch)"
        )
    notes = [] if notes is None else notes
    ids = [encode_prefix(ckpt, clean_text(t).text, notes) for t in (clean, corrupted)]
    if len(ids[0]) != len(ids[1]):
        pieces = [len(i) - 1 for i in ids]  # without <s>
        raise PairError(
            f"patching pairs position with position: the first text has {pieces[0]} tokens and the second "
            f"{pieces[1]}; change words for words of the same token count"
        )
    return torch.tensor([ids[0]]), torch.tensor([ids[1]])


def _top(ckpt: Checkpoint, logits: Tensor) -> int:
    return top_k(logits[None], 1, ckpt.tokenizer.pieces, ckpt.tokenizer.never_written)[0][0].id


def _difference(logits: Tensor, answer: int, versus: int) -> Tensor:
    """The metric of each row of (B, T, vocab) logits: answer − versus at the last position."""
    return (logits[:, -1, answer] - logits[:, -1, versus]).double()


def _head_outputs(trace) -> dict[str, Tensor]:
    """sub-layer name → (1, H, T, d_head) each head's output, softmax(QKᵀ/√d)V, from a recorded trace."""
    return {name: rec.weights @ rec.values for name, rec in trace.attention.items()}


@dataclass(frozen=True)
class Runs:
    """The two runs every patch starts from: the pair's ids, the tokens compared, each run's metric, and the clean
    run's head outputs and streams (what the patches put in)."""

    clean_ids: Tensor
    corrupted_ids: Tensor
    answer: int
    versus: int
    clean: float
    corrupted: float
    heads: dict[str, Tensor]  # the clean run's head outputs
    streams: list[Tensor]  # the clean run's stream entering each layer, (1, T, d_model)


def prepare(ckpt: Checkpoint, clean: str, corrupted: str, answer: int | None, versus: int | None) -> Runs:
    """The two texts' runs (`Runs`); PairError for texts that cannot be paired."""
    return prepare_ids(ckpt, *pair_ids(ckpt, clean, corrupted), answer, versus)


@torch.inference_mode()
def prepare_ids(
    ckpt: Checkpoint, clean_ids: Tensor, corrupted_ids: Tensor, answer: int | None, versus: int | None
) -> Runs:
    """The runs of two (1, T) id sequences of a language model (a probe of random tokens, say)."""
    clean_logits, trace = forward(ckpt.model, clean_ids, record=True, activations=True)
    corrupted_logits, _ = forward(ckpt.model, corrupted_ids, record=False)
    answer = _top(ckpt, clean_logits[0, -1]) if answer is None else answer
    if versus is None:
        versus = _top(ckpt, corrupted_logits[0, -1])
        if versus == answer:
            raise PairError(
                "both texts give the same next token, so there is no difference to restore: change the second "
                "text, or name the answer and the token to compare it with"
            )
    if versus == answer:
        raise PairError("the answer and the token it is compared with are the same: pick two tokens")
    layers = len(ckpt.model.decoder.layers)
    streams = [trace.activations[f"{layer_name('decoder', i)}.resid_pre"] for i in range(layers)]
    return Runs(
        clean_ids,
        corrupted_ids,
        answer,
        versus,
        float(_difference(clean_logits, answer, versus)[0]),
        float(_difference(corrupted_logits, answer, versus)[0]),
        _head_outputs(trace),
        streams,
    )


def _normalised(values: Tensor | np.ndarray, runs: Runs) -> np.ndarray:
    span = runs.clean - runs.corrupted
    if abs(span) < 1e-9:
        raise PairError("the two texts give the same logit difference: there is nothing for a patch to restore")
    return (np.asarray(values, dtype=np.float64) - runs.corrupted) / span


@torch.inference_mode()
def _patched(ckpt: Checkpoint, runs: Runs, patches: list[dict[str, Patch]]) -> Tensor:
    """The metric of the corrupted text run once per entry of `patches` (one batch: every entry has the same keys,
    their rows stacked)."""
    rows = len(patches)
    merged = {
        name: Patch(
            torch.cat([p[name].values for p in patches]),
            torch.cat([p[name].where for p in patches]),
        )
        for name in patches[0]
    }
    logits, _ = forward(ckpt.model, runs.corrupted_ids.expand(rows, -1), record=False, ablate=merged)
    return _difference(logits, runs.answer, runs.versus)


def _heads_patch(runs: Runs, heads: Sequence[tuple[int, int]], layers: int, n_heads: int) -> dict[str, Patch]:
    """One row: the heads `heads` ((layer, head), 0-based) from the clean run, every other head left as it is."""
    patch = {}
    for i in range(layers):
        name = sublayer_name("decoder", i, "self_attn")
        where = torch.zeros(1, n_heads, dtype=torch.bool, device=runs.heads[name].device)
        for layer, head in heads:
            if layer == i:
                where[0, head] = True
        patch[name] = Patch(runs.heads[name], where)
    return patch


def _residual_patch(runs: Runs, layer: int, positions: list[int], layers: int) -> dict[str, Patch]:
    """One row: the stream entering `layer` at `positions` from the clean run."""
    steps = runs.clean_ids.shape[1]
    patch = {}
    for i in range(layers):
        where = torch.zeros(1, steps, dtype=torch.bool, device=runs.streams[i].device)
        if i == layer:
            where[0, positions] = True
        patch[f"{layer_name('decoder', i)}.resid_pre"] = Patch(runs.streams[i], where)
    return patch


def cells(ckpt: Checkpoint, runs: Runs, what: str) -> list[tuple[int, int]]:
    """What `what` patches, one patched run each, in order: (layer, head) or (layer, position)."""
    if what not in WHATS:
        raise ValueError(f"what is one of {', '.join(map(repr, WHATS))}, not {what!r}")
    layers = len(ckpt.model.decoder.layers)
    across = ckpt.config.n_heads if what == "heads" else runs.clean_ids.shape[1]
    return [(layer, i) for layer in range(layers) for i in range(across)]


def run_cells(ckpt: Checkpoint, runs: Runs, what: str, chosen: list[tuple[int, int]]) -> np.ndarray:
    """The metric of the corrupted text with each of `chosen` (from `cells`) patched in, in one batch."""
    layers, heads = len(ckpt.model.decoder.layers), ckpt.config.n_heads
    if what == "heads":
        rows = [_heads_patch(runs, [cell], layers, heads) for cell in chosen]
    else:
        rows = [_residual_patch(runs, layer, [position], layers) for layer, position in chosen]
    return _patched(ckpt, runs, rows).cpu().numpy()


def finish(ckpt: Checkpoint, runs: Runs, what: str, values: np.ndarray) -> Patching:
    """Every cell's metric, in `cells` order, as the normalised grid."""
    layers = len(ckpt.model.decoder.layers)
    scores = _normalised(values, runs).reshape(layers, -1)
    return Patching(what, scores, runs.answer, runs.versus, runs.clean, runs.corrupted)


def patch(
    ckpt: Checkpoint,
    clean: str,
    corrupted: str,
    what: str = "heads",
    answer: int | None = None,
    versus: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    batch: int = BATCH,
) -> Patching:
    """Patch every head (`what="heads"`) or every layer × position of the stream (`"residual"`) from `clean` into
    `corrupted` (the module's docstring); PairError for texts it cannot pair."""
    if what not in WHATS:
        raise ValueError(f"what is one of {', '.join(map(repr, WHATS))}, not {what!r}")
    return patch_runs(ckpt, prepare(ckpt, clean, corrupted, answer, versus), what, progress, batch)


def patch_runs(
    ckpt: Checkpoint,
    runs: Runs,
    what: str = "heads",
    progress: Callable[[int, int], None] | None = None,
    batch: int = BATCH,
) -> Patching:
    """`patch` on prepared runs (`prepare`, `prepare_ids`)."""
    todo = cells(ckpt, runs, what)
    values = []
    for start in range(0, len(todo), batch):
        if progress is not None:
            progress(start, len(todo))
        values.append(run_cells(ckpt, runs, what, todo[start : start + batch]))
    if progress is not None:
        progress(len(todo), len(todo))
    return finish(ckpt, runs, what, np.concatenate(values))


def patch_together(ckpt: Checkpoint, runs: Runs, heads: Sequence[tuple[str, int]]) -> float:
    """The normalised metric with every head of `heads` ((sub-layer name, head), 0-based) patched at once: what a set
    of heads restores together, where each alone may restore little (heads that share the work)."""
    layers, n_heads = len(ckpt.model.decoder.layers), ckpt.config.n_heads
    patch = _heads_patch(runs, [(parse_sublayer_name(sublayer)[1], head) for sublayer, head in heads], layers, n_heads)
    return float(_normalised(_patched(ckpt, runs, [patch]).cpu().numpy(), runs)[0])


def attribution_patch(
    ckpt: Checkpoint, clean: str, corrupted: str, answer: int | None = None, versus: int | None = None
) -> Patching:
    """Every head's patching result approximated with one forward and one backward pass of the corrupted text:
    (clean − corrupted head output) · ∂metric/∂(head output), normalised as `patch` normalises (module docstring)."""
    return attribution_patch_runs(ckpt, prepare(ckpt, clean, corrupted, answer, versus))


def attribution_patch_runs(ckpt: Checkpoint, runs: Runs) -> Patching:
    """`attribution_patch` on prepared runs (`prepare`, `prepare_ids`)."""
    layers, heads = len(ckpt.model.decoder.layers), ckpt.config.n_heads
    with torch.inference_mode():
        _, trace = forward(ckpt.model, runs.corrupted_ids, record=True)
        corrupted_heads = _head_outputs(trace)
    nudges = {}
    for name, out in corrupted_heads.items():
        nudges[name] = torch.zeros_like(out, requires_grad=True)  # added to each head's output: 0, with a gradient
    everywhere = torch.ones(1, heads, dtype=torch.bool, device=next(ckpt.model.parameters()).device)
    ablate = {name: Patch(nudge, everywhere, added=True) for name, nudge in nudges.items()}
    names = list(nudges)
    with torch.enable_grad():
        logits, _ = forward(ckpt.model, runs.corrupted_ids, record=False, ablate=ablate)
        metric = _difference(logits, runs.answer, runs.versus).sum()
        # the gradients of the nudges only: the shared model's parameters gather none
        grads = dict(zip(names, torch.autograd.grad(metric, [nudges[n] for n in names])))
    scores = np.zeros((layers, heads))
    for i in range(layers):
        name = sublayer_name("decoder", i, "self_attn")
        delta = (runs.heads[name] - corrupted_heads[name]).double()
        scores[i] = (delta * grads[name].double()).sum(dim=(0, 2, 3)).cpu().numpy()
    scores = _normalised(scores + runs.corrupted, runs)
    return Patching("heads", scores, runs.answer, runs.versus, runs.clean, runs.corrupted, approximate=True)


# --- a translator: two sources of the same length, the target held fixed (teacher-forced) -------------------------


@dataclass(frozen=True)
class SourcePatching:
    """Normalised patching results of a translator's source pair, one per cell (0 = as corrupted, 1 = as clean).

    cells: (sub-layer name, head) for `what="heads"` (every attention of both stacks), (layer name, position) for
    "residual" (the stream entering each layer of both stacks, at one source or target position), 0-based, in
    order; position: the decoder position whose next-token logits are compared (0-based); answer / versus, clean /
    corrupted as in Patching."""

    what: str
    cells: tuple[tuple[str, int], ...]
    scores: np.ndarray
    position: int
    answer: int
    versus: int
    clean: float
    corrupted: float


@dataclass(frozen=True)
class TranslatorRuns:
    """The two runs a translator's patching starts from: the sources (1, S), the target (1, T) both read, the
    position and tokens compared with each run's logit difference, and the clean run's head outputs (sub-layer name →
    (1, H, Tq, d_head)) and streams (layer name → (1, len, d_model))."""

    clean_source: Tensor
    corrupted_source: Tensor
    target: Tensor
    position: int
    answer: int
    versus: int
    clean: float
    corrupted: float
    heads: dict[str, Tensor]
    streams: dict[str, Tensor]


def choose_position(
    clean: Tensor, corrupted: Tensor, position: int | None, answer: int | None, versus: int | None
) -> tuple[int, int, int]:
    """The decoder position compared (None: the first whose top prediction differs between the two runs' (T,
    vocab) logits) and the tokens (None: each run's top prediction there); PairError when nothing differs."""
    tops = clean.argmax(-1), corrupted.argmax(-1)
    if position is None:
        differ = (tops[0] != tops[1]).nonzero()
        if not len(differ):
            raise PairError(
                "the two sources give the same top prediction at every target position: change the second source, "
                "or name the position and the two tokens to compare"
            )
        position = int(differ[0])
    if not 0 <= position < clean.shape[0]:
        raise PairError(f"position {position + 1} is outside the target's {clean.shape[0]} positions")
    answer = int(tops[0][position]) if answer is None else int(answer)
    versus = int(tops[1][position]) if versus is None else int(versus)
    if answer == versus:
        raise PairError("the answer and the token it is compared with are the same: pick two tokens")
    return position, answer, versus


@torch.inference_mode()
def prepare_translator(
    ckpt: Checkpoint,
    clean_source: Tensor,
    corrupted_source: Tensor,
    target: Tensor,
    position: int | None = None,
    answer: int | None = None,
    versus: int | None = None,
) -> TranslatorRuns:
    """A translator's two runs on `target` (1, T), bos first; PairError for sources of other lengths."""
    if clean_source.shape != corrupted_source.shape:
        raise PairError(
            f"patching pairs source position with position: the sources are {clean_source.shape[1]} and "
            f"{corrupted_source.shape[1]} tokens; change words for words of the same token count"
        )
    clean_logits, trace = forward(ckpt.model, target, clean_source, record=True, activations=True)
    corrupted_logits, _ = forward(ckpt.model, target, corrupted_source, record=False)
    position, answer, versus = choose_position(clean_logits[0], corrupted_logits[0], position, answer, versus)
    diff = lambda logits: float(logits[0, position, answer] - logits[0, position, versus])
    streams = {
        name.removesuffix(".resid_pre"): t for name, t in trace.activations.items() if name.endswith(".resid_pre")
    }
    return TranslatorRuns(
        clean_source,
        corrupted_source,
        target,
        position,
        answer,
        versus,
        diff(clean_logits),
        diff(corrupted_logits),
        _head_outputs(trace),
        streams,
    )


def translator_cells(runs: TranslatorRuns, what: str, n_heads: int) -> list[tuple[str, int]]:
    """What `what` patches in a translator, one run each: every head of every sub-layer, or every layer of both stacks
    at every position of its own input (the source for the encoder, the target for the decoder)."""
    if what not in WHATS:
        raise ValueError(f"what is one of {', '.join(map(repr, WHATS))}, not {what!r}")
    if what == "heads":
        return [(name, h) for name in runs.heads for h in range(n_heads)]
    return [(name, i) for name, stream in runs.streams.items() for i in range(stream.shape[1])]


@torch.inference_mode()
def run_translator_cells(
    ckpt: Checkpoint, runs: TranslatorRuns, what: str, chosen: list[tuple[str, int]]
) -> np.ndarray:
    """The metric of the corrupted source with each of `chosen` patched in from the clean run, one batch row each."""
    rows = len(chosen)
    clean = runs.heads if what == "heads" else runs.streams
    patches = {}
    for name, value in clean.items():
        across = value.shape[1]  # heads, or positions
        where = torch.zeros(rows, across, dtype=torch.bool, device=value.device)
        for row, (cell, i) in enumerate(chosen):
            if cell == name:
                where[row, i] = True
        if where.any():
            key = name if what == "heads" else f"{name}.resid_pre"
            patches[key] = Patch(value.expand(rows, *value.shape[1:]), where)
    logits, _ = forward(
        ckpt.model, runs.target.expand(rows, -1), runs.corrupted_source.expand(rows, -1), record=False, ablate=patches
    )
    return (logits[:, runs.position, runs.answer] - logits[:, runs.position, runs.versus]).double().cpu().numpy()


def only_cells(cells: list[tuple[str, int]], only: str | None) -> list[tuple[str, int]]:
    """`cells` of the one sub-layer or layer `only` (all for None); ValueError naming the names there are."""
    if only is None:
        return cells
    kept = [c for c in cells if c[0] == only]
    if not kept:
        names = list(dict.fromkeys(c[0] for c in cells))
        raise ValueError(f"this model has no {only!r} to patch: it has {', '.join(names[:3])} … {names[-1]}")
    return kept


def normalise_cells(
    what: str,
    cells: list,
    values: np.ndarray,
    position: int,
    answer: int,
    versus: int,
    clean: float,
    corrupted: float,
) -> SourcePatching:
    """Every cell's metric as a SourcePatching: (value − corrupted) / (clean − corrupted)."""
    span = clean - corrupted
    if abs(span) < 1e-9:
        raise PairError("the two sources give the same logit difference: there is nothing for a patch to restore")
    scores = (np.asarray(values, dtype=np.float64) - corrupted) / span
    return SourcePatching(what, tuple(cells), scores, position, answer, versus, clean, corrupted)


def patch_translator(
    ckpt: Checkpoint, runs: TranslatorRuns, what: str = "heads", batch: int = BATCH, only: str | None = None
) -> SourcePatching:
    """Patch every head of both stacks (`what="heads"`) or the stream entering every layer of both stacks at each
    position (`"residual"`) from the clean source's run into the corrupted one's, the target held fixed; `only`:
    that one sub-layer's heads, or that one layer's positions (its name)."""
    todo = only_cells(translator_cells(runs, what, ckpt.config.n_heads), only)
    values = np.concatenate(
        [run_translator_cells(ckpt, runs, what, todo[i : i + batch]) for i in range(0, len(todo), batch)]
    )
    return normalise_cells(what, todo, values, runs.position, runs.answer, runs.versus, runs.clean, runs.corrupted)


def attribution_patch_translator(ckpt: Checkpoint, runs: TranslatorRuns) -> SourcePatching:
    """Every head of both stacks approximated with one forward and one backward pass of the corrupted source:
    (clean − corrupted head output) · ∂metric/∂(head output), normalised as `patch_translator` normalises."""
    with torch.inference_mode():
        _, trace = forward(ckpt.model, runs.target, runs.corrupted_source, record=True)
        corrupted_heads = _head_outputs(trace)
    nudges = {name: torch.zeros_like(out, requires_grad=True) for name, out in corrupted_heads.items()}
    everywhere = torch.ones(1, ckpt.config.n_heads, dtype=torch.bool, device=next(ckpt.model.parameters()).device)
    ablate = {name: Patch(nudge, everywhere, added=True) for name, nudge in nudges.items()}
    names = list(nudges)
    with torch.enable_grad():
        logits, _ = forward(ckpt.model, runs.target, runs.corrupted_source, record=False, ablate=ablate)
        metric = (logits[0, runs.position, runs.answer] - logits[0, runs.position, runs.versus]).double()
        grads = dict(zip(names, torch.autograd.grad(metric, [nudges[n] for n in names]), strict=True))
    cells, values = [], []
    for name in names:
        delta = (runs.heads[name] - corrupted_heads[name]).double()
        per_head = (delta * grads[name].double()).sum(dim=(0, 2, 3)).cpu().numpy()
        cells += [(name, h) for h in range(len(per_head))]
        values += list(per_head + runs.corrupted)
    found = normalise_cells(
        "heads", cells, np.array(values), runs.position, runs.answer, runs.versus, runs.clean, runs.corrupted
    )
    return found
