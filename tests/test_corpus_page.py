"""The Corpus page on the shipped induction profile (corpora/induction-brown): it opens on the profile's strongest
induction head, its top contexts link to Explore at that text, head and query, and each bad URL value falls back."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from test_app import chart, ok
from test_corpus import TEXTS
from test_corpus_patterns import two_back

from analysis.corpus.store import CORPORA_VAR, open_corpus
from ui import state
from views.corpus import PROFILES


def page(app, **query: str):
    at = app(**query)
    return ok(at.switch_page("views/corpus.py").run())


def test_the_page_opens_on_the_induction_profiles_strongest_induction_head(app) -> None:
    at = page(app)
    heads = open_corpus(PROFILES / "induction-brown" / "profile").heads
    best = heads.loc[heads["induction"].idxmax()]
    fig = chart(at, "corpus_map")
    rect = fig["layout"]["shapes"][0]
    assert (rect["y0"] + 0.5, rect["x0"] + 0.5) == (best["layer"], best["head"])
    assert {"corpus_distribution", "corpus_vectors"} <= {el.key for el in at.get("plotly_chart")}


def test_a_top_context_links_to_explore_at_its_text_and_query(app) -> None:
    at = page(app)
    corpus = open_corpus(PROFILES / "induction-brown" / "profile")
    top = at.dataframe[0].value
    link = parse_qs(urlparse(top["Explore"].iloc[0]).query)
    assert link["model"] == ["induction"] and link["point"] == [str(top["query"].iloc[0])]
    texts = corpus.sql(f"SELECT content FROM texts WHERE text = {int(top['text'].iloc[0])}")
    assert state.unpack_text(link["text"][0]) == texts["content"].iloc[0]


def test_bad_url_values_fall_back_to_the_defaults(app) -> None:
    at = page(app, corpus="nonesuch", corpus_score="<b>", corpus_L="99", corpus_H="x")
    assert not at.error and at.selectbox[0].value == "induction-brown"


def test_heads_cluster_by_their_profiles_and_the_page_says_its_map_is_pca(app, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "umap", None)  # as where umap-learn is not installed
    at = page(app)
    rows = chart(at, "corpus_clusters")["data"][0]["y"]
    assert len(rows) == 8 and {r.split(" · ")[1] for r in rows[:4]} == {"c1"}  # induction: layer 1, then layer 2
    assert [r.split(" ")[0] for r in rows] == ["L1"] * 4 + ["L2"] * 4
    assert "(PCA)" in chart(at, "corpus_cluster_map")["layout"]["title"]["text"]
    assert any("by PCA (UMAP when umap-learn is installed)" in c.value for c in at.caption)


def test_the_cluster_map_names_heads_where_there_is_room_and_heads_at_one_place_together() -> None:
    import numpy as np

    from viz.corpus import LABEL_HEIGHT, LABEL_WIDTH, cluster_map, head_labels

    points = np.array([[0.0, 0.0], [0.001, 0.001], [1.0, 1.0], [0.5, 0.5], [0.56, 0.5], [0.0, 1.0]])
    heads = [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 1)]
    cluster = [1, 1, 2, 2, 2, 1]
    labels = head_labels(points, heads, cluster)
    assert sorted(filter(None, labels)) == ["L1 H1, H2", "L2 H1", "L2 H3", "L3 H1"]  # L2 H2 would cover L2 H3
    kept = [(points[i], len(n)) for i, n in enumerate(labels) if n]
    for a, (p, n) in enumerate(kept):
        for q, m in kept[a + 1 :]:
            apart_x = abs(p[0] - q[0]) >= LABEL_WIDTH * (n + m) / 10
            assert apart_x or abs(p[1] - q[1]) >= LABEL_HEIGHT
    fig = cluster_map(points, heads, cluster, "PCA")
    assert sorted(sum((list(t.customdata) for t in fig.data), [])) == sorted(f"L{la} H{h}" for la, h in heads)


def test_the_shipped_induction_texts_hold_no_word_the_model_cannot_read() -> None:
    """corpora/make.py keeps the sentences the induction model's vocabulary reads whole: its top contexts show
    words, never a row of <unk>s, and the profile was made from those texts."""
    from inference.checkpoint import load_checkpoint

    ckpt = load_checkpoint(PROFILES.parent / "checkpoints" / "induction")
    lines = (PROFILES / "induction-brown" / "texts.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 500
    assert not [line for line in lines if ckpt.config.unk_id in ckpt.tokenizer.encode(line)]
    contexts = open_corpus(PROFILES / "induction-brown" / "profile").top_contexts(2, 1, 20)
    assert not contexts["snippet"].str.contains("<unk>").any()


@pytest.fixture(scope="module")
def own_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A researcher's corpus with a custom pattern: `python -m atlas corpus … --out DIR --pattern …`."""
    import atlas

    root = tmp_path_factory.mktemp("mine")
    (root / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    atlas.corpus(
        "induction", root / "texts.txt", root / "corpora" / "my-texts", shard=4, top_k=3, sample=8, progress=False,
        patterns={"two_back": two_back},
    )  # fmt: skip
    return root / "corpora"


def test_a_researchers_own_corpus_shows_beside_the_shipped_ones_with_its_custom_score(
    app, own_corpus: Path, monkeypatch
) -> None:
    monkeypatch.setenv(CORPORA_VAR, str(own_corpus))  # as `python -m atlas app --corpus DIR` sets it
    at = page(app)
    assert at.selectbox[0].value == "induction-brown" and "my-texts" in at.selectbox[0].options
    at = ok(at.selectbox[0].select("my-texts").run())
    assert "two back" in at.selectbox[1].options  # listed from the profile's manifest, after the built-in scores
    at = ok(at.selectbox[1].select("two_back").run())
    heads = open_corpus(own_corpus / "my-texts").heads
    grid = chart(at, "corpus_map")["data"][0]["z"]
    assert grid[1][0] == pytest.approx(heads.set_index(["layer", "head"]).loc[(2, 1), "two_back"])
    assert "two back" in chart(at, "corpus_distribution")["layout"]["xaxis"]["title"]["text"]


def test_atlas_app_refuses_a_corpus_folder_it_cannot_show_in_one_line(
    own_corpus: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    from ui import serve

    monkeypatch.delenv(CORPORA_VAR, raising=False)  # what a folder it takes sets, undone after the test
    (tmp_path / "empty").mkdir()
    for folder, said in ((tmp_path / "none", "no such folder"), (tmp_path / "empty", "holds no corpus")):
        assert serve.main(["--corpus", str(folder)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"atlas app: --corpus {folder}: {said}") and "\n" not in err
    assert serve.corpus_problem([str(own_corpus)]) is None  # a folder of corpora, or one corpus
    assert serve.corpus_problem([str(own_corpus / "my-texts")]) is None
    assert os.environ[CORPORA_VAR].split(os.pathsep) == [str(own_corpus / "my-texts"), str(own_corpus)]
