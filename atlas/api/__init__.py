"""Attention Atlas in a notebook: load a checkpoint, analyse a text, draw the app's views, save a trace.

    import atlas
    atlas.offline()                                  # figures inline, plotly.js inside the notebook
    lm = atlas.load("lm-english")                    # a folder of checkpoints/, or any checkpoint path
    analysis = atlas.analyze(lm, "The cat sat on the mat.")
    atlas.head(analysis, layer=2, head=3)            # the Explore page's heatmap
    atlas.save(analysis, "cat.json")                 # the app's "Download JSON", byte for byte

Attention computed elsewhere becomes the same `Analysis` (analysis.imported): `from_huggingface` (a model's
`output_attentions=True`), `from_transformer_lens` (a `run_with_cache` cache), `from_arrays` (weights as arrays),
`read_trace` (a `.json` or `.npz` this app or `save` wrote). Their problems are `TraceError`s.

Layers, heads and token positions count from 1 here, as every label of the app and its URL do (`?L=2&H=3` is layer
2, head 3); the Analysis's arrays and the trace files stay 0-based. A number out of range is a ValueError that
names the valid range.

Each view is built by the `viz` functions the app's pages call, with the pages' titles and opening choices, so a
figure here equals the page's (tests/test_notebook.py compares `head` and `heads` with ui.charts'). This package
imports neither streamlit nor the pages; `import atlas` loads it on first use only (atlas/__init__.py), so
`python -m atlas` does not.

This face hands on the names atlas.__all__ lists (atlas/__init__.py, the one list of them), each from the module of
its topic (a few come straight from analysis/); tests/test_api_reference.py checks that the two agree.
"""

from analysis.corpus.store import open_corpus
from analysis.imported import TraceError, from_arrays, from_huggingface, from_transformer_lens
from atlas.api.arguments import AnalysisWarning
from atlas.api.attribution import agreement, logit_attribution, logit_attribution_scores, logit_lens, token_attribution
from atlas.api.circuits import composition, composition_scores, score_parts
from atlas.api.decoding import forced, fork
from atlas.api.every_head import compare_models, corpus, detect_heads, head_stats, rank_heads
from atlas.api.figures import head, heads, mask, offline, paper, rollout, save_figure, value_weighted
from atlas.api.loading import analyze, load, read_trace, save
from atlas.api.patching import activations, patch, patch_scores
