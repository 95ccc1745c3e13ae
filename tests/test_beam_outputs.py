"""The translator's beam search writes what it wrote when these outputs were recorded (tests/beam_outputs.json:
beam 4, up to 64 tokens, one batch and one text at a time): work on the speed of beam_many or generate must leave
every sentence's tokens as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from inference.checkpoint import load_checkpoint
from inference.decoding import beam_many, generate
from inference.text import encode_source

ROOT = Path(__file__).resolve().parents[1]
RECORDED: dict[str, list[int]] = json.loads((ROOT / "tests" / "beam_outputs.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def translator():
    return load_checkpoint(ROOT / "checkpoints" / "translate-en-de")


def test_beam_many_writes_the_recorded_outputs_for_a_batch_of_everyday_sentences(translator) -> None:
    sources = [encode_source(translator, text, []) for text in RECORDED]
    written = beam_many(translator.model, sources, [64] * len(sources), 4)
    assert dict(zip(RECORDED, (g.ids for g in written))) == RECORDED


@pytest.mark.parametrize("text", list(RECORDED)[:4])
def test_generate_writes_the_recorded_output_one_text_at_a_time(translator, text: str) -> None:
    source = torch.tensor([encode_source(translator, text, [])])
    assert generate(translator.model, [translator.config.bos_id], source, 64, 4).ids == RECORDED[text]
