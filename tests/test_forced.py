"""Forced decoding: each token of a reference scored by the model's own probabilities, on tiny checkpoints."""

from __future__ import annotations

import pytest
import torch

from analysis.analyze import analyze
from analysis.forced import forced, score
from inference.checkpoint import load_checkpoint
from inference.text import InputError, clean_text, encode_prefix, encode_source
from model.forward import forward
from viz.forced import forced_frame, percent, probability_strip


@pytest.fixture(scope="module")
def translator(tiny_checkpoints):
    return load_checkpoint(tiny_checkpoints["encoder-decoder"])


@pytest.fixture(scope="module")
def language_model(tiny_checkpoints):
    return load_checkpoint(tiny_checkpoints["decoder-only"])


def test_each_reference_token_gets_the_softmax_of_a_plain_forward_pass(translator):
    text, reference = "the cat sat on the mat", "die katze sass auf der matte"
    rows = forced(translator, text, reference).rows
    source = torch.tensor([encode_source(translator, text, [])])
    target = [translator.config.bos_id, *translator.tokenizer.encode(reference), translator.config.eos_id]
    logits, _ = forward(translator.model, torch.tensor([target[:-1]]), source)
    probs = torch.softmax(logits[0].float(), dim=-1)
    assert [r.token for r in rows] == target[1:]  # every reference token, then the end of text
    for row in rows:
        expected = probs[row.position - 1]
        assert row.probability == pytest.approx(float(expected[row.token]), abs=1e-6)
        assert row.rank == 1 + int((expected > expected[row.token]).sum())
        assert row.top_token == int(expected.argmax())
        assert row.top_probability == pytest.approx(float(expected.max()), abs=1e-6)


def test_a_continuation_is_scored_after_the_text(language_model):
    text, continuation = "the cat sat", "on the mat"
    rows = forced(language_model, text, continuation).rows
    ids = encode_prefix(language_model, text, []) + language_model.tokenizer.encode(continuation)
    logits, _ = forward(language_model.model, torch.tensor([ids]))
    probs = torch.softmax(logits[0].float(), dim=-1)
    assert [r.token for r in rows] == ids[len(ids) - len(rows) :]
    assert len(rows) == len(language_model.tokenizer.encode(continuation))
    for row in rows:
        assert row.probability == pytest.approx(float(probs[row.position - 1, row.token]), abs=1e-6)


@pytest.mark.parametrize("which", ["translator", "language_model"])
def test_the_greedy_output_fed_back_ranks_first_everywhere(which, request):
    ckpt = request.getfixturevalue(which)
    text = "the cat sat on the mat"
    if ckpt.config.has_cross_attention:
        target = analyze(ckpt, text, max_tokens=12).target_ids  # the greedy output: bos, its tokens
        source = encode_source(ckpt, clean_text(text).text, [])
        rows = score(ckpt, target, source)
    else:
        target = analyze(ckpt, text, continuation=8).target_ids  # greedy: no sampling given
        rows = score(ckpt, target, None, len(target) - 8)
    assert rows and all(r.rank == 1 and r.top_token == r.token for r in rows)


@pytest.mark.parametrize(
    ("reference", "said"),
    [("   ", "is empty"), ("katze " * 200, "Shorten it")],
)
@pytest.mark.parametrize("which", ["translator", "language_model"])
def test_a_bad_reference_is_refused_with_a_reason(which, reference, said, request):
    with pytest.raises(InputError, match=said):
        forced(request.getfixturevalue(which), "the cat sat", reference)


def test_characters_outside_the_vocabulary_are_named(translator):
    found = forced(translator, "the cat", "die katze 猫")
    assert any("猫" in note for note in found.notes)


def test_the_table_reads_each_token_from_1_with_its_percentage_and_the_models_choice(translator):
    rows = forced(translator, "the cat sat", "die katze").rows
    table = forced_frame(rows)
    assert list(table["token #"]) == list(range(1, len(rows) + 1))
    assert list(table["rank"]) == [r.rank for r in rows]
    assert list(table["as %"]) == [percent(r.probability) for r in rows]
    assert table["token"].iloc[-1] == "</s>"  # the end of text is scored too
    assert [percent(p) for p in (0.031, 0.42, 1.0, 0.004, 0.00002)] == ["3 %", "42 %", "100 %", "0.4 %", "<0.1 %"]


def test_the_strip_shades_each_token_and_writes_its_percentage(translator):
    rows = forced(translator, "the cat sat", "die katze sass auf der matte").rows
    fig = probability_strip(rows, "How sure the model was", per_line=4)
    heatmap = fig.data[0]
    cells = [(y, x) for y in range(len(heatmap.z)) for x in range(4) if heatmap.z[y][x] is not None]
    assert len(cells) == len(rows) and len(heatmap.z) == -(-len(rows) // 4)
    for (y, x), row in zip(cells, rows):
        assert heatmap.z[y][x] == row.probability
        assert heatmap.text[y][x].endswith(percent(row.probability))  # not colour alone: the number is written
    assert "&lt;/s&gt;" in heatmap.text[cells[-1][0]][cells[-1][1]]  # a piece is escaped, never read as a tag
    assert (heatmap.zmin, heatmap.zmax) == (0.0, 1.0)


def test_the_notebook_api_gives_the_pages_table(translator):
    import atlas

    table = atlas.forced(translator, "the cat sat", "die katze")
    assert table.equals(forced_frame(forced(translator, "the cat sat", "die katze").rows))
    with pytest.raises(InputError, match="is empty"):
        atlas.forced(translator, "the cat sat", "")


@pytest.fixture(scope="module")
def byte_level_lm(tmp_path_factory):
    """A tiny random GPT-2 saved with a byte-level BPE tokenizer.json (a space is part of the word after it: `Ġthe`),
    loaded as a checkpoint, beside the transformers model that holds the same weights."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("Ġ", "m"), ("a", "t"), ("Ġm", "at")]
    tokens = sorted(pre_tokenizers.ByteLevel.alphabet()) + ["".join(pair) for pair in merges] + ["<|endoftext|>"]
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    torch.manual_seed(0)
    end = len(tokens) - 1
    config = transformers.GPT2Config(
        vocab_size=len(tokens), n_positions=40, n_embd=32, n_layer=2, n_head=4, bos_token_id=end, eos_token_id=end
    )
    hf = transformers.GPT2LMHeadModel(config).eval()
    folder = tmp_path_factory.mktemp("gpt2-bytes")
    hf.save_pretrained(folder, safe_serialization=True)
    tok.save(str(folder / "tokenizer.json"))
    return load_checkpoint(folder), hf, tok


def test_a_byte_level_continuation_keeps_the_space_before_its_first_word(byte_level_lm):
    ckpt, hf, tok = byte_level_lm
    text, continuation = "the cat sat on", "the mat"
    rows = forced(ckpt, text, continuation).rows
    whole = tok.encode(f"{text} {continuation}").ids  # how the model reads the text run on: " the mat"
    expected = whole[len(tok.encode(text).ids) :]
    assert tok.encode(" the").ids[0] == expected[0] != tok.encode("the").ids[0]
    assert [r.token for r in rows] == expected
    ids = torch.tensor([[ckpt.config.bos_id, *whole]])
    with torch.no_grad():
        probs = torch.softmax(hf(ids).logits[0].float(), dim=-1)
    for row in rows:
        assert row.probability == pytest.approx(float(probs[row.position - 1, row.token]), abs=1e-5)
