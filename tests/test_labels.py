"""Token labels at any length: every heatmap's axes and every cell's hover name position (from 1) and piece, and a
byte-level BPE's pieces read as the text they stand for (issue 37, point 3)."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import numpy as np
import plotly.io as pio

from inference.pretrained.tokenizer import BytePiece, PretrainedTokenizer
from inference.tokenizer import Tokenizer
from viz.compare import difference_heatmap
from viz.heads import head_heatmap
from viz.labels import display_piece, token_labels
from viz.masks import MAX_CELLS, mask_heatmap, padding_heatmap
from viz.rollout import rollout_heatmap
from viz.steps import Steps, steps_table
from viz.style import AXIS_LABELS
from viz.training import head_over_steps

ROOT = Path(__file__).resolve().parents[1]
LONG = 256  # lm-english's and SmolLM2's longest input
PIECES = [f"▁w{i % 7}" for i in range(LONG)]  # repeated pieces: only the position tells them apart


def weights(n: int, seed: int = 0) -> np.ndarray:
    w = np.random.default_rng(seed).random((n, n), dtype=np.float32)
    return w / w.sum(axis=1, keepdims=True)


def spec(fig) -> dict:
    return json.loads(pio.to_json(fig, validate=False))


def assert_every_cell_names_both(trace: dict, rows: list[str], cols: list[str], row_word: str, col_word: str) -> None:
    """Each cell's hover names its row's and its column's position and piece, read from customdata (not the axis,
    whose ticks label only some positions)."""
    hover = trace["customdata"]
    assert len(hover) == len(rows) and all(len(row) == len(cols) for row in hover)
    assert "%{customdata}" in trace["hovertemplate"]
    assert "%{x}" not in trace["hovertemplate"] and "%{y}" not in trace["hovertemplate"]
    for i, row in enumerate(hover):
        for j, cell in enumerate(row):
            assert cell.startswith(f"{row_word} {i + 1}:{rows[i]} → {col_word} {j + 1}:{cols[j]}"), (i, j, cell)


def assert_ticks_read_position_and_piece(axis: dict, pieces: list[str]) -> None:
    labels = token_labels(pieces)
    assert 0 < len(axis["ticktext"]) <= AXIS_LABELS
    assert axis["ticktext"] == [labels[v - 1] for v in axis["tickvals"]]  # tick at position v reads `v:piece`


# Byte-level pieces -----------------------------------------------------------------------------------------------


def test_a_byte_level_piece_is_shown_as_the_text_it_stands_for() -> None:
    assert display_piece(BytePiece("Ġrights")) == "▁rights"  # a leading space, shown as SentencePiece shows it
    assert display_piece(BytePiece("Ċ")) == "↵" and display_piece(BytePiece("ĉ")) == "⇥"
    assert display_piece(BytePiece("ĠĠĠ")) == "▁▁▁"
    assert display_piece(BytePiece("Ã¼ber")) == "über"  # two byte characters, one letter
    assert display_piece(BytePiece("âĢ")) == "<0xE2><0x80>"  # bytes of a character split across pieces
    assert display_piece(BytePiece("<|endoftext|>")) == "<|endoftext|>"


def test_only_pieces_that_say_they_are_byte_level_are_decoded() -> None:
    assert display_piece("Ġrights") == "Ġrights"  # a plain str is never guessed at
    assert display_piece("▁Straße") == "▁Straße" and display_piece("Ã¼") == "Ã¼"
    translator = Tokenizer.from_file(ROOT / "checkpoints" / "translate-en-de" / "tokenizer.model")
    pieces = translator.pieces(translator.encode("Die Straße über dem Fluss"))
    shown = "".join(display_piece(p) for p in pieces)
    assert "ß" in shown and "ü" in shown  # the byte table maps ß and ü too: SentencePiece's stay as they are


def test_a_byte_level_tokenizer_hands_out_flagged_pieces_that_equal_the_vocabulary() -> None:
    tokens = ["Ġ", "t", "h", "e", "c", "a", "Ġt", "he", "Ġthe", "Ċ", "<|endoftext|>"]
    merges = ["Ġ t", "h e", "Ġt he"]
    specials = dict.fromkeys(("pad_id", "unk_id", "bos_id", "eos_id"), 10)
    tok = PretrainedTokenizer.byte_level_bpe(tokens, merges, [10], specials, "test")
    pieces = tok.pieces(tok.encode(" the\n"))
    assert pieces == ["Ġthe", "Ċ"]  # equal to, and looked up as, the vocabulary's spelling
    assert all(isinstance(p, BytePiece) for p in pieces)
    assert [display_piece(p) for p in pieces] == ["▁the", "↵"]
    kept = pickle.loads(pickle.dumps(pieces))  # noqa: S301 (our own bytes): as a cache keeps an analysis
    assert kept == pieces and all(p.byte_level for p in kept)


def test_a_tokenizer_json_is_byte_level_only_when_its_decoder_says_so() -> None:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models

    def made(decoder) -> PretrainedTokenizer:
        hf = HFTokenizer(models.WordLevel({"[PAD]": 0, "a": 1, "Ġa": 2}, unk_token="[PAD]"))
        if decoder is not None:
            hf.decoder = decoder
        return PretrainedTokenizer(hf, dict.fromkeys(("pad_id", "unk_id", "bos_id", "eos_id"), 0), "test")

    assert made(decoders.ByteLevel()).byte_level
    assert made(decoders.Sequence([decoders.ByteLevel()])).byte_level
    assert not made(decoders.WordPiece()).byte_level and not made(None).byte_level
    assert type(made(decoders.WordPiece()).pieces([2])[0]) is str


# Every heatmap at 256 tokens ------------------------------------------------------------------------------------


def test_one_head_names_position_and_piece_in_every_cell_at_256_tokens() -> None:
    fig = spec(head_heatmap(weights(LONG), PIECES, PIECES))
    assert_every_cell_names_both(fig["data"][0], PIECES, PIECES, "query", "key")
    for axis in ("xaxis", "yaxis"):
        assert_ticks_read_position_and_piece(fig["layout"][axis], PIECES)


def test_rollout_names_position_and_piece_in_every_cell_at_256_tokens() -> None:
    fig = spec(rollout_heatmap(weights(LONG), PIECES, PIECES))
    assert_every_cell_names_both(fig["data"][0], PIECES, PIECES, "output", "input")
    assert_ticks_read_position_and_piece(fig["layout"]["xaxis"], PIECES)


def test_two_texts_difference_names_position_and_piece_in_every_cell_at_256_tokens() -> None:
    fig = spec(difference_heatmap(weights(LONG), weights(LONG, 1), (PIECES, PIECES), (PIECES, PIECES), "d"))
    assert_every_cell_names_both(fig["data"][0], PIECES, PIECES, "query", "key")
    assert_ticks_read_position_and_piece(fig["layout"]["yaxis"], PIECES)


def test_a_head_through_training_names_position_and_piece_in_every_cell_at_256_tokens() -> None:
    fig = spec(head_over_steps([weights(LONG), weights(LONG, 1)], ["step 1", "step 2"], PIECES, PIECES))
    for trace in fig["data"]:
        assert_every_cell_names_both(trace, PIECES, PIECES, "query", "key")


def test_a_mask_names_position_piece_and_verdict_in_every_cell() -> None:
    n = MAX_CELLS  # the longest mask drawn cell by cell
    causal = np.tril(np.ones((n, n), dtype=bool))
    trace = spec(mask_heatmap(causal, PIECES[:n], PIECES[:n], "m"))["data"][0]
    assert_every_cell_names_both(trace, PIECES[:n], PIECES[:n], "query", "key")
    assert trace["customdata"][2][1].endswith(": may attend") and trace["customdata"][1][2].endswith(": masked (−∞)")


def test_a_padding_mask_names_sentence_position_and_piece() -> None:
    from analysis.record import BatchMasks

    pieces = [["▁Hi", "!", "<pad>"], ["▁Hello", "▁there", "!"]]
    padding = np.array([[True, True, False], [True, True, True]])
    batch = BatchMasks("encoder", False, pieces, padding, padding[:, None, :] & padding[:, :, None])
    trace = spec(padding_heatmap(batch))["data"][0]
    assert trace["customdata"][0][2] == "sentence 1, position 3:&lt;pad&gt;: padding"
    assert trace["customdata"][1][1] == "sentence 2, position 2:▁there: real token"


def test_the_numbers_table_shows_minus_infinity_as_text() -> None:
    scores = np.array([0.5, -1.25, 2.0])
    allowed = np.array([True, True, False])
    v = np.zeros((3, 2))
    masked = np.where(allowed, scores, -np.inf)
    steps = Steps(0, 0, "▁a", ("▁a", "▁b", "▁c"), 2, scores, allowed, masked, np.array([0.6, 0.4, 0.0]), v, v, v[0])
    table = steps_table(steps)
    assert list(table["masked"]) == ["0.5000", "-1.2500", "−∞"]
    assert "Infinity" not in table.to_json() and list(table["key"]) == ["1:▁a", "2:▁b", "3:▁c"]


def test_no_raw_byte_marks_reach_a_chart() -> None:
    pieces = [BytePiece(p) for p in ("<|endoftext|>", "The", "Ġrights", "Ċ", "Ġof")]
    fig = spec(head_heatmap(weights(len(pieces)), pieces, pieces))
    text = json.dumps(fig["data"][0]["customdata"], ensure_ascii=False) + json.dumps(fig["layout"]["xaxis"])
    assert not re.search("[ĠĊ]", text)
    assert fig["layout"]["xaxis"]["ticktext"][2:] == ["3:▁rights", "4:↵", "5:▁of"]
