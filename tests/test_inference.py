"""Decoding: generate(beam=1) against a hand-written greedy loop with full recomputation, beam search, top_k."""

from __future__ import annotations

import copy

import pytest
import torch

from inference.decoding import Sampling, generate, top_k
from inference.prediction import Prediction

BOS, EOS = 2, 3


def greedy_by_full_recomputation(model, prefix: list[int], source: torch.Tensor | None, max_tokens: int):
    """Re-run the whole model on everything so far at every step; stop at eos (which is not returned)."""
    ids = list(prefix)
    out: list[int] = []
    with torch.no_grad():
        for _ in range(max_tokens):
            target = torch.tensor([ids])
            logits, _ = model(source, target) if source is not None else model(target)
            token = int(logits[0, -1].argmax())
            if token == model.config.eos_id:
                return out, True
            out.append(token)
            ids.append(token)
    return out, False


def sequence_log_prob(model, prefix: list[int], source: torch.Tensor | None, ids: list[int], finished: bool) -> float:
    """Sum of log p(token | everything before) over `ids` (and the final eos when finished), by full recomputation."""
    tokens = ids + ([model.config.eos_id] if finished else [])
    full = torch.tensor([prefix + tokens])
    with torch.no_grad():
        logits, _ = model(source, full) if source is not None else model(full)
    log_probs = torch.log_softmax(logits[0].double(), dim=-1)
    start = len(prefix) - 1
    return float(sum(log_probs[start + i, t] for i, t in enumerate(tokens)))


def with_eos_bias(model, bias: float):
    """A copy of `model` whose output layer favours (or avoids) eos by `bias` logits."""
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.generator.bias[other.config.eos_id] += bias
    return other


def case(model, make_ids, gen, n: int = 0):
    """A (prefix, source) pair: the encoder-decoder reads a source and starts from bos; the LM continues ids."""
    if model.config.has_cross_attention:
        return [BOS], make_ids(gen, 1, 5 + n)
    return [BOS, *make_ids(gen, 3 + n).tolist()], None


@pytest.mark.parametrize("eos_bias", [0.0, 1.5, 3.0, 50.0])  # never, sometimes mid-sequence, always eos
def test_greedy_generate_equals_a_hand_written_greedy_loop_with_full_recomputation(model, eos_bias, make_ids, gen):
    biased = with_eos_bias(model, eos_bias)
    for n in range(3):
        prefix, source = case(biased, make_ids, gen, n)
        result = generate(biased, prefix, source, max_tokens=12, beam=1)
        expected, finished = greedy_by_full_recomputation(biased, prefix, source, 12)
        assert result.ids == expected
        assert result.finished == finished
    if eos_bias == 50.0:  # eos first: nothing generated, but finished
        assert (result.ids, result.finished) == ([], True)


def test_generate_stops_at_max_tokens_and_at_max_len(lm, make_ids, gen) -> None:
    quiet = with_eos_bias(lm, -1e4)  # never eos
    prefix = [BOS, *make_ids(gen, 3).tolist()]
    assert len(generate(quiet, prefix, max_tokens=5).ids) == 5
    result = generate(quiet, prefix, max_tokens=0)
    assert (result.ids, result.finished) == ([], False)
    long_prefix = [BOS, *make_ids(gen, lm.config.max_len - 3).tolist()]
    result = generate(quiet, long_prefix, max_tokens=20)
    assert len(result.ids) == 2 and not result.finished  # room for max_len - len(prefix) tokens only


@pytest.mark.parametrize("beam", [1, 2, 4])
def test_decoding_with_the_cache_equals_decoding_without_it(model, beam, make_ids, gen) -> None:
    """The cache only saves work: greedy and beam search give the same tokens when every step recomputes the
    whole sequence. Beam search reorders the cached keys and values of its surviving hypotheses at each step;
    a wrong reorder would continue a hypothesis from another one's keys and values."""
    reordered = 0
    for n in range(6):
        prefix, source = case(model, make_ids, gen, n)
        cached = generate(model, prefix, source, max_tokens=10, beam=beam, cache=True)
        recomputed = generate(model, prefix, source, max_tokens=10, beam=beam, cache=False)
        assert (cached.ids, cached.finished) == (recomputed.ids, recomputed.finished)
        reordered += len(cached.ids)
    assert reordered > 0  # something was decoded, so the comparison compared something


@pytest.mark.parametrize("beam", [2, 3])
def test_beam_search_runs_and_returns_valid_ids(model, beam, make_ids, gen) -> None:
    """Beam search is not guaranteed to beat greedy (pruning, and finished hypotheses win with a length norm),
    so only validity is asserted; beam=1 is checked against greedy above."""
    for n in range(2):
        prefix, source = case(model, make_ids, gen, n)
        result = generate(model, prefix, source, max_tokens=8, beam=beam)
        assert isinstance(result.finished, bool)
        assert 0 <= len(result.ids) <= 8
        assert all(isinstance(i, int) and 0 <= i < model.config.vocab_size for i in result.ids)
        assert model.config.eos_id not in result.ids
        if not result.finished:
            assert len(result.ids) == 8
        assert torch.isfinite(torch.tensor(sequence_log_prob(model, prefix, source, result.ids, result.finished)))


def test_beam_search_without_eos_keeps_the_most_probable_of_its_final_hypotheses(lm, make_ids, gen) -> None:
    """With eos impossible and max_tokens=1, a beam keeps the top tokens: its best is the greedy token."""
    quiet = with_eos_bias(lm, -1e4)
    prefix = [BOS, *make_ids(gen, 4).tolist()]
    greedy = generate(quiet, prefix, max_tokens=1, beam=1).ids
    for beam in (2, 3, 5):
        assert generate(quiet, prefix, max_tokens=1, beam=beam).ids == greedy


def test_generate_rejects_a_beam_below_one_and_an_encoder_decoder_without_source(enc_dec) -> None:
    with pytest.raises(ValueError, match="beam"):
        generate(enc_dec, [BOS], torch.tensor([[5, 6, EOS]]), beam=0)
    with pytest.raises(ValueError, match="source"):
        generate(enc_dec, [BOS], None)


def pieces(ids: list[int]) -> list[str]:
    """A stand-in tokenizer's pieces: token 3 is "t3"."""
    return [f"t{i}" for i in ids]


def test_top_k_returns_the_k_most_probable_tokens_in_order() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0], [5.0, 4.0, -1.0, 0.0]])
    result = top_k(logits, 3, pieces)
    probs = torch.softmax(logits, dim=-1)
    assert [[t.id for t in row] for row in result] == [[1, 3, 2], [0, 1, 3]]
    assert [[t.piece for t in row] for row in result] == [["t1", "t3", "t2"], ["t0", "t1", "t3"]]
    assert all(isinstance(t, Prediction) for row in result for t in row)
    for row, p in zip(result, probs):
        assert [t.prob for t in row] == pytest.approx(sorted(p.tolist(), reverse=True)[:3])
    assert len(top_k(logits, 10, pieces)[0]) == 4  # k larger than the vocabulary


def test_top_k_is_in_descending_order_and_exact_ties_go_by_token_id() -> None:
    near = torch.log(torch.tensor([[0.5, 0.008879, 0.00893, 0.2]]))  # nearly equal: the larger first all the same
    assert [t.id for t in top_k(near, 4, pieces)[0]] == [0, 3, 2, 1]
    tied = torch.tensor([[5.0, -1.0, -1.0, -1.0]])  # label smoothing: tokens of exactly equal probability
    assert [t.id for t in top_k(tied, 4, pieces)[0]] == [0, 1, 2, 3]
    probs = [t.prob for t in top_k(torch.randn(1, 50), 20, pieces)[0]]
    assert probs == sorted(probs, reverse=True)


def test_sampling_is_seeded_cached_equals_recomputed_and_top_k_1_is_greedy(model, kind, gen) -> None:
    source = torch.tensor([[5, 6, 7, 8, EOS]]) if kind == "encoder-decoder" else None
    prefix = [BOS] if kind == "encoder-decoder" else [BOS, 9, 10]
    warm = Sampling(temperature=1.5, top_k=0, seed=3)
    first = generate(model, prefix, source, max_tokens=12, sampling=warm)
    assert generate(model, prefix, source, max_tokens=12, sampling=warm) == first  # same seed, same text
    assert generate(model, prefix, source, max_tokens=12, sampling=warm, cache=False) == first  # cache: work only
    others = {tuple(generate(model, prefix, source, max_tokens=12, sampling=Sampling(1.5, 0, s)).ids) for s in range(6)}
    assert len(others) > 1  # the seed matters
    one = Sampling(temperature=0.7, top_k=1, seed=5)
    assert generate(model, prefix, source, max_tokens=12, sampling=one) == generate(model, prefix, source, 12)
    with pytest.raises(ValueError, match="temperature"):
        Sampling(temperature=0.0)
    with pytest.raises(ValueError, match="beam"):
        generate(model, prefix, source, max_tokens=3, beam=2, sampling=warm)
