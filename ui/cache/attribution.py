"""What wrote a prediction or a score, for the pass a text's analysis made: direct logit attribution, the logit
lens, each input token's share, and a head's raw score split into the stream's parts.
"""

from __future__ import annotations

from analysis import attribution, score_parts
from analysis import token_attribution as tokens_back
from analysis.record import Analysis
from inference.checkpoint import Checkpoint
from ui.cache.models import heavy_chunk, model_worker
from ui.cache.sources import Shown
from ui.kept import kept


def _attribute(ckpt: Checkpoint, text: str, target_ids: tuple[int, ...], position: int, token: int, versus: int | None):
    source, target = attribution.decoder_inputs(ckpt, text, target_ids)
    return attribution.attribute(ckpt, source, target, position, token, versus)


@kept("Splitting the prediction into what each part wrote…")
def logit_attribution(shown: Shown, position: int, token: int, versus: int | None) -> attribution.Attribution:
    """The logit of `token` after decoder position `position` (minus `versus`'s), split into what each head, each
    feed-forward and the rest wrote (analysis.attribution), for the pass the text's analysis made; run by the
    model's worker."""
    worker = model_worker(shown.path, shown.stamp)
    ids = shown.analysis.target_ids
    return worker.call(_attribute, shown.text, ids, position, token, versus, tokens=worker.tokens(shown.text))


def _lens(ckpt: Checkpoint, text: str, target_ids: tuple[int, ...]) -> attribution.LogitLens:
    return attribution.logit_lens(ckpt, *attribution.decoder_inputs(ckpt, text, target_ids))


@kept("Reading each layer's stream as if it were the last…")
def logit_lens(shown: Shown) -> attribution.LogitLens:
    """Each layer's top guess at each decoder position (analysis.attribution.logit_lens); run by the worker."""
    worker = model_worker(shown.path, shown.stamp)
    return worker.call(_lens, shown.text, shown.analysis.target_ids, tokens=worker.tokens(shown.text))


def _token_attribution(ckpt: Checkpoint, analysis: Analysis, position: int, token: int) -> tokens_back.TokenAttribution:
    return tokens_back.token_attribution(ckpt, analysis, position, token)


@kept("Following the prediction back to each input token…")
def token_attribution(shown: Shown, position: int, token: int) -> tokens_back.TokenAttribution:
    """Each input token's number toward `token` after decoder position `position` under every method
    (analysis.token_attribution): one heavy chunk of the model's worker (tens of passes with their gradients), so
    that a class's pages go first."""
    worker = model_worker(shown.path, shown.stamp)
    passes = tokens_back.STEPS + 2
    return heavy_chunk(
        worker, _token_attribution, shown.analysis, position, token, tokens=passes * worker.tokens(shown.text)
    )


def _score_parts(ckpt: Checkpoint, text: str, target_ids: tuple[int, ...], sublayer: str, head: int, q: int, k: int):
    ids, source = score_parts.pass_inputs(ckpt, text, target_ids)
    return score_parts.score_parts(ckpt.model, ids, source, sublayer, head, q, k)


@kept("Splitting the score into what wrote it…")
def score_split(shown: Shown, sublayer: str, head: int, query: int, key: int) -> score_parts.ScoreParts:
    """Head `head`'s raw score of `query` for `key` in `sublayer` (0-based) split into the stream's parts on each side
    (analysis.score_parts), for the pass the text's analysis made; run by the model's worker."""
    worker = model_worker(shown.path, shown.stamp)
    ids = shown.analysis.target_ids
    return worker.call(_score_parts, shown.text, ids, sublayer, head, query, key, tokens=worker.tokens(shown.text))
