"""Corpus: every head over a corpus profile (`python -m atlas corpus`): the layer × head map by any score, one head's
scores over the texts, its top contexts (each a link to Explore at that text and query), its queries and keys on a
map, and the sampled contexts nearest one by that head's query."""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np
import streamlit as st

from analysis.corpus.maps import head_clusters, nearest, pca_2d
from analysis.corpus.store import SHIPPED, Corpus, open_corpus, profile_folders
from analysis.corpus.texts import CorpusError
from ui import errors, state
from ui.markdown import literal
from ui.says import figure_says
from ui.widgets import data_table, projector, show_chart
from viz.corpus import cluster_heatmap, cluster_map, distribution, head_map, vector_map
from viz.labels import safe_filename

PROFILES = SHIPPED  # each shipped profile: corpora/NAME/profile, its texts and README beside it
DEFAULT = "induction-brown"
PROFILE = state.url_key("corpus")
SCORE = state.url_key("corpus_score")
C_LAYER = state.url_index("corpus_layer", "corpus_L")
C_HEAD = state.url_index("corpus_head", "corpus_H")
C_POINT = state.url_index("corpus_point", "corpus_point")  # the sampled position whose neighbours are listed
NEIGHBOURS = 10


def explore_link(model: str, attention: str, layer: int, head: int, text: str, query: int) -> str:
    """Explore's address at this text, head and query token (all from 1, the start token 1), in projector mode when
    this page is."""
    values = {"model": model, "text": state.pack_text(text), "attention": attention}
    values |= {"L": layer, "H": head, "point": query} | ({"projector": 1} if projector() else {})
    return "./?" + urlencode(values)


def body() -> None:
    st.title("Corpus")
    folders = profile_folders()
    names = list(folders)
    if not names:
        st.error(
            f"No corpus profile in {literal(str(PROFILES))}: make one with "
            "`python -m atlas corpus MODEL TEXTS --out DIR` and show it with `python -m atlas app --corpus DIR`."
        )
        return
    state.keep_valid(PROFILE, names, DEFAULT if DEFAULT in names else names[0])
    figure = st.container()
    left, mid, at_layer, at_head = st.columns([3, 3, 2, 2])  # layer beside head: the head's figures come sooner
    name = left.selectbox("Profile", names, key=PROFILE)
    try:
        corpus = open_corpus(folders[name])
    except CorpusError as exc:
        st.error(literal(str(exc)))
        return
    heads = corpus.heads
    scores = list(corpus.manifest["scores"])  # the built-in scores, then the run's custom patterns
    state.keep_valid(SCORE, scores, "induction")
    score = mid.selectbox("Colour each head by", scores, key=SCORE, format_func=lambda c: literal(c.replace("_", " ")))
    layers, n_heads = int(heads["layer"].max()), int(heads["head"].max())
    best = heads.loc[heads["induction"].idxmax()]
    state.keep_valid(C_LAYER, list(range(layers)), int(best["layer"]) - 1, owner=name)
    state.keep_valid(C_HEAD, list(range(n_heads)), int(best["head"]) - 1, owner=name)
    one = lambda i: str(i + 1)
    layer = at_layer.selectbox("Layer", list(range(layers)), key=C_LAYER, format_func=one) + 1
    head = at_head.selectbox("Head", list(range(n_heads)), key=C_HEAD, format_func=one) + 1
    grid = heads.pivot(index="layer", columns="head", values=score).to_numpy()
    label = score.replace("_", " ")
    show_chart(head_map(grid, label, (layer, head)), "corpus_map", safe_filename("corpus", name, score), where=figure)
    model = corpus.manifest["identity"]["model"]["name"]
    figure_says(
        f"Each square is one head of the {literal(model)} model, coloured by its mean {literal(label)} score over "
        f"the profile's {corpus.manifest['texts']:,} texts (the brighter, the higher). The outlined head is the one "
        "shown below.",
        figure,
    )
    one_head(corpus, name, model, score, layer, head)
    clustered(corpus, name)


def clustered(corpus: Corpus, name: str) -> None:
    st.header("Heads by their profiles")
    found = head_clusters(corpus.heads, corpus.offsets)
    show_chart(
        cluster_heatmap(found.features, found.names, found.heads, found.order, found.cluster),
        "corpus_clusters",
        safe_filename("corpus", name, "clusters"),
    )
    st.caption(
        f"Every head's profile — its five pattern shares and its mean attention by offset — clustered (average "
        f"linkage, cut at the widest gap between merges, {max(found.cluster)} clusters): a row a head in the "
        "dendrogram's order, heads of one cluster side by side."
    )
    show_chart(
        cluster_map(found.points, found.heads, found.cluster, found.method),
        "corpus_cluster_map",
        safe_filename("corpus", name, "cluster_map"),
    )
    how = "UMAP (umap-learn is installed)" if found.method == "UMAP" else "PCA (UMAP when umap-learn is installed)"
    st.caption(
        f"The same profiles on a map by {how}: heads that attend alike sit close, a colour a cluster "
        "(a head's name where there is room for it, every head's on hover)."
    )


def one_head(corpus: Corpus, name: str, model: str, score: str, layer: int, head: int) -> None:
    label = score.replace("_", " ")
    st.header(f"Layer {layer}, head {head}")
    column = '"' + score.replace('"', '""') + '"'  # a name from the profile's manifest, quoted as SQL's
    values = corpus.sql(f"SELECT {column} FROM text_heads WHERE layer = {layer} AND head = {head}")[score].to_numpy()
    show_chart(distribution(values, label, layer, head), "corpus_distribution", safe_filename("corpus", name, "dist"))
    st.subheader("Top contexts")
    top = corpus.top_contexts(layer, head)
    texts = corpus.sql(f"SELECT text, content FROM texts WHERE text IN ({','.join(map(str, top['text'])) or '0'})")
    content = dict(zip(texts["text"], texts["content"]))
    attention = str(corpus.heads["attention"].iloc[0])
    top["Explore"] = [
        explore_link(model, attention, layer, head, content[t], q) for t, q in zip(top["text"], top["query"])
    ]
    data_table(
        top[["weight", "snippet", "text", "query", "key", "Explore"]],
        hide_index=True,
        column_config={
            "weight": st.column_config.NumberColumn("weight", format="%.3f"),
            # a fixed width, so that a long snippet (an induction head's: the query's words and the key's, far apart)
            # never pushes the link out of the first view; the whole snippet shows when its cell is opened
            "snippet": st.column_config.TextColumn("snippet", width="large"),
            "Explore": st.column_config.LinkColumn("open", display_text="in Explore"),
        },
    )
    st.caption(
        "Each query's strongest key over the corpus, the first token left out (heads park attention there: its share "
        "is the first-token score): the key in «», the query in []. Text and positions from 1."
    )
    sample = corpus.sample(layer, head)
    queries, keys = np.stack(sample["query_vector"].to_numpy()), np.stack(sample["key_vector"].to_numpy())
    q2, k2 = pca_2d(queries, keys)
    show_chart(
        vector_map(q2, k2, list(sample["piece"]), layer, head), "corpus_vectors", safe_filename("corpus", name, "qk")
    )
    st.subheader("Contexts like this one")
    rows = list(range(len(sample)))
    state.keep_valid(C_POINT, rows, 0, owner=(name, layer, head))
    contexts = list(sample["context"])
    pick = st.selectbox("A sampled token", rows, key=C_POINT, format_func=lambda i: contexts[i])
    near = nearest(queries, pick, NEIGHBOURS)
    table = sample.iloc[[i for i, _ in near]][["context", "text", "position"]].copy()
    table.insert(0, "similarity", [s for _, s in near])
    data_table(
        table,
        hide_index=True,
        column_config={"similarity": st.column_config.NumberColumn("cosine", format="%.3f")},
    )
    st.caption(
        f"The {NEIGHBOURS} sampled positions whose query, in this head, points most nearly the same way (exact search "
        f"over the profile's {len(sample)} sampled positions)."
    )


errors.guarded(body)
