"""Every head over a corpus (analysis.corpus, `python -m atlas corpus`, atlas.corpus / atlas.open_corpus): the
corpus's scores are detect_heads' on the same texts, a top context's weight is the one analyze gives there, a run
stopped after some shards and started again ends with the same files as one run, the state stays one size however
many texts, and each bad input is one line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import atlas
from analysis.corpus.reduce import OFFSETS
from analysis.corpus.run import Settings, run_corpus
from analysis.corpus.shard import COLUMNS
from analysis.corpus.store import open_corpus
from analysis.corpus.texts import CorpusError
from analysis.detectors import PATTERNS
from atlas.cli import main
from training.tiny import make_tiny_checkpoint

TEXTS = [
    "freedom election movies garden river freedom election movies garden river",
    "the old man went to the river and the old man sat down",
    "garden",
    "",  # a blank line is no text
    "movies river freedom movies river freedom movies river freedom",
    "she said that the garden was old and the river was cold",
    "election election election",
    "a river, a garden, a man and a river again",
]
READ = [t for t in TEXTS if t.strip()]
SMALL = Settings(batch=3, shard=3, top_k=4, sample=16)  # shards of 3 texts, batches that pad


@pytest.fixture(scope="module")
def induction():
    return atlas.load("induction")


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("texts") / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def made(induction, corpus_file: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("corpus") / "out"
    return atlas.corpus(induction, corpus_file, out, batch=3, shard=3, top_k=4, sample=16, progress=False)


def test_each_heads_scores_equal_detect_heads_on_the_same_texts(induction, made) -> None:
    heads = made.heads.set_index(["layer", "head"])
    for pattern in PATTERNS:
        expected = atlas.detect_heads(induction, READ, pattern).set_index(["layer", "head"])["score"]
        got = heads[pattern.replace(" ", "_")].reindex(expected.index)
        np.testing.assert_allclose(got.to_numpy(), expected.to_numpy(), atol=1e-5)
    assert len(heads) == 2 * 4
    assert heads.loc[2, "induction"].min() > 2 * heads.loc[1, "induction"].max()  # layer 2 holds the copying heads


def test_a_top_contexts_weight_is_the_weight_analyze_gives_there(induction, made) -> None:
    for layer, head in ((1, 1), (2, 3)):
        top = made.top_contexts(layer, head, 3)
        assert len(top) == 3 and list(top["weight"]) == sorted(top["weight"], reverse=True)
        for row in top.itertuples():
            analysis = atlas.analyze(induction, READ[row.text - 1])
            weights = analysis.sublayer("decoder.self_attn", layer - 1).weights[head - 1]  # (T, T), 0-based
            assert weights[row.query - 1, row.key - 1] == pytest.approx(row.weight, abs=1e-5)
            # the query's strongest key after the first: the first token is where heads park (the sink)
            assert weights[row.query - 1, 1:].max() == pytest.approx(row.weight, abs=1e-5)
            assert row.key > 1 and row.query > 1  # the first query has only the first key: no context
            assert "[" in row.snippet and "«" in row.snippet


def test_offsets_hold_each_querys_whole_attention_and_the_sample_its_bound(made) -> None:
    offsets = made.offsets
    assert set(offsets["offset"]) == set(range(-OFFSETS, OFFSETS + 1))
    totals = offsets.groupby(["layer", "head"])["weight"].sum()
    np.testing.assert_allclose(totals.to_numpy(), 1.0, atol=1e-6)
    assert offsets.loc[offsets["offset"] < 0, "weight"].max() == 0  # a language model never looks ahead
    sample = made.sample(2, 1)
    assert len(sample) == 16 and len(sample["query_vector"][0]) == 16  # induction: d_model 64 over 4 heads
    assert sample[["text", "position"]].drop_duplicates().shape[0] == 16


def test_sql_runs_over_the_shards(made) -> None:
    count = made.sql("SELECT count(*) AS n FROM texts WHERE skipped IS NULL")["n"][0]
    assert count == len(READ)
    best = made.sql("SELECT layer, head FROM heads ORDER BY induction DESC LIMIT 1")
    top = made.heads.sort_values("induction", ascending=False).iloc[0]
    assert (best["layer"][0], best["head"][0]) == (top["layer"], top["head"])
    per_text = made.sql("SELECT avg(induction) AS m FROM text_heads WHERE layer = 2 AND head = 1")["m"][0]
    assert per_text == pytest.approx(made.heads.set_index(["layer", "head"]).loc[(2, 1), "induction"])
    with pytest.raises(ValueError, match="the query failed"):
        made.sql("SELECT nothing FROM nowhere")
    with pytest.raises(ValueError, match="layer is 1 to 2 in this corpus, not 3"):
        made.top_contexts(3, 1)


def _tables(out: Path) -> dict[str, pd.DataFrame]:
    files = sorted(out.glob("*.parquet")) + sorted((out / "shards").glob("*.parquet"))
    return {f.name: pd.read_parquet(f) for f in files}


def test_a_run_stopped_after_some_shards_ends_as_one_run(induction, corpus_file: Path, tmp_path: Path) -> None:
    whole = run_corpus(induction, corpus_file, tmp_path / "whole", SMALL, progress=False)
    parts = tmp_path / "parts"
    run_corpus(induction, corpus_file, parts, SMALL, progress=False, max_shards=1)
    with pytest.raises(CorpusError, match="stopped after 3 of 7 texts: run the same command again"):
        open_corpus(parts)
    assert not (parts / "heads.parquet").exists()
    run_corpus(induction, corpus_file, parts, SMALL, progress=False, max_shards=1)
    run_corpus(induction, corpus_file, parts, SMALL, progress=False)
    expected, got = _tables(whole), _tables(parts)
    assert list(got) == list(expected) and len(expected) == 4 + 2 * 3  # the final tables and three shards' two
    for name, frame in expected.items():
        pd.testing.assert_frame_equal(got[name], frame, check_exact=True)
    assert json.loads((parts / "manifest.json").read_text()) == json.loads((whole / "manifest.json").read_text())
    assert sorted(p.name for p in (parts / "state").iterdir()) == ["after-00003.json", "after-00003.safetensors"]


def test_a_run_stopped_in_its_first_shard_starts_again_and_keeps_others_files(
    induction, corpus_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "o"
    (out / "shards").mkdir(parents=True)
    (out / "state").mkdir()
    (out / "shards" / "texts-00000.parquet").write_bytes(b"half")  # what a kill before the manifest leaves
    (out / "state" / ".atlas-0123abcd.tmp").write_bytes(b"half")
    assert run_corpus(induction, corpus_file, out, SMALL, progress=False) == out
    assert open_corpus(out).manifest["complete"]
    mine = tmp_path / "mine"
    (mine / "state").mkdir(parents=True)
    (mine / "state" / "notes.txt").write_text("keep me\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="holds files but no corpus"):
        run_corpus(induction, corpus_file, mine, SMALL, progress=False)
    assert (mine / "state" / "notes.txt").read_text(encoding="utf-8") == "keep me\n"


def test_the_saved_state_is_one_size_however_many_texts(induction, tmp_path: Path) -> None:
    few, many = tmp_path / "few.txt", tmp_path / "many.txt"
    few.write_text("\n".join(READ[:3]) + "\n", encoding="utf-8")
    many.write_text("\n".join(READ * 4) + "\n", encoding="utf-8")
    sizes = []
    for texts in (few, many):
        out = run_corpus(induction, texts, tmp_path / texts.stem, SMALL, progress=False)
        sizes.append(sum(p.stat().st_size for p in (out / "state").glob("*.safetensors")))
    assert sizes[0] == sizes[1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny-lm", "decoder-only", seed=0)


def _one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    return err


def test_an_empty_file_is_one_line(tiny: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf-8")
    err = _one_line_error(capsys, ["corpus", str(tiny), str(tmp_path / "empty.txt"), "--out", str(tmp_path / "o")])
    assert "holds no texts" in err


def test_a_binary_file_is_one_line(tiny: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "b.txt").write_bytes(bytes(range(256)) * 8)
    err = _one_line_error(capsys, ["corpus", str(tiny), str(tmp_path / "b.txt"), "--out", str(tmp_path / "o")])
    assert "binary" in err


def test_a_megabyte_line_is_one_line(tiny: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "long.txt").write_text("a fine text\n" + "word " * 200_000 + "\n", encoding="utf-8")
    err = _one_line_error(capsys, ["corpus", str(tiny), str(tmp_path / "long.txt"), "--out", str(tmp_path / "o")])
    assert "long.txt:2: a line over 100,000 bytes" in err


def test_a_folder_with_no_texts_is_one_line(tiny: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "notes.md").write_text("not a corpus file\n", encoding="utf-8")
    err = _one_line_error(capsys, ["corpus", str(tiny), str(tmp_path / "in"), "--out", str(tmp_path / "o")])
    assert "the folder holds no texts" in err


def test_a_model_that_does_not_load_is_one_line(tmp_path: Path, capsys, corpus_file: Path) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json", encoding="utf-8")
    _one_line_error(capsys, ["corpus", str(tmp_path / "broken"), str(corpus_file), "--out", str(tmp_path / "o")])


def test_an_out_folder_holding_another_corpus_is_one_line(tiny: Path, corpus_file: Path, tmp_path: Path, capsys):
    out = tmp_path / "o"
    assert main(["corpus", str(tiny), str(corpus_file), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    err = _one_line_error(capsys, ["corpus", str(tiny), str(corpus_file), "--out", str(out), "--top-k", "3"])
    assert "holds another corpus" in err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep me\n", encoding="utf-8")
    err = _one_line_error(capsys, ["corpus", str(tiny), str(corpus_file), "--out", str(tmp_path / "full")])
    assert "holds files but no corpus" in err


def test_jsonl_parquet_and_a_folder_of_them_read_as_the_text_file(tiny: Path, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in READ[:3]), encoding="utf-8")
    pq.write_table(pa.table({"text": READ[3:], "id": list(range(len(READ) - 3))}), folder / "b.parquet")
    (tmp_path / "all.txt").write_text("\n".join(READ) + "\n", encoding="utf-8")
    settings = Settings(batch=2, shard=4, top_k=2, sample=8)
    one = open_corpus(run_corpus(atlas.load(tiny), tmp_path / "all.txt", tmp_path / "one", settings, progress=False))
    two = open_corpus(run_corpus(atlas.load(tiny), folder, tmp_path / "two", settings, progress=False))
    pd.testing.assert_frame_equal(one.heads, two.heads)
    assert list(two.sql("SELECT source FROM texts ORDER BY text")["source"])[2:4] == ["a.jsonl:3", "b.parquet:1"]
    assert list(one.heads.columns) == ["attention", "layer", "head", *COLUMNS]


def test_a_text_the_model_cannot_read_is_skipped_by_name_and_keeps_its_number(tiny: Path, tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text(f"{READ[0]}\n\x07\x07\n{READ[1]}\n", encoding="utf-8")
    ckpt = atlas.load(tiny)
    made = open_corpus(run_corpus(ckpt, tmp_path / "t.txt", tmp_path / "o", SMALL, progress=False))
    texts = made.sql("SELECT text, source, skipped FROM texts ORDER BY text")
    assert list(texts["text"]) == [1, 2, 3] and texts["skipped"].isna().tolist() == [True, False, True]
    assert "The text is empty" in texts["skipped"][1] and texts["source"][1] == "t.txt:2"
    assert set(made.sql("SELECT DISTINCT text FROM text_heads")["text"]) == {1, 3}
    expected = atlas.detect_heads(ckpt, READ[:2], "previous token").set_index(["layer", "head"])["score"]
    got = made.heads.set_index(["layer", "head"])["previous_token"].reindex(expected.index)
    np.testing.assert_allclose(got.to_numpy(), expected.to_numpy(), atol=1e-5)


def test_an_encoder_looks_both_ways_and_scores_as_detect_heads(tmp_path: Path, corpus_file: Path) -> None:
    ckpt = atlas.load(
        make_tiny_checkpoint(tmp_path / "tiny-encoder", "encoder-only", seed=0, n_encoder_layers=2, n_decoder_layers=0)
    )
    made = open_corpus(run_corpus(ckpt, corpus_file, tmp_path / "o", SMALL, progress=False))
    assert set(made.heads["attention"]) == {"encoder.self_attn"}
    assert made.offsets.loc[made.offsets["offset"] < 0, "weight"].sum() > 0
    for pattern in PATTERNS:
        expected = atlas.detect_heads(ckpt, READ, pattern).set_index(["layer", "head"])["score"]
        got = made.heads.set_index(["layer", "head"])[pattern.replace(" ", "_")].reindex(expected.index)
        np.testing.assert_allclose(got.to_numpy(), expected.to_numpy(), atol=1e-5)


def test_an_encoder_decoder_is_one_line(tmp_path: Path, corpus_file: Path, capsys) -> None:
    translator = make_tiny_checkpoint(tmp_path / "tiny-translator", "encoder-decoder", seed=0)
    err = _one_line_error(capsys, ["corpus", str(translator), str(corpus_file), "--out", str(tmp_path / "o")])
    assert "is an encoder-decoder" in err


def test_the_command_shows_its_progress_in_texts_and_says_where_it_wrote(
    tiny: Path, corpus_file: Path, tmp_path: Path, capsys
) -> None:
    assert main(["corpus", str(tiny), str(corpus_file), "--out", str(tmp_path / "o"), "--shard", "4"]) == 0
    captured = capsys.readouterr()
    assert "7/7" in captured.err and ("text/s" in captured.err or "s/text" in captured.err)  # tqdm: its rate
    assert captured.out == f"corpus written to {tmp_path / 'o'}\n"


def test_a_shard_of_unreadable_texts_passes_and_a_corpus_of_them_is_one_line(tiny: Path, tmp_path: Path, capsys):
    (tmp_path / "t.txt").write_text(f"\x07\n\x07\n{READ[0]}\n{READ[1]}\n", encoding="utf-8")
    ckpt = atlas.load(tiny)
    made = open_corpus(run_corpus(ckpt, tmp_path / "t.txt", tmp_path / "o", Settings(shard=2), progress=False))
    expected = atlas.detect_heads(ckpt, READ[:2], "first token").set_index(["layer", "head"])["score"]
    got = made.heads.set_index(["layer", "head"])["first_token"].reindex(expected.index)
    np.testing.assert_allclose(got.to_numpy(), expected.to_numpy(), atol=1e-5)
    (tmp_path / "none.txt").write_text("\x07\n\x07\n", encoding="utf-8")
    err = _one_line_error(capsys, ["corpus", str(tiny), str(tmp_path / "none.txt"), "--out", str(tmp_path / "n"), "-q"])
    assert "could read none of its texts" in err


def test_a_killed_command_started_again_ends_as_one_run(induction, tmp_path: Path) -> None:
    texts = tmp_path / "many.txt"
    texts.write_text("\n".join(READ * 30) + "\n", encoding="utf-8")  # 210 texts: 70 shards of 3
    argv = ["corpus", "induction", str(texts), "--batch", "3", "--shard", "3", "--top-k", "4", "--sample", "16", "-q"]
    whole = run_corpus(induction, texts, tmp_path / "whole", SMALL, progress=False)
    out = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "atlas", *argv, "--out", str(out)]
    process = subprocess.Popen(command, cwd=Path(__file__).resolve().parents[1], env=env)
    try:
        while not (out / "manifest.json").exists() and process.poll() is None:  # until the first shard is done
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=0.05)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    manifest = json.loads((out / "manifest.json").read_text())
    assert not manifest["complete"] and 1 <= len(manifest["shards"]) < 70
    assert main([*argv, "--out", str(out)]) == 0
    expected, got = _tables(whole), _tables(out)
    assert list(got) == list(expected)
    for name, frame in expected.items():
        pd.testing.assert_frame_equal(got[name], frame, check_exact=True)


def test_a_snippet_reads_as_words_whatever_the_tokenizer_marks() -> None:
    from analysis.corpus.reduce import snippet

    assert snippet(["<s>", "▁the", "▁ca", "t", "▁sat"], query=3, key=1) == "<s> «the» ca[t] sat"
    assert snippet(["<|endoftext|>", "Ġthe", "Ġcat"], query=2, key=0) == "«<|endoftext|>» the [cat]"
    assert snippet(["[CLS]", "the", "ca", "##t", "[SEP]"], query=3, key=4) == "[CLS] the ca[t] «[SEP]»"
    pieces = [f"▁w{i}" for i in range(30)]
    assert snippet(pieces, query=25, key=2) == "w0 w1 «w2» w3 w4 w5 w6 … w21 w22 w23 w24 [w25] w26 w27 w28 w29"


def test_heads_that_attend_alike_cluster_together_in_leaf_order() -> None:
    from analysis.corpus.maps import cluster_heads

    previous = [[0.9, 0.0], [0.8, 0.1], [0.85, 0.05]]  # three heads on the previous token
    first = [[0.0, 0.9], [0.1, 0.95]]  # two on the first
    features = np.array([previous[0], first[0], previous[1], first[1], previous[2]])
    order, cluster = cluster_heads(features)
    assert sorted(order) == [0, 1, 2, 3, 4]
    assert cluster == [1, 2, 1, 2, 1] if order[0] in (0, 2, 4) else cluster == [2, 1, 2, 1, 2]
    assert {order.index(i) for i in (0, 2, 4)} in ({0, 1, 2}, {2, 3, 4})  # a cluster's heads side by side
    assert cluster_heads(features, most=1 + 1) == (order, cluster)
    assert cluster_heads(features[:2]) == ([0, 1], [1, 2])
