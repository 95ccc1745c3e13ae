"""Files keep the keys they were written with: a card names a head's sub-layer under "block", a corpus manifest and
its saved state list the sub-layers under "blocks" (the formats' keys, inference.catalog.SUBLAYER_KEY and
analysis.corpus.reduce.SUBLAYERS_KEY), so that the shipped cards and profiles, and any written before, read as they
are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.corpus.reduce import Reducer
from analysis.corpus.store import open_corpus
from inference import catalog

ROOT = Path(__file__).resolve().parent.parent
SUBLAYERS = ["decoder.layers.0.self_attn", "decoder.layers.1.self_attn"]


def test_a_shipped_card_names_its_heads_sublayer_under_block() -> None:
    card = json.loads((ROOT / "checkpoints" / "induction" / "card.json").read_text(encoding="utf-8"))
    assert card["defaults"]["head"]["block"] == "decoder.layers.1.self_attn"  # the file as it was written
    assert catalog.default_head(card) == catalog.default_head(card, "ablation") == ("decoder.layers.1.self_attn", 0)
    assert catalog.recorded_head(card) == ("decoder.layers.1.self_attn", 0, "induction")


def test_a_shipped_corpus_profile_reads_its_sublayers_under_blocks() -> None:
    corpus = open_corpus(ROOT / "corpora" / "induction-brown" / "profile")
    assert corpus.manifest["blocks"] == SUBLAYERS
    assert len(corpus.top_contexts(2, 1, k=3)) == 3
    with pytest.raises(ValueError, match="layer is 1 to 2 in this corpus, not 3"):
        corpus.top_contexts(3, 1)  # the layer count read from the manifest's sub-layers


def test_a_saved_corpus_state_keeps_its_sublayers_under_blocks() -> None:
    arrays, info = Reducer(SUBLAYERS, n_heads=4, d_head=8, top_k=2, sample=3, seed=0).state()
    assert info["blocks"] == SUBLAYERS and "sublayers" not in info
    assert Reducer.from_state(arrays, json.loads(json.dumps(info))).sublayers == SUBLAYERS
