"""Attention Atlas outside the app: the command line (`python -m atlas`, atlas.cli) and the notebook API
(atlas.api): `load`, `analyze`, `save`, `read_trace`; `from_huggingface`, `from_transformer_lens`, `from_arrays` and
their `TraceError`; the app's views as Plotly figures, `head`, `heads`, `paper`, `rollout`, `mask`, and
`value_weighted` (each key's share of what a head moves, for any of them); the `head_stats` table, `detect_heads`
and `rank_heads` (Head ablation's ranking); how heads compose, from the weights: `composition` and
`composition_scores`; what heads write toward a prediction: `logit_attribution`, `logit_attribution_scores` and
`logit_lens`; what the model thought of a reference translation or a continuation: `forced`;
activation patching on a minimal pair: `patch` and `patch_scores`; whether the methods agree on one prediction:
`agreement`; why a head attends where it does: `score_parts`; what if the model had written another word: `fork`;
every head over a corpus of texts: `corpus`, and `open_corpus` to read one back; any recorded activation by its
module path: `activations` (and `patch_scores(..., what=path)` patches one);
`save_figure`, any figure as an
HTML page, SVG, PNG or PDF; `offline()` for figures in a notebook without a network. Layers, heads and positions
count from 1, as the app's labels do.

`import atlas` itself loads nothing: each name is looked up in atlas.api on first use, so the command line, which
never draws, starts without plotly and pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names are, for readers and type checkers; at run time __getattr__ finds them
    from atlas.api import (
        AnalysisWarning,
        TraceError,
        activations,
        agreement,
        analyze,
        compare_models,
        composition,
        composition_scores,
        corpus,
        detect_heads,
        forced,
        fork,
        from_arrays,
        from_huggingface,
        from_transformer_lens,
        head,
        head_stats,
        heads,
        load,
        logit_attribution,
        logit_attribution_scores,
        logit_lens,
        mask,
        offline,
        open_corpus,
        paper,
        patch,
        patch_scores,
        rank_heads,
        read_trace,
        rollout,
        save,
        save_figure,
        score_parts,
        token_attribution,
        value_weighted,
    )

__all__ = [
    "AnalysisWarning",
    "TraceError",
    "activations",
    "agreement",
    "analyze",
    "compare_models",
    "composition",
    "composition_scores",
    "corpus",
    "detect_heads",
    "forced",
    "fork",
    "from_arrays",
    "from_huggingface",
    "from_transformer_lens",
    "head",
    "head_stats",
    "heads",
    "load",
    "logit_attribution",
    "logit_attribution_scores",
    "logit_lens",
    "mask",
    "offline",
    "open_corpus",
    "paper",
    "patch",
    "patch_scores",
    "rank_heads",
    "read_trace",
    "rollout",
    "save",
    "save_figure",
    "score_parts",
    "token_attribution",
    "value_weighted",
]


def __getattr__(name: str) -> Any:
    """`atlas.load` and the rest of __all__, from atlas.api, imported on the first such lookup (PEP 562)."""
    if name in __all__:
        return getattr(importlib.import_module("atlas.api"), name)
    raise AttributeError(f"module 'atlas' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
