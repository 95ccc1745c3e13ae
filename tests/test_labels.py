"""Token labels at any length: every heatmap's axes and every cell's hover name position (from 1) and piece, and a
byte-level BPE's pieces read as the text they stand for."""

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
from viz.labels import display_piece, marks_note, reading_note, token_labels
from viz.masks import MAX_CELLS, mask_heatmap, padding_heatmap
from viz.rollout import rollout_heatmap
from viz.steps import Steps, steps_table
from viz.style import AXIS_LABELS, tick_step
from viz.training import STRIP_ROW_LABELS, head_over_steps

ROOT = Path(__file__).resolve().parents[1]
LONG = 256  # lm-english's and SmolLM2's longest input
PIECES = [f"▁w{i % 7}" for i in range(LONG)]  # repeated pieces: only the position tells them apart


def weights(n: int, seed: int = 0) -> np.ndarray:
    w = np.random.default_rng(seed).random((n, n), dtype=np.float32)
    return w / w.sum(axis=1, keepdims=True)


def spec(fig) -> dict:
    return json.loads(pio.to_json(fig, validate=False))


def assert_every_cell_names_both(
    trace: dict, layout: dict, rows: list[str], cols: list[str], row_word: str, col_word: str, axes: str = ""
) -> None:
    """Each cell's hover names its row's and its column's position and piece: the heatmap's y and x are the token
    labels, one category each (viz.style.category_axis), and the hover reads the cell's own (%{y}, %{x}), never a
    string a cell. On a categorical axis %{x} is the category wherever the ticks are (tests/test_browser_labels.py
    hovers between them in chromium)."""
    assert trace["y"] == token_labels(rows) and trace["x"] == token_labels(cols)
    assert (
        trace["hovertemplate"]
        .replace("<br>", "\n")
        .splitlines()[-1]
        .startswith(f"{row_word} %{{y}} → {col_word} %{{x}}")
    )
    assert "→" not in json.dumps(trace.get("customdata"), ensure_ascii=False)  # no hover string a cell
    for name in (f"xaxis{axes}", f"yaxis{axes}"):
        assert layout[name]["type"] == "category"  # "3" or a date-like label never makes the axis numeric


def assert_ticks_read_position_and_piece(axis: dict, pieces: list[str]) -> None:
    labels = token_labels(pieces)
    assert 0 < len(axis["ticktext"]) <= AXIS_LABELS
    assert axis["ticktext"] == axis["tickvals"]  # a tick on category `v:piece` reads `v:piece`, as hover does
    assert all(t in labels for t in axis["ticktext"])


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
    assert_every_cell_names_both(fig["data"][0], fig["layout"], PIECES, PIECES, "query", "key")
    for axis in ("xaxis", "yaxis"):
        assert_ticks_read_position_and_piece(fig["layout"][axis], PIECES)


def test_rollout_names_position_and_piece_in_every_cell_at_256_tokens() -> None:
    fig = spec(rollout_heatmap(weights(LONG), PIECES, PIECES))
    assert_every_cell_names_both(fig["data"][0], fig["layout"], PIECES, PIECES, "output", "input")
    assert_ticks_read_position_and_piece(fig["layout"]["xaxis"], PIECES)


def test_two_texts_difference_names_position_and_piece_in_every_cell_at_256_tokens() -> None:
    fig = spec(difference_heatmap(weights(LONG), weights(LONG, 1), (PIECES, PIECES), (PIECES, PIECES), "d"))
    assert_every_cell_names_both(fig["data"][0], fig["layout"], PIECES, PIECES, "query", "key")
    assert_ticks_read_position_and_piece(fig["layout"]["yaxis"], PIECES)


def test_a_head_through_training_names_position_and_piece_in_every_cell_at_256_tokens() -> None:
    fig = spec(head_over_steps([weights(LONG), weights(LONG, 1)], ["step 1", "step 2"], PIECES, PIECES))
    for i, trace in enumerate(fig["data"]):
        assert_every_cell_names_both(trace, fig["layout"], PIECES, PIECES, "query", "key", str(i + 1) if i else "")
        # the second column hides its row labels, never blanks them: a hover's %{y} reads a tick's text
        step = tick_step(len(PIECES), STRIP_ROW_LABELS)  # 19: 14 rows named down a 200 px panel
        assert fig["layout"][f"yaxis{i + 1 if i else ''}"]["ticktext"][1] == token_labels(PIECES)[step]


def test_a_mask_names_position_piece_and_verdict_in_every_cell() -> None:
    n = MAX_CELLS  # the longest mask drawn cell by cell
    causal = np.tril(np.ones((n, n), dtype=bool))
    fig = spec(mask_heatmap(causal, PIECES[:n], PIECES[:n], "m"))
    trace = fig["data"][0]
    assert_every_cell_names_both(trace, fig["layout"], PIECES[:n], PIECES[:n], "query", "key")
    assert trace["customdata"][2][1] == "may attend" and trace["customdata"][1][2] == "masked (−∞)"  # the verdict
    assert trace["hovertemplate"] == "query %{y} → key %{x}: %{customdata}<extra></extra>"


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
    text = json.dumps(fig["data"][0]["x"], ensure_ascii=False) + json.dumps(fig["layout"]["xaxis"], ensure_ascii=False)
    assert not re.search("[ĠĊ]", text)
    assert fig["layout"]["xaxis"]["ticktext"][2:] == ["3:▁rights", "4:↵", "5:▁of"]


def test_the_reading_note_takes_its_example_from_the_figures_own_tokens() -> None:
    note = reading_note(["<s>", "▁Der", "▁Hund", "<0xC8>", "\n"])
    assert note.startswith("Tokens read position:piece, from 1 (2:▁Der)")
    assert "▁ is a space before a word" in note and "↵ is a new line" in note
    assert "<0xC8> is one byte of a character the vocabulary has no piece for" in note
    plain = reading_note(["<s>", "o", "l", "l", "e", "h"])
    assert "(2:o)" in plain and "▁" not in plain and "byte" not in plain and "12:▁cat" not in plain


def test_the_marks_note_explains_only_the_marks_its_tokens_use() -> None:
    assert marks_note(["▁I", "▁you"]) == "▁ is a space before a word."
    assert "<0xC8> is one byte" in marks_note(["<0xC8>", "a"]) and "▁" not in marks_note(["<0xC8>", "a"])
    assert marks_note(["o", "l", ""]) == ""
