"""`python -m atlas corpus … --ray`: the shards reduced on Ray Data's workers (analysis.corpus.cluster) give the
local run's files, and Ray missing or a cluster that does not answer is one line. One Ray for the module: it
takes seconds to start."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_corpus import READ, _one_line_error, _tables

from analysis.corpus.run import Settings, run_corpus
from analysis.corpus.store import open_corpus
from atlas.cli import main
from training.tiny import make_tiny_checkpoint

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = Settings(batch=4, shard=8, top_k=5, sample=16)  # 42 texts: six shards, the last one short
PATTERN = """
import numpy as np


def two_back(pieces):
    n = len(pieces)
    pattern = np.zeros((n, n))
    pattern[np.arange(2, n), np.arange(n - 2)] = 1
    return pattern
"""


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("texts") / "texts.txt"
    path.write_text("".join(f"{READ[i % len(READ)]} {i}\n" for i in range(42)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny-lm", "decoder-only", seed=0)


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    env = {"env_vars": {"PYTHONPATH": str(ROOT)}}
    # log_to_driver off as the command has it: else the cluster's own log lines reach a later test's stderr
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING", runtime_env=env)
    yield ray
    ray.shutdown()


@pytest.mark.slow  # a Ray start and two workers loading torch: 30 to 60 s on a shared 2-core machine
def test_the_command_on_a_local_ray_writes_the_local_runs_files(local_ray, texts: Path, tmp_path: Path, capsys):
    import atlas

    code = tmp_path / "patterns.py"  # a custom pattern: each worker loads it again from its file
    code.write_text(PATTERN, encoding="utf-8")
    pattern = f"two_back={code}:two_back"
    local = run_corpus(atlas.load("induction"), texts, tmp_path / "local", SETTINGS, progress=False, patterns=[pattern])
    argv = ["corpus", "induction", str(texts), "--out", str(tmp_path / "ray"), "--batch", "4", "--shard", "8"]
    assert main([*argv, "--top-k", "5", "--sample", "16", "--ray", "--workers", "2", "-q", "--pattern", pattern]) == 0
    assert capsys.readouterr().out == f"corpus written to {tmp_path / 'ray'}\n"
    expected, got = _tables(local), _tables(tmp_path / "ray")
    assert list(got) == list(expected) and len(expected) == 4 + 2 * 6
    for name, frame in expected.items():
        pd.testing.assert_frame_equal(got[name], frame, check_exact=False, atol=1e-6, rtol=0)
    one, two = open_corpus(local), open_corpus(tmp_path / "ray")
    for layer, head in ((1, 1), (2, 3)):
        pd.testing.assert_frame_equal(two.top_contexts(layer, head), one.top_contexts(layer, head), atol=1e-6)
    np.testing.assert_allclose(two.heads["induction"], one.heads["induction"], atol=1e-6)
    np.testing.assert_allclose(two.heads["two_back"], one.heads["two_back"], atol=1e-6)
    assert one.heads["two_back"].max() > 0.01
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert manifest == json.loads((local / "manifest.json").read_text())  # so either can resume the other


def test_ray_missing_is_one_line(texts: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where it is not installed
    err = _one_line_error(capsys, ["corpus", "induction", str(texts), "--out", str(tmp_path / "o"), "--ray", "-q"])
    assert "--ray needs Ray Data: pip install 'ray[data]==2.60.0'" in err


def test_a_cluster_that_does_not_answer_is_one_line(texts: Path, tmp_path: Path, capsys) -> None:
    pytest.importorskip("ray")
    with socket.socket() as probe:  # a port nothing listens on: bound, then let go
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = ["corpus", "induction", str(texts), "--out", str(tmp_path / "o"), "-q", "--ray", f"127.0.0.1:{port}"]
    err = _one_line_error(capsys, argv)
    assert f"nothing answers at 127.0.0.1:{port}" in err
    err = _one_line_error(capsys, ["corpus", "induction", str(texts), "--out", str(tmp_path / "o"), "--workers", "2"])
    assert "--workers is a whole number from 1, with --ray" in err


def test_each_bad_input_is_its_own_line_with_ray_too_before_ray_is_asked_for(
    tiny: Path, texts: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf-8")
    (tmp_path / "b.txt").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "long.txt").write_text("a fine text\n" + "word " * 200_000 + "\n", encoding="utf-8")
    (tmp_path / "none").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json", encoding="utf-8")
    other = tmp_path / "other"
    assert main(["corpus", str(tiny), str(texts), "--out", str(other), "-q", "--shard", "64"]) == 0
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "ray", None)  # had Ray been asked for, the line would say it is missing
    for model, corpus, out, says in (
        (tiny, tmp_path / "empty.txt", tmp_path / "o", "holds no texts"),
        (tiny, tmp_path / "b.txt", tmp_path / "o", "binary"),
        (tiny, tmp_path / "long.txt", tmp_path / "o", "long.txt:2: a line over 100,000 bytes"),
        (tiny, tmp_path / "none", tmp_path / "o", "the folder holds no texts"),
        (tmp_path / "broken", texts, tmp_path / "o", "config.json: not valid JSON"),
        (tiny, texts, other, "holds another corpus"),
    ):
        err = _one_line_error(capsys, ["corpus", str(model), str(corpus), "--out", str(out), "--ray", "-q"])
        assert says in err, err


def test_the_library_call_takes_ray_and_workers_as_the_command_does(texts: Path, tmp_path: Path) -> None:
    """`atlas.corpus(..., ray=, workers=)` reaches the same run as `--ray --workers`: its checks answer alike."""
    import atlas
    from analysis.corpus.texts import CorpusError

    with pytest.raises(CorpusError, match="--workers is a whole number from 1, with --ray"):
        atlas.corpus("induction", texts, tmp_path / "o", workers=2, progress=False)
    with pytest.raises(CorpusError, match="--workers is a whole number from 1, with --ray"):
        atlas.corpus("induction", texts, tmp_path / "o", ray="", workers=0, progress=False)
