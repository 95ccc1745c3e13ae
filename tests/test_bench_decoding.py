"""The class benches say which decoding the server gives each translator: the app's default, its card's beam."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import common  # noqa: E402


def test_the_bench_line_names_the_translator_s_beam_and_the_greedy_ones() -> None:
    line = common.decoding_line([ROOT / "checkpoints" / "translate-en-de", ROOT / "checkpoints" / "reverse"])
    assert "translate-en-de beam 4" in line and "reverse greedy" in line


def test_a_bench_of_language_models_only_says_none_decodes(tiny_checkpoints) -> None:
    assert "no encoder-decoder" in common.decoding_line([tiny_checkpoints["decoder-only"], None])
