"""Do the explanations agree? One prediction of a language model, every self-attention head's importance by seven
methods side by side.

The prediction is the next token after decoder position `position` (0-based; the page and the notebook count
from 1), the model's top guess there (`answer`). Each method gives every head (layer, head) one number:

- **attention**: the largest weight the predicting position gives any token but the first. The first token is the
  start of text, where heads park the attention they do not use (0 when the position is the first itself).
- **value-weighted attention**: the same largest share, read from the weights scaled by what each key's value
  moves (Kobayashi et al. 2020; analysis.record.Sublayer.value_weighted).
- **direct logit attribution**: what the head writes directly toward the answer's logit (analysis.attribution).
- **ablation (zero)** and **ablation (mean)**: KL(intact ‖ ablated) of the next-token distribution at the position
  with the head switched off alone (analysis.ablation.rank_heads): many heads a pass, a batch row each.
- **activation patching**: the share of the logit difference answer − versus that the head's clean output restores
  in the corrupted run (analysis.patching, normalised: 1 all of it, 0 none). The corrupted text: the one given;
  else, when the text is the first of the Compare pair the model's card measured, that pair's second text; else the
  text up to the position with the tokens between the start of text and the position shuffled (a seeded
  permutation: the first of seeds 0, 1, … that changes the text). versus: the corrupted run's top guess, or its
  best guess other than the answer where both agree.
- **attribution patching**: the same patch to first order, one backward pass (analysis.patching.
  attribution_patch_runs).

Direct logit attribution and both patchings are signed: a head that pushes against the answer matters as much as
one that pushes for it, so the ranks read their magnitude (viz.agreement). Where no corrupted text can be made (too
few tokens to shuffle, two runs with the same logit difference) the two patching columns are NaN and `note` says
why. Cost: layers × heads × 2 ablated runs in batches (ablation.batch_rows: up to 64), layers × heads patched runs
in batches of patching.BATCH, and a few more passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from analysis.ablation import RankingSetup, rank_heads, rank_sublayer
from analysis.analyze import analyze
from analysis.attribution import attribute
from analysis.patching import (
    PairError,
    Runs,
    attribution_patch_runs,
    attribution_patch_translator,
    patch_runs,
    patch_translator,
    prepare_ids,
    prepare_translator,
)
from analysis.record import Analysis
from inference import catalog
from inference.checkpoint import Checkpoint
from inference.decoding import top_k
from inference.text import clean_text, encode_prefix, encode_source
from model.forward import forward
from model.names import parse_attention_type, sublayer_name

METHODS = (
    "attention",
    "value-weighted attention",
    "direct logit attribution",
    "ablation (zero)",
    "ablation (mean)",
    "activation patching",
    "attribution patching",
)
SEEDS = 20  # shuffles tried before saying the text's tokens cannot be shuffled into another text


@dataclass(frozen=True)
class Agreement:
    """Every self-attention head's importance for one prediction by each method of METHODS (0-based layers, heads
    and position). scores: method → (L, H). answer / versus: the token ids (versus None without a corrupted run);
    corrupted: the corrupted run's ids (None without one), corrupted_from: how it was made (one sentence); note:
    why the patching columns are NaN ("" when they are not)."""

    position: int
    answer: int
    versus: int | None
    corrupted: tuple[int, ...] | None
    corrupted_from: str
    note: str
    scores: dict[str, np.ndarray]


def check_model(ckpt: Checkpoint) -> None:
    """ValueError unless `ckpt` is a language model: patching pairs a language model's texts position by
    position, and an encoder's output is no next-token prediction."""
    if ckpt.config.has_encoder or not ckpt.config.has_decoder:
        raise ValueError(
            "the methods are compared on a language model's next-token prediction: choose a language model"
        )


def check_position(position: int, steps: int) -> None:
    """ValueError naming the range (from 1) when `position` (0-based) is not one of the text's `steps` tokens."""
    if not 0 <= position < steps:
        raise ValueError(f"position {position + 1} is outside the text's tokens: choose one of 1..{steps}")


def shuffled(ids: list[int]) -> list[int] | None:
    """`ids` (the start of text, the context, the predicting token) with the context shuffled: the first of seeds
    0, 1, … whose permutation changes the sequence; None when none does (fewer than two context tokens, or all
    alike)."""
    context = ids[1:-1]
    for seed in range(SEEDS):
        order = torch.randperm(len(context), generator=torch.Generator().manual_seed(seed)).tolist()
        mixed = [context[i] for i in order]
        if mixed != context:
            return [ids[0], *mixed, ids[-1]]
    return None


def given_ids(ckpt: Checkpoint, corrupted: Sequence[int], ids: list[int], position: int) -> list[int]:
    """A corrupted run given as token ids (what `Agreement.corrupted` keeps): the start of text first, put there
    when they do not begin with it; as many as the text's or as the ids up to the position, cut to the position.
    Ids keep the run reproducible where its decoded text would re-tokenize to other tokens. PairError for another
    count, ValueError for an id outside the vocabulary."""
    other = [int(i) for i in corrupted]
    if other[0] != ckpt.config.bos_id:
        other = [ckpt.config.bos_id, *other]
    if not all(0 <= i < ckpt.config.vocab_size for i in other):
        raise ValueError(f"token ids are 0 to {ckpt.config.vocab_size - 1} for {ckpt.name}; these have others")
    if len(other) not in (len(ids), position + 1):
        raise PairError(
            f"the corrupted token ids (the token ids given) have {len(other) - 1} tokens and the text "
            f"{len(ids) - 1}, {position} up to the position: patching pairs position with position"
        )
    return other[: position + 1]


def corrupted_ids(
    ckpt: Checkpoint, text: str, ids: list[int], position: int, corrupted: str | Sequence[int] | None
) -> tuple[list[int] | None, str]:
    """The corrupted run's ids up to the position (the module's docstring) and a sentence saying where they came
    from; (None, why) when there are none; PairError for a `corrupted` text (or ids, given_ids) of another token
    count."""
    if corrupted is not None and not isinstance(corrupted, str):
        return given_ids(ckpt, corrupted, ids, position), "the token ids given"
    measured = catalog.card_defaults(ckpt.card, "compare") or {}
    given = corrupted
    if given is None and measured.get("first") == text and isinstance(measured.get("second"), str):
        given, where = measured["second"], "the Compare pair the model's card measured"
    else:
        where = "the text given"
    if given is not None:
        other = encode_prefix(ckpt, clean_text(given).text, [])
        if len(other) != len(ids):
            why = (
                f"the corrupted text ({where}) has {len(other) - 1} tokens and the text {len(ids) - 1}: patching "
                "pairs position with position"
            )
            if corrupted is not None:  # asked for: an error; the card's pair for another text: a note
                raise PairError(why)
            return None, why
        return other[: position + 1], where
    mixed = shuffled(ids[: position + 1])
    if mixed is None:
        return None, "too few different tokens before the position to shuffle into a corrupted text"
    return mixed, "the text up to the position with the tokens between the start of text and it shuffled"


def _top(ckpt: Checkpoint, logits: Tensor, k: int) -> list[int]:
    return [p.id for p in top_k(logits[None], k, ckpt.tokenizer.pieces, ckpt.tokenizer.never_written)[0]]


@dataclass(frozen=True)
class Setup:
    """What every method of one prediction starts from: the text's analysis, its ids, the position and the answer,
    the ablations' setup (scored at the position) and the patching runs (None, with `note`, when there are none)."""

    analysis: Analysis
    ids: Tensor  # (1, T)
    position: int
    answer: int
    ranking: RankingSetup
    runs: Runs | None
    corrupted_from: str
    note: str


@torch.inference_mode()
def setup(
    ckpt: Checkpoint, text: str, position: int | None = None, corrupted: str | Sequence[int] | None = None
) -> Setup:
    """The text's analysis, one pass, and the two patching runs (a few passes). `position` None: the last token;
    `corrupted`: a text, or token ids (given_ids)."""
    check_model(ckpt)
    analysis = analyze(ckpt, text)
    ids = list(analysis.target_ids)
    position = len(ids) - 1 if position is None else position
    check_position(position, len(ids))
    target = torch.tensor([ids])
    logits, trace = forward(ckpt.model, target, record=True)
    sublayers = tuple((name, rec.keys.shape[1]) for name, rec in trace.attention.items())  # keys: (B, H, Tk, d_head)
    rows = slice(position, position + 1)
    ranking = RankingSetup(None, target, rows, logits[0].float()[rows], sublayers)
    answer = _top(ckpt, logits[0, position], 1)[0]
    other, corrupted_from = corrupted_ids(ckpt, analysis.text, ids, position, corrupted)
    runs, note = None, "" if other is not None else corrupted_from
    if other is not None:
        bad = torch.tensor([other])
        versus = next(t for t in _top(ckpt, forward(ckpt.model, bad, record=False)[0][0, -1], 2) if t != answer)
        runs = prepare_ids(ckpt, target[:, : position + 1], bad, answer, versus)
        if abs(runs.clean - runs.corrupted) < 1e-9:
            runs, note = None, "the two runs give the same logit difference: there is nothing for a patch to restore"
    return Setup(analysis, target, position, answer, ranking, runs, corrupted_from, note)


def _largest_but_first(weights: np.ndarray, position: int) -> np.ndarray:
    """(H,) each head's largest weight from query `position` to a key other than the first, of (H, Tq, Tk)."""
    row = weights[:, position, 1 : position + 1]
    return row.max(axis=-1) if row.shape[-1] else np.zeros(weights.shape[0])


def one_pass_scores(ckpt: Checkpoint, s: Setup) -> dict[str, np.ndarray]:
    """The methods that need a pass or two for every head at once: attention, value-weighted attention, direct
    logit attribution, attribution patching."""
    layers = ckpt.config.n_decoder_layers
    names = [sublayer_name("decoder", i, "self_attn") for i in range(layers)]
    sublayers = [s.analysis.sublayers[n] for n in names]
    scores = {
        "attention": np.stack([_largest_but_first(b.weights, s.position) for b in sublayers]),
        "value-weighted attention": np.stack(
            [_largest_but_first(b.value_weighted().weights, s.position) for b in sublayers]
        ),
        "direct logit attribution": attribute(ckpt, None, s.ids, s.position).heads["decoder.self_attn"],
    }
    empty = np.full((layers, ckpt.config.n_heads), np.nan)
    scores["attribution patching"] = empty if s.runs is None else attribution_patch_runs(ckpt, s.runs).scores
    return scores


def ablation_scores(
    ckpt: Checkpoint, s: Setup, mode: str, layer: int, heads: Sequence[int] | None = None
) -> np.ndarray:
    """Each head of `layer` (or of `heads`) switched off alone (`mode` "zero" or "mean"): KL at the position."""
    name = sublayer_name("decoder", layer, "self_attn")
    return np.array([kl for _, _, kl in rank_sublayer(ckpt, s.ranking, name, mode, heads)])


def every_ablation_score(ckpt: Checkpoint, s: Setup, mode: str) -> np.ndarray:
    """(L, H) each head switched off alone (`mode` "zero" or "mean"), KL at the position: every layer's heads side
    by side in batches (rank_heads), as `ablation_scores` of each layer gives them."""
    layers, heads = ckpt.config.n_decoder_layers, ckpt.config.n_heads
    every = [(sublayer_name("decoder", layer, "self_attn"), head) for layer in range(layers) for head in range(heads)]
    return np.array([kl for _, _, kl in rank_heads(ckpt, s.ranking, every, mode)]).reshape(layers, heads)


def patching_scores(ckpt: Checkpoint, s: Setup) -> np.ndarray:
    """(L, H) each head's activation patching result; NaN without a corrupted run."""
    if s.runs is None:
        return np.full((ckpt.config.n_decoder_layers, ckpt.config.n_heads), np.nan)
    return patch_runs(ckpt, s.runs, "heads").scores  # setup refused a zero span: the normalising cannot fail


def finish(ckpt: Checkpoint, s: Setup, scores: dict[str, np.ndarray]) -> Agreement:
    """The methods' scores as one record, in METHODS order."""
    runs = s.runs
    return Agreement(
        position=s.position,
        answer=s.answer,
        versus=None if runs is None else runs.versus,
        corrupted=None if runs is None else tuple(runs.corrupted_ids[0].tolist()),
        corrupted_from=s.corrupted_from,
        note=s.note,
        scores={m: scores[m] for m in METHODS},
    )


def agreement(
    ckpt: Checkpoint, text: str, position: int | None = None, corrupted: str | Sequence[int] | None = None
) -> Agreement:
    """Every self-attention head's importance for the prediction after `position` (0-based; None: the last token)
    by every method (the module's docstring). The app runs the same steps in chunks (ui.cache.agreement)."""
    s = setup(ckpt, text, position, corrupted)
    scores = one_pass_scores(ckpt, s)
    for mode in ("zero", "mean"):
        scores[f"ablation ({mode})"] = every_ablation_score(ckpt, s, mode)
    scores["activation patching"] = patching_scores(ckpt, s)
    return finish(ckpt, s, scores)


# --- a translator: one output token, every head of both stacks ---------------------------------------------------


@dataclass(frozen=True)
class TranslatorAgreement:
    """A translator's prediction at decoder `position` (0-based) of `target`, every head of every sub-layer (both
    stacks) by each method: scores, method → {sub-layer name: (H,)}, NaN where a method does not score a sub-layer (the
    encoder's heads have no query at the predicting position, so no attention column and no direct path to the
    logits). corrupted: the corrupted source's
    ids; note: why the patching columns are NaN ("" when they are not)."""

    position: int
    answer: int
    versus: int | None
    source: tuple[int, ...]
    target: tuple[int, ...]
    corrupted: tuple[int, ...] | None
    corrupted_from: str
    note: str
    scores: dict[str, dict[str, np.ndarray]]


def _largest(weights: np.ndarray, position: int, skip_first: bool) -> np.ndarray:
    """(H,) each head's largest weight from query `position` (a self-attention's first key, the start of text, left
    out), of (H, Tq, Tk)."""
    row = weights[:, position, 1:] if skip_first else weights[:, position]
    return row.max(axis=-1) if row.shape[-1] else np.zeros(weights.shape[0])


@torch.no_grad()  # not inference mode: attribution patching takes a gradient inside
def translator_agreement(
    ckpt: Checkpoint,
    text: str,
    position: int | None = None,
    corrupted: str | Sequence[int] | None = None,
    target: str | None = None,
) -> TranslatorAgreement:
    """Every head's importance for the translator's prediction after decoder `position` (0-based; None: the first
    output word), the target (its own output, or `target`) held fixed for every run: attention and value-weighted
    attention (decoder sub-layers), direct logit attribution (the decoder's, analysis.attribution), the KL at the
    position with each head of both stacks switched off alone (zero, mean), and activation patching of a corrupted
    source of the same length (`corrupted`; else the source with the tokens between its first and last shuffled,
    seeded), the target fixed (analysis.patching.patch_translator), and attribution patching of the same pair
    (attribution_patch_translator)."""
    analysis = analyze(ckpt, text, target=target)
    ids = list(analysis.target_ids)
    position = 0 if position is None else position
    if not 0 <= position < len(ids):
        raise ValueError(f"position {position + 1} is outside the target's tokens: choose one of 1..{len(ids)}")
    source_ids = encode_source(ckpt, analysis.text, [])
    source, decoder = torch.tensor([source_ids]), torch.tensor([ids])
    logits, trace = forward(ckpt.model, decoder, source, record=True)
    answer = _top(ckpt, logits[0, position], 1)[0]
    sublayers = tuple((name, rec.keys.shape[1]) for name, rec in trace.attention.items())
    rows = slice(position, position + 1)
    ranking = RankingSetup(source, decoder, rows, logits[0].float()[rows], sublayers)
    n_heads = ckpt.config.n_heads
    nan = {name: np.full(n_heads, np.nan) for name, _ in sublayers}
    scores: dict[str, dict[str, np.ndarray]] = {m: dict(nan) for m in METHODS}
    for name, sublayer in analysis.sublayers.items():
        if sublayer.stack == "decoder":
            skip = sublayer.type == "self_attn"
            scores["attention"][name] = _largest(sublayer.weights, position, skip)
            scores["value-weighted attention"][name] = _largest(sublayer.value_weighted().weights, position, skip)
    direct = attribute(ckpt, source, decoder, position).heads
    for attention, matrix in direct.items():
        stack, type_ = parse_attention_type(attention)
        for layer, row in enumerate(matrix):
            scores["direct logit attribution"][sublayer_name(stack, layer, type_)] = np.asarray(row, dtype=np.float64)
    every = [(name, h) for name, heads in sublayers for h in range(heads)]
    for mode in ("zero", "mean"):
        for name, head, kl in rank_heads(ckpt, ranking, every, mode):
            scores[f"ablation ({mode})"][name] = scores[f"ablation ({mode})"][name].copy()
            scores[f"ablation ({mode})"][name][head] = kl
    other, corrupted_from = _corrupted_source(ckpt, source_ids, corrupted)
    note, versus = "", None
    if other is None:
        note = corrupted_from
    else:
        bad = torch.tensor([other])
        tops = _top(ckpt, forward(ckpt.model, decoder, bad, record=False)[0][0, position], 2)
        versus = next(t for t in tops if t != answer)
        try:
            runs = prepare_translator(ckpt, source, bad, decoder, position, answer, versus)
            found = patch_translator(ckpt, runs, "heads")
            approximated = attribution_patch_translator(ckpt, runs)
        except PairError as exc:
            note = str(exc)
        else:
            note = ""
            for method, result in (("activation patching", found), ("attribution patching", approximated)):
                patched = scores[method]
                for (name, head), value in zip(result.cells, result.scores, strict=True):
                    patched[name] = patched[name].copy()
                    patched[name][head] = value
    corrupted_ids = None if other is None else tuple(other)
    return TranslatorAgreement(
        position, answer, versus, tuple(source_ids), tuple(ids), corrupted_ids, corrupted_from, note, scores
    )


def _corrupted_source(
    ckpt: Checkpoint, source: list[int], corrupted: str | Sequence[int] | None
) -> tuple[list[int] | None, str]:
    """The corrupted source's ids and where they came from: the text or ids given (PairError for another token
    count), else the source shuffled between its first and last token; (None, why) when it cannot be."""
    if corrupted is not None:
        other = encode_source(ckpt, clean_text(corrupted).text, []) if isinstance(corrupted, str) else list(corrupted)
        if len(other) != len(source):
            raise PairError(
                f"the corrupted source has {len(other)} tokens and the source {len(source)}: patching pairs source "
                "position with position"
            )
        return [int(i) for i in other], "the source given" if isinstance(corrupted, str) else "the token ids given"
    mixed = shuffled(source)
    if mixed is None:
        return None, "too few different tokens in the source to shuffle into a corrupted one"
    return mixed, "the source with the tokens between its first and last shuffled"
