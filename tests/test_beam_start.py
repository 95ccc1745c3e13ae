"""Beam search that starts from a traced pass (the page's own, which already ran the encoder and fed bos) writes
what beam search alone writes: on the shipped translator and on a tiny seeded model, beams 1, 2 and 4."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import BOS, PAD, random_ids

from inference.checkpoint import load_checkpoint
from inference.decoding import beam_many, decoding_cache, generate, pad_rows
from inference.text import encode_source
from model.forward import forward

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["Good morning!", "I would like a cup of coffee, please.", "Hi.", "The dog sleeps under the bed."]


@pytest.fixture(scope="module")
def translator():
    return load_checkpoint(ROOT / "checkpoints" / "translate-en-de")


def begun(model, sources: list[list[int]], rows: list[int]):
    """The page's traced first pass over every source (bos fed, every head recorded), kept for `rows` only."""
    logits, trace = forward(model, torch.full((len(sources), 1), BOS), pad_rows(sources, PAD))
    picked = torch.tensor(rows)
    return logits.index_select(0, picked), decoding_cache(trace, picked)


def alone(model, sources: list[list[int]], limits: list[int], beam: int):
    return [generate(model, [BOS], torch.tensor([s]), m, beam) for s, m in zip(sources, limits)]


@pytest.mark.parametrize("beam", [1, 2, 4])
def test_the_translator_s_beam_from_the_traced_pass_equals_each_text_alone(translator, beam) -> None:
    """Rows 0, 2 and 3 decode (row 1 gives its own target, as a request with a target does); the padding of all
    four stays, as on the page."""
    sources = [encode_source(translator, text, []) for text in TEXTS]
    rows, limits = [0, 2, 3], [64, 3, 64]
    chosen = [sources[r] for r in rows]
    started = beam_many(translator.model, chosen, limits, beam, start=begun(translator.model, sources, rows))
    assert started == alone(translator.model, chosen, limits, beam)
    assert started == beam_many(translator.model, chosen, limits, beam)


@pytest.mark.parametrize("beam", [1, 2, 4])
def test_a_tiny_model_s_beam_from_the_traced_pass_equals_each_text_alone(enc_dec, beam, gen) -> None:
    sources = [random_ids(gen, n).tolist() for n in (3, 9, 5, 12)]
    rows, limits = [0, 1, 3], [10, 1, 20]
    chosen = [sources[r] for r in rows]
    started = beam_many(enc_dec, chosen, limits, beam, start=begun(enc_dec, sources, rows))
    assert started == alone(enc_dec, chosen, limits, beam)


def test_the_decoding_cache_keeps_the_decoder_s_keys_and_values_only(enc_dec, gen) -> None:
    """Beam search copies its cache at every step: nothing it never reads is carried."""
    _, trace = forward(enc_dec, torch.full((2, 1), BOS), random_ids(gen, 2, 5))
    cache = decoding_cache(trace, torch.tensor([1]))
    assert cache.attention and all(name.startswith("decoder.") for name in cache.attention)
    assert all(rec.scores is None and rec.weights is None for rec in cache.attention.values())
    for name, rec in cache.attention.items():
        assert torch.equal(rec.keys, trace.attention[name].keys[1:])
    assert torch.equal(cache.source_ids, trace.source_ids[1:])


def test_a_texts_hypotheses_reordered_keep_their_sources_cross_attention_as_it_is(enc_dec, gen) -> None:
    """`Trace.select(rows, same_sources=True)`: as many rows as before, each with its text, shares the source and the
    cross-attention records instead of copying them (every row of one text holds the same ones); rows one more or one
    fewer are selected whole, so that every record has the trace's rows."""
    _, trace = forward(enc_dec, torch.full((1, 1), BOS), random_ids(gen, 1, 5))
    wide = trace.select(torch.tensor([0, 0, 0]), same_sources=True)  # one row becomes three: the beam opens
    assert all(rec.keys.shape[0] == 3 and rec.mask.shape[0] == 3 for rec in wide.attention.values())
    assert wide.source_ids.shape[0] == 3
    reordered = wide.select(torch.tensor([2, 0, 0]), same_sources=True)
    for name, rec in reordered.attention.items():
        if name.endswith(".cross_attn"):
            assert rec is wide.attention[name]  # kept, not copied
        else:
            assert torch.equal(rec.keys, wide.attention[name].keys[[2, 0, 0]])
    assert reordered.source_ids is wide.source_ids
    fewer = wide.select(torch.tensor([1, 2]), same_sources=True)  # a text that leaves takes its rows away
    assert all(rec.keys.shape[0] == 2 for rec in fewer.attention.values()) and fewer.source_ids.shape[0] == 2
