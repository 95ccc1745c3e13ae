"""The model work only the Lesson needs, computed here and handed on as numpy like `analysis.analyze`: the
vectors on the way through the first stack as the forward pass recorded them, the measured cost of attention and
of decoding without a cache, and what copying on the induction probe (analysis.induction) owes to which heads.

The steps themselves and their course text are `course.lesson`'s; the pages draw them (views/lesson.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from analysis.ablation import ablations
from analysis.attribution import Attribution, attribute
from analysis.circuits import composition
from analysis.induction import InductionReport, copy_losses, head_scores, repeated_tokens
from analysis.patching import Patching, patch_runs, patch_together, prepare_ids
from inference.catalog import card_defaults, default_head
from inference.checkpoint import Checkpoint
from inference.decoding import generate
from inference.text import clean_text, encode_first_stack, encode_prefix, encode_source
from model.attention import attention_mask
from model.forward import forward
from model.names import layer_name, parse_sublayer_name, sublayer_name


@dataclass(frozen=True)
class Stream:
    """The first stack (encoder, or the language model's decoder) as one forward pass recorded it
    (Trace.activations): what the embedding, feed-forward and residual steps show, for any model the app lists.

    pieces, ids: the tokens.
    stack:   "encoder" or "decoder", the stack recorded.
    embedded: (T, d_model) `{stack}.embed`: the token embeddings (× √d_model where the model scales them), before
             any position is added.
    hidden:  (T, d_ff) `{stack}.layers.0.feed_forward.hidden`: the first layer's feed-forward units after the
             activation (ReLU, GELU, or SwiGLU's gated product).
    norms:   (n_layers, 2, 3) mean vector length over the tokens, per layer and sub-layer (attention,
             feed-forward), of: the stream coming in, the sub-layer's output, the stream going out.
    output:  (T, d_model) `{stack}.output`: what the stack hands on (after its last norm for pre-norm).
    pre_norm: the model normalises each sub-layer's input (True) or the sum (False, the paper).
    weights: (self-attention, feed-forward) parameters of one layer, counted on the model's own modules.
    """

    pieces: tuple[str, ...]
    ids: tuple[int, ...]
    stack: str
    embedded: np.ndarray
    hidden: np.ndarray
    norms: np.ndarray
    output: np.ndarray
    pre_norm: bool
    weights: tuple[int, int]

    def active_units(self, most: int) -> np.ndarray:
        """The indices of the `most` feed-forward units of the first layer with the largest total |activation| on
        this text, in unit order: a trained layer leaves most units near 0 for any one sentence."""
        total = np.abs(self.hidden).sum(axis=0)
        return np.sort(np.argsort(-total, kind="stable")[:most])

    @property
    def zero_share(self) -> float:
        """The share of the first layer's feed-forward units that are exactly 0 (a ReLU's negatives)."""
        return float((self.hidden == 0).mean()) if self.hidden.size else 0.0


def _numpy(x: torch.Tensor) -> np.ndarray:
    return x[0].float().numpy()  # the one text of the batch


def _mean_norm(x: torch.Tensor) -> float:
    return float(x[0].float().norm(dim=-1).mean())


@torch.inference_mode()
def stream(ckpt: Checkpoint, text: str) -> Stream:
    """Run `text` through the model once with `activations=True` and keep its first stack's record. An
    encoder-decoder's decoder reads <s> alone: the encoder's record does not depend on it. Raises InputError for
    text that cannot be read."""
    model, cfg = ckpt.model, ckpt.config
    ids = torch.tensor([encode_first_stack(ckpt, clean_text(text).text, [])])  # (1, T)
    source, fed = (ids, torch.tensor([[cfg.bos_id]])) if cfg.has_cross_attention else (None, ids)
    _, trace = forward(model, fed, source, record=False, activations=True)
    stack = cfg.first_stack
    acts = trace.activations
    layers = getattr(model, stack).layers
    norms = []
    for i in range(len(layers)):
        at = lambda point: _mean_norm(acts[f"{layer_name(stack, i)}.{point}"])  # noqa: B023 - used at once
        attention = (at("resid_pre"), at("self_attn.out"), at("resid_mid"))
        norms.append((attention, (at("resid_mid"), at("feed_forward.out"), at("resid_post"))))
    first = layers[0]
    weights = tuple(sum(p.numel() for p in m.parameters()) for m in (first.self_attn, first.feed_forward))
    return Stream(
        pieces=tuple(ckpt.tokenizer.pieces(ids[0].tolist())),
        ids=tuple(ids[0].tolist()),
        stack=stack,
        embedded=_numpy(acts[f"{stack}.embed"]),
        hidden=_numpy(acts[f"{layer_name(stack, 0)}.feed_forward.hidden"]),
        norms=np.asarray(norms, dtype=np.float32),
        output=_numpy(acts[f"{stack}.output"]),
        pre_norm=cfg.norm == "pre",
        weights=weights,
    )


@dataclass(frozen=True)
class Cost:
    """One attention sub-layer timed at growing lengths, and the quadratics fitted to the measurements.

    sublayer: which sub-layer was timed (`encoder.layers.0.self_attn`).
    clock:   "CPU" (the CPU time of the thread running it, when torch runs on that one thread: other work on a busy
             machine barely changes it) or "wall" (elapsed time, when torch spreads the work over threads).
    lengths: the sequence lengths n.
    repeats: how many timed runs at each n (COST_REPEATS, fewer where COST_BUDGET ran out first).
    seconds: the median of the repeats at each n: one slow run (other work on the machine) does not move it, and
             a second visit reads about the same numbers.
    bytes:   bytes of the scores and weights tensors the sub-layer actually created at each n (float32, every head).
    time_fit, bytes_fit: (a, b, c) of a·n² + b·n + c, least squares.
    """

    sublayer: str
    clock: str
    repeats: int
    lengths: tuple[int, ...]
    seconds: tuple[float, ...]
    bytes: tuple[int, ...]
    time_fit: tuple[float, float, float]
    bytes_fit: tuple[float, float, float]

    def fitted(self, fit: tuple[float, float, float], n: np.ndarray) -> np.ndarray:
        """The fitted quadratic `fit` at lengths `n`."""
        a, b, c = fit
        return a * n**2 + b * n + c

    def growth(self, values: tuple[float, ...]) -> tuple[int, int, float]:
        """(n/2, n, ratio): how many times the measured `values` (seconds or bytes, one per length) grow from the
        measured length nearest half the longest to the longest; 4 for a pure n² cost, 2 for a linear one. Read
        from the measurements the table lists, so a sentence quoting it matches the figure."""
        top = self.lengths[-1]
        half = min(range(len(self.lengths) - 1), key=lambda i: abs(self.lengths[i] - top / 2))
        low, high = values[half], values[-1]
        return self.lengths[half], top, float(high / low) if low > 0 else float("inf")


def _clock() -> tuple[str, Callable[[], float]]:
    """The thread's CPU time when torch computes on the calling thread alone (steady on a busy machine), else the
    elapsed time (CPU time would miss torch's other threads)."""
    return ("CPU", time.thread_time) if torch.get_num_threads() == 1 else ("wall", time.perf_counter)


def cost_lengths(max_len: int, points: int = 8, longest: int = 512) -> tuple[int, ...]:
    """`points` evenly spaced lengths up to min(max_len, longest): small, so the lesson measures in about a second."""
    top = max(points, min(max_len, longest))
    return tuple(int(n) for n in np.linspace(top / points, top, points).round())


COST_REPEATS = 7  # timed runs at each length: their median reads the same from one visit to the next
COST_BUDGET = 3.0  # seconds: past this, no more rounds start (at least MIN_REPEATS run, however slow the machine)
MIN_REPEATS = 3
WARM_UP = 2  # untimed rounds first: the first calls at a new size allocate, and the next ones still run slow


@torch.inference_mode()
def attention_cost(ckpt: Checkpoint, lengths: tuple[int, ...] | None = None, repeats: int = COST_REPEATS) -> Cost:
    """Time the first stack's first self-attention sub-layer (projections, QKᵀ/√d_k, mask, softmax, ·V, W^O: the
    explicit path that materialises the weights) on random vectors of each length, up to `repeats` times each in
    turn (fewer once COST_BUDGET has passed), keep the median at each length, and count the bytes of the score and
    weight tensors it returns. About a second for the shipped models."""
    model, cfg = ckpt.model, ckpt.config
    lengths = lengths or cost_lengths(cfg.max_len)
    if len(lengths) < 3 or any(not 1 <= n <= cfg.max_len for n in lengths):
        raise ValueError(f"need at least 3 lengths within 1..{cfg.max_len}, got {lengths}")
    stack = cfg.first_stack
    attn = getattr(model, stack).layers[0].self_attn
    generator = torch.Generator().manual_seed(0)
    inputs = []
    for n in lengths:
        valid = torch.ones(1, n, dtype=torch.bool)
        x = torch.randn(1, n, cfg.d_model, generator=generator)
        inputs.append((x, attention_mask(valid, valid, causal=stack == "decoder")))
    clock, now = _clock()
    runs: list[list[float]] = [[] for _ in lengths]
    sizes = [0] * len(lengths)
    began = time.perf_counter()
    for round_ in range(WARM_UP + repeats):  # round robin, so that a burst of other work slows every length alike
        if round_ >= WARM_UP + MIN_REPEATS and time.perf_counter() - began > COST_BUDGET:
            break
        for i, (x, mask) in enumerate(inputs):
            start = now()
            _, record = attn(x, x, mask)
            if round_ >= WARM_UP:
                runs[i].append(now() - start)
            sizes[i] = sum(t.element_size() * t.nelement() for t in (record.scores, record.weights))
    seconds = [float(np.median(r)) for r in runs]
    n = np.asarray(lengths, dtype=np.float64)
    time_fit = tuple(float(v) for v in np.polyfit(n, seconds, 2))
    bytes_fit = tuple(float(v) for v in np.polyfit(n, np.asarray(sizes, dtype=np.float64), 2))
    sublayer = sublayer_name(stack, 0, "self_attn")
    return Cost(sublayer, clock, len(runs[0]), tuple(lengths), tuple(seconds), tuple(sizes), time_fit, bytes_fit)


@dataclass(frozen=True)
class CacheTiming:
    """Greedy decoding of one text timed with and without the key/value cache (the same tokens either way)."""

    clock: str  # as Cost.clock
    tokens: int  # tokens written (the end token not counted)
    with_cache: float  # seconds, the faster of two runs
    without_cache: float


@torch.inference_mode()
def cache_timing(ckpt: Checkpoint, text: str, max_tokens: int) -> CacheTiming:
    """Time `inference.decoding.generate` writing up to `max_tokens` after `text` (the translation, or the language
    model's continuation) with the cache (each step runs the new token only) and without it (each step runs
    everything again). Raises InputError for text that cannot be read."""
    cfg, notes = ckpt.config, []
    cleaned = clean_text(text).text
    if cfg.has_cross_attention:
        source, prefix = torch.tensor([encode_source(ckpt, cleaned, notes)]), [cfg.bos_id]
    else:
        source, prefix = None, encode_prefix(ckpt, cleaned, notes, reserve=min(max_tokens, cfg.max_len // 2))
    clock, now = _clock()
    best = {True: float("inf"), False: float("inf")}
    for cache in (True, False, True, False):
        start = now()
        out = generate(ckpt.model, prefix, source, max_tokens, cache=cache)
        best[cache] = min(best[cache], now() - start)
    return CacheTiming(clock, len(out.ids), best[True], best[False])


# Induction heads ---------------------------------------------------------------------------------------------------

INDUCTION_AT = 0.3  # a head scoring this much on the probe counts as an induction head (an untrained one: ~0.02)


@dataclass(frozen=True)
class Switched:
    """The probe's second copy predicted with some heads switched off (zero ablation, analysis.ablation).

    what:  "intact", "induction" (the best induction head), "previous" (the best previous-token head) or "every"
           (every head scoring at least INDUCTION_AT).
    heads: (sub-layer name, head) pairs switched off, 0-based; () for the intact model.
    loss:  mean next-token loss (nats) over the second copy's tokens, as analysis.induction.copy_losses.
    top1:  the share of those tokens the model ranks first.
    """

    what: str
    heads: tuple[tuple[str, int], ...]
    loss: float
    top1: float


@dataclass(frozen=True)
class Copying:
    """What the induction step shows of a decoder-only model on the probe of analysis.induction (the same ids its
    scores were measured on): the first repeated run, the best induction head's weights on it, and how well the
    second copies are predicted with heads switched off.

    pieces:  the first probe's tokens, `<s>` then R then R again (1 + 2·length).
    sublayer, head, score: the induction head (0-based head) and its induction score on the probe: the head the card
             names (`defaults.head`, chosen on ordinary sentences with a repeat), else the probe's best.
    named:   the card's record of that head (analysis.defaults.opening_head: its score on the sentences, and the
             probe's own best head with how much it rests on `<s>` there), None where the card names none.
    weights: (T, T) that head's weights on the first probe.
    first_copy_loss: the intact model's loss on the first copies, which nothing can predict.
    runs:    the intact model first, then each set of heads switched off.
    """

    length: int
    pieces: tuple[str, ...]
    sublayer: str
    head: int
    score: float
    weights: np.ndarray
    first_copy_loss: float
    runs: tuple[Switched, ...]
    named: dict | None = None


def induction_named(card: dict) -> tuple[str, int] | None:
    """(sub-layer, 0-based head) of the head the app calls the induction head: the card's measured default head
    (`python -m atlas defaults`) where it was chosen as one; None for a card without it (a translator, an old card)."""
    found = card_defaults(card, "head")
    return default_head(card) if found is not None and found.get("what") == "induction" else None


def _induction_head(ckpt: Checkpoint, report: InductionReport) -> tuple[str, int, float]:
    """The head the Lesson calls the induction head, with its probe score: the card's (induction_named), else the
    probe's best."""
    named = induction_named(ckpt.card)
    if named is not None and named[0] in report.induction and 0 <= named[1] < len(report.induction[named[0]]):
        return named[0], named[1], report.induction[named[0]][named[1]]
    return report.best(report.induction)


def _second_copy(logits: torch.Tensor, ids: torch.Tensor, length: int) -> tuple[float, float]:
    """Loss (nats) and top-1 accuracy on the second copy's tokens, the targets copy_losses scores."""
    _, loss = copy_losses(logits, ids, length)
    right = logits[:, :-1].argmax(dim=-1) == ids[:, 1:]  # (B, T-1): position i predicts token i + 1
    return loss, float(right[:, length + 1 : 2 * length].float().mean())


@torch.inference_mode()
def copying(ckpt: Checkpoint, report: InductionReport) -> Copying:
    """Run the probe `report` was measured on once as it is (recording the weights), then once per set of heads
    switched off: the best induction head, the best previous-token head (when another), every head scoring
    INDUCTION_AT or more (when that is more than the best one)."""
    model, cfg, length = ckpt.model, ckpt.config, report.length
    ids = repeated_tokens(cfg.vocab_size, cfg.bos_id, length)  # (B, 1 + 2L), the ids `measure` scored
    sublayer, head, score = _induction_head(ckpt, report)
    logits, trace = forward(model, ids)
    first, _ = copy_losses(logits.float(), ids, length)
    weights = trace.attention[sublayer].weights[0, head].float().numpy().copy()  # (T, T): not a view of every head's
    every = tuple((name, h) for name, row in report.induction.items() for h, s in enumerate(row) if s >= INDUCTION_AT)
    previous = report.best(report.previous_token)[:2]
    sets = [("induction", ((sublayer, head),))] + ([("previous", (previous,))] if previous != (sublayer, head) else [])
    if len(every) > 1:
        sets.append(("every", every))
    runs = [Switched("intact", (), *_second_copy(logits.float(), ids, length))]
    for what, heads in sets:
        off: dict[str, tuple[int, ...]] = {}
        for name, h in heads:
            off[name] = (*off.get(name, ()), h)
        cut, _ = forward(model, ids, record=False, ablate=ablations(off, "zero"))
        runs.append(Switched(what, heads, *_second_copy(cut.float(), ids, length)))
    pieces = tuple(ckpt.tokenizer.pieces(ids[0].tolist()))
    named = card_defaults(ckpt.card, "head") if induction_named(ckpt.card) == (sublayer, head) else None
    return Copying(length, pieces, sublayer, head, score, weights, first, tuple(runs), named)


@torch.inference_mode()
def head_on_probe(ckpt: Checkpoint, length: int, sublayer: str, head: int) -> tuple[np.ndarray, float]:
    """One head of `ckpt` (a training snapshot, say) on the probe of `length`: its (T, T) weights on the first
    probe and its induction score over all of them (analysis.induction.head_scores)."""
    ids = repeated_tokens(ckpt.config.vocab_size, ckpt.config.bos_id, length)
    _, trace = forward(ckpt.model, ids)
    weights = trace.attention[sublayer].weights.float()  # (B, H, T, T)
    induction, _ = head_scores(weights, length)
    return weights[0, head].numpy().copy(), induction[head]  # a copy: a view would keep every head's alive


@dataclass(frozen=True)
class Formation:
    """A training run's induction probe at every evaluation (the card's history), and when the head formed.

    steps, induction, first_copy_loss, second_copy_loss: one entry per evaluation, as viz.training.copying_curve
             draws them (induction: the best head's score at that evaluation).
    formed:  the first evaluation at which the score reached half its last value; None when the last value is
             below INDUCTION_AT (no induction head formed in the run).
    forming: the first snapshot at or after `formed` (None: no snapshot that late, or none formed).
    shown:   the snapshot steps that tell the story: the last one before the score reached a fifth of its last
             value, `forming`, and the last; fewer where snapshots are missing, none when no head formed.
    """

    steps: tuple[int, ...]
    induction: tuple[float, ...]
    first_copy_loss: tuple[float, ...]
    second_copy_loss: tuple[float, ...]
    formed: int | None
    forming: int | None
    shown: tuple[int, ...]


def formation(history: object, snapshot_steps: list[int]) -> Formation | None:
    """The run's probe history (a card's training.history: entries with "induction" and "copy_loss", as
    training.train records them) and the snapshots to show; None when the run never measured the probe."""
    entries = history if isinstance(history, list) else []
    probed = [h for h in entries if isinstance(h, dict) and "induction" in h and "copy_loss" in h]
    if not probed:
        return None
    steps = tuple(int(h["step"]) for h in probed)
    scores = tuple(float(h["induction"]) for h in probed)
    first, second = zip(*((float(h["copy_loss"][0]), float(h["copy_loss"][1])) for h in probed), strict=True)
    last = scores[-1]
    if last < INDUCTION_AT:
        return Formation(steps, scores, first, second, None, None, ())
    formed = next(s for s, v in zip(steps, scores) if v >= last / 2)

    def score_at(step: int) -> float:  # the last evaluation at or before `step` (the first, before any)
        return next((v for s, v in zip(reversed(steps), reversed(scores)) if s <= step), scores[0])

    snaps = sorted(snapshot_steps)
    before = [s for s in snaps if s < formed and score_at(s) < last / 5][-1:]
    forming = next((s for s in snaps if s >= formed), None)
    shown = tuple(dict.fromkeys([*before, *([forming] if forming is not None else []), *snaps[-1:]]))
    return Formation(steps, scores, first, second, formed, forming, shown)


CIRCUIT_WORDS = 6  # the circuit step's run where the sentence has <unk>: this many words, then again but the last
CIRCUIT_SEED = 0
# The circuit step's run on a model whose tokenizer reads it whole (no <unk>): a sentence, then the same again up to
# its last word, which the model should copy. Text a language model of English has read, so its guess there means
# something (lm-english: p ≈ 0.95), where random words leave every guess of the first copy at ~0.001.
CIRCUIT_SENTENCE = "Once upon a time, there was a little girl who lived in a small house."


def whole_words(ckpt: Checkpoint, count: int, seed: int = CIRCUIT_SEED) -> list[int]:
    """`count` different ids of whole words of the model's vocabulary (a piece that starts a word, of 4 letters or
    more; any piece it writes when it has too few), drawn at random with `seed`: a repeated run the model can read
    as text, unlike random ids, whose pieces a model may never have been trained to write."""
    pieces = ckpt.tokenizer.pieces(list(range(ckpt.config.vocab_size)))
    never = ckpt.tokenizer.never_written
    ids = [i for i, p in enumerate(pieces) if i not in never and p[:1] in "▁Ġ" and p[1:].isalpha() and len(p) > 4]
    if len(ids) < count:  # a vocabulary of letters (a tiny test model): any pieces it may write
        ids = [i for i in range(ckpt.config.vocab_size) if i not in never and i != ckpt.config.unk_id]
    if len(ids) < count:
        raise ValueError(f"{ckpt.name}'s vocabulary has {len(ids)} pieces to draw a run from, not {count}")
    order = torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed))[:count]
    return [ids[i] for i in order.tolist()]


def circuit_ids(ckpt: Checkpoint) -> tuple[list[int], list[int], int]:
    """(run, other, cut): the circuit step's run R, ids for a second half with nothing to copy, and how many of R's
    tokens the second copy repeats (R[cut] is the token to copy). R is CIRCUIT_SENTENCE where the tokenizer reads
    it with no <unk> and a word to copy at its end, cut before that word; else CIRCUIT_WORDS whole words, cut
    before the last."""
    cfg = ckpt.config
    ids = ckpt.tokenizer.encode(CIRCUIT_SENTENCE)
    pieces = ckpt.tokenizer.pieces(ids)
    starts = [i for i, p in enumerate(pieces) if i > 0 and p[:1] in "▁Ġ" and p[1:].isalpha()]  # words after the first
    if starts and cfg.unk_id not in ids and 1 + 2 * len(ids) <= cfg.max_len:
        cut = starts[-1]
        other = [i for i in whole_words(ckpt, len(ids) + cut) if i not in ids][:cut]
        if len(other) == cut:
            return ids, other, cut
    words = whole_words(ckpt, 2 * CIRCUIT_WORDS)
    return words[:CIRCUIT_WORDS], words[CIRCUIT_WORDS:], CIRCUIT_WORDS - 1


@dataclass(frozen=True)
class Circuit:
    """The induction circuit of a decoder-only model, end to end, on the probe its scores were measured on.

    previous, induction: the best previous-token head and the induction head (the card's, as Copying's), (sub-layer,
             head, score on the probe), 0-based heads.
    previous_weights: (T, T) the previous-token head's weights on the clean run.
    sources: the induction head's K-composition with every earlier head, strongest first, (layer, head, score).
    length:  the tokens of the run R (circuit_ids).
    clean_pieces, corrupted_pieces: `<s>`, R, then R again up to the token to copy (clean) or as many other words
             (corrupted): the clean run's next token is a copy; the corrupted run has nothing to copy.
    probability: the intact model's probability for the copied token after the clean run.
    patching: every head of the clean run patched into the corrupted one (analysis.patching), answer the copy.
    together: the heads scoring INDUCTION_AT or more on the probe, (sub-layer, head, score); restored: what patching
              them at once restores.
    attribution: each part's direct contribution to that answer's logit at the clean run's last position.
    """

    previous: tuple[str, int, float]
    induction: tuple[str, int, float]
    previous_weights: np.ndarray
    sources: tuple[tuple[int, int, float], ...]
    length: int
    clean_pieces: tuple[str, ...]
    corrupted_pieces: tuple[str, ...]
    probability: float
    patching: Patching
    together: tuple[tuple[str, int, float], ...]
    restored: float
    attribution: Attribution

    @property
    def previous_rank(self) -> int | None:
        """Where the previous-token head ranks among the induction head's K-composition sources (1: first); None
        when it is not an earlier head."""
        layer, head = parse_sublayer_name(self.previous[0])[1], self.previous[1]
        return next((i + 1 for i, (sl, sh, _) in enumerate(self.sources) if (sl, sh) == (layer, head)), None)


@torch.inference_mode()
def circuit(ckpt: Checkpoint, report: InductionReport) -> Circuit:
    """The previous-token head, the K-composition that links it to the induction head, patching that confirms the
    pair, and the induction head writing the copied token (the Lesson's induction-circuit step)."""
    cfg = ckpt.config
    run, other, cut = circuit_ids(ckpt)
    clean = torch.tensor([[cfg.bos_id, *run, *run[:cut]]])  # <s> R R[:cut]: the next token, R[cut], is a copy
    corrupted = torch.tensor([[cfg.bos_id, *run, *other[:cut]]])  # <s> R R': nothing to copy
    answer = run[cut]
    runs = prepare_ids(ckpt, clean, corrupted, answer, None)
    patched = patch_runs(ckpt, runs, "heads")
    together = tuple(
        (name, h, s) for name, row in report.induction.items() for h, s in enumerate(row) if s >= INDUCTION_AT
    )
    parts = attribute(ckpt, None, clean, clean.shape[1] - 1, answer)
    previous, induction = report.best(report.previous_token), _induction_head(ckpt, report)
    logits, trace = forward(ckpt.model, clean)
    probability = float(logits[0, -1].float().softmax(dim=-1)[answer])
    weights = trace.attention[previous[0]].weights[0, previous[1]].float().numpy().copy()
    composed = composition(ckpt.model)
    layer = parse_sublayer_name(induction[0])[1]
    sources = composed.top_sources("K", layer, induction[1], k=cfg.n_heads * layer) if layer > 0 else []
    pieces = ckpt.tokenizer.pieces
    return Circuit(
        previous,
        induction,
        weights,
        tuple(sources),
        len(run),
        tuple(pieces(clean[0].tolist())),
        tuple(pieces(corrupted[0].tolist())),
        probability,
        patched,
        together,
        patch_together(ckpt, runs, [(name, h) for name, h, _ in together]) if together else 0.0,
        parts,
    )
