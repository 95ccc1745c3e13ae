"""The translator's own output in the app is decoded as its card says: beam 4 only where `python -m atlas evaluate`
measured beam 4 better than greedy decoding on the everyday test set in BLEU and chrF (analysis.defaults.decoding,
written by `python -m atlas defaults`), else greedy."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from analysis.analyze import Request, analyze, decode_outputs
from analysis.defaults import decoding
from inference.catalog import decoding_beam
from inference.checkpoint import load_checkpoint
from inference.decoding import beam_many, generate
from inference.text import encode_source

ROOT = Path(__file__).resolve().parents[1]
COFFEE = "I would like a cup of coffee, please."  # the translator's first preset


def card_with(greedy: tuple[float, float], beam: tuple[float, float]) -> dict:
    scored = lambda bleu, chrf: {"bleu": bleu, "chrf": chrf}
    return {"metrics": {"test_sets": {"everyday": {"greedy": scored(*greedy), "beam4": scored(*beam)}}}}


def test_beam_4_is_chosen_only_where_it_scored_better_in_both() -> None:
    assert decoding(card_with((46.48, 66.86), (47.44, 67.29)))["beam"] == 4
    assert decoding(card_with((46.48, 66.86), (47.44, 66.80)))["beam"] == 1  # chrF worse
    assert decoding(card_with((46.48, 66.86), (46.48, 67.00)))["beam"] == 1  # BLEU not better
    assert decoding({}) is None and decoding({"metrics": {"test_sets": {"everyday": {"greedy": {}}}}}) is None


@pytest.mark.parametrize("beam", [None, 0, 9, "4", True, 2.5])
def test_a_card_beam_that_is_not_one_decodes_greedily(beam) -> None:
    assert decoding_beam({"defaults": {"decoding": {"beam": beam}}}) == 1
    assert decoding_beam({"defaults": {"decoding": {"beam": 4}}}) == 4


@pytest.fixture(scope="module")
def translator():
    return load_checkpoint(ROOT / "checkpoints" / "translate-en-de")


def test_the_shipped_translator_decodes_with_the_beam_its_card_measured(translator) -> None:
    """The card's figures say beam 4: the analysis shows what beam 4 writes, here not what greedy writes (the first
    preset: greedy's "Kaffeessee" for a cup of coffee); a card without the record decodes greedily again."""
    assert translator.card["defaults"]["decoding"]["beam"] == 4
    source = torch.tensor([encode_source(translator, COFFEE, [])])
    bos = translator.config.bos_id
    beam = generate(translator.model, [bos], source, 64, 4).ids
    greedy = generate(translator.model, [bos], source, 64, 1).ids
    assert beam != greedy, "the preset where the two differ"
    assert list(analyze(translator, COFFEE).target_ids[1:]) == beam
    assert list(decode_outputs(translator, [Request(COFFEE)])[0][1:]) == beam
    plain = replace(translator, card={k: v for k, v in translator.card.items() if k != "defaults"})
    assert list(analyze(plain, COFFEE).target_ids[1:]) == greedy
    assert list(decode_outputs(plain, [Request(COFFEE)])[0][1:]) == greedy


def test_beam_search_of_many_texts_in_one_batch_equals_each_alone(translator) -> None:
    """The worker decodes a class's texts together: each one's beam search must be the one it gets alone, with
    its own length limit (a limit cut short is not the same search truncated), and with texts leaving the batch
    as they finish."""
    texts = [s["input"] for s in translator.card["samples"]] + ["Hi.", "The dog sleeps under the bed."]
    sources = [encode_source(translator, text, []) for text in texts]
    limits = [64 if i % 3 else 4 for i in range(len(texts))] + [0]
    sources.append(sources[0])
    bos = translator.config.bos_id
    alone = [generate(translator.model, [bos], torch.tensor([s]), m, 4) for s, m in zip(sources, limits)]
    assert beam_many(translator.model, sources, limits, 4) == alone
    assert alone[-1].ids == [] and any(not g.finished for g in alone) and any(g.finished for g in alone)
    assert beam_many(translator.model, sources[:3], [64] * 3, 1) == [
        generate(translator.model, [bos], torch.tensor([s]), 64, 1) for s in sources[:3]
    ]


def test_generate_says_the_translator_writes_with_beam_search(app) -> None:
    """The page steps through the output with each step's likeliest tokens: it says that the written one need not be
    the top one, because the card chose beam search."""
    at = app(folder=ROOT / "checkpoints", model="translate-en-de")
    at.switch_page("views/generate.py").run()
    assert not at.exception
    said = " ".join(c.value for c in at.caption)
    assert "beam search" in said and "not always the top one" in said
