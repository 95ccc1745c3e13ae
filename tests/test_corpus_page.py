"""The Corpus page on the shipped induction profile (corpora/induction-brown): it opens on the profile's strongest
induction head, its top contexts link to Explore at that text, head and query, and each bad URL value falls back."""

from __future__ import annotations

import sys
from urllib.parse import parse_qs, urlparse

from test_app import chart, ok

from analysis.corpus.store import open_corpus
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
