"""Against the real TransformerLens (4.x, requirements-dev.txt): our composition scores (analysis.circuits) equal
its `utilities.composition_scores` on the same head matrices, and our head detectors (analysis.detectors) equal
its `head_detector` patterns and its "mul" score, on the shipped induction model and lm-english."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
import torch

from analysis.analyze import analyze
from analysis.circuits import composition, head_matrices
from analysis.detectors import _score, pattern_for
from inference.checkpoint import load_checkpoint

pytestmark = pytest.mark.slow  # TransformerLens takes 6 s to import: CI runs these; the everyday tier stays short
ROOT = Path(__file__).resolve().parents[1]
assert version("transformer-lens").startswith("4."), version("transformer-lens")
REPEATED = "freedom election movies garden river freedom election movies garden river"


@pytest.mark.parametrize("name", ["induction", "lm-english"])
def test_composition_scores_equal_transformer_lens_on_the_same_matrices(name: str) -> None:
    from transformer_lens import FactoredMatrix  # installed by requirements-dev.txt: no skip
    from transformer_lens.utilities import composition_scores

    model = load_checkpoint(ROOT / "checkpoints" / name).model
    m = head_matrices(model)
    layers, heads = m.n_layers, m.n_heads
    t = lambda a: torch.from_numpy(a)
    ov = FactoredMatrix(t(m.w_v), t(m.w_o))  # (N, d_model, d_model) W_V W_O of every head, factored
    qk = FactoredMatrix(t(m.w_q), t(m.w_k).transpose(-1, -2))  # W_Q W_Kᵀ
    theirs = {
        "Q": composition_scores(ov, qk),  # (N early, N late): the early head's output read by the late one's queries
        "K": composition_scores(ov, qk.T),
        "V": composition_scores(ov, ov),
    }
    ours = composition(model).scores
    later = np.arange(layers)[None, None, :, None] > np.arange(layers)[:, None, None, None]
    later = np.broadcast_to(later, (layers, heads, layers, heads))  # a later head reads an earlier one's output
    for mode, scores in theirs.items():
        expected = scores.numpy().reshape(layers, heads, layers, heads)
        np.testing.assert_allclose(ours[mode][later], expected[later], rtol=1e-6, atol=1e-9)
        assert np.isnan(ours[mode][~later]).all()


def test_detector_patterns_and_scores_equal_transformer_lens() -> None:
    from transformer_lens import head_detector

    ckpt = load_checkpoint(ROOT / "checkpoints" / "induction")
    analysis = analyze(ckpt, REPEATED)
    ids = torch.tensor(analysis.target_ids)
    getters = {
        "previous token": head_detector.get_previous_token_head_detection_pattern,
        "same token": head_detector.get_duplicate_token_head_detection_pattern,
        "induction": head_detector.get_induction_head_detection_pattern,
    }
    for name, getter in getters.items():
        theirs = getter(ids).numpy()
        np.testing.assert_array_equal(pattern_for(name, analysis.target_ids), theirs)
        for sublayer in analysis.sublayers.values():
            ours = _score(sublayer.weights, sublayer.mask, theirs)
            for head in range(sublayer.n_heads):
                expected = head_detector.compute_head_attention_similarity_score(
                    torch.from_numpy(sublayer.weights[head].astype(np.float64)),
                    torch.from_numpy(theirs.astype(np.float64)),
                    exclude_bos=False,
                    exclude_current_token=False,
                    error_measure="mul",
                )
                assert ours[head] == pytest.approx(expected, abs=1e-6)


def test_the_docs_offer_only_the_transformer_lens_models_version_4_has() -> None:
    """A TransformerLens model the docs offer ("a TransformerBridge", "or a HookedTransformer") is one the installed
    TransformerLens 4 has: it removed HookedTransformer (its name now raises, saying what to use instead)."""
    import transformer_lens
    from transformer_lens import model_bridge

    text = " ".join((ROOT / "docs" / name).read_text() for name in ("api.md", "notebook.md", "published-models.md"))
    offered = set(re.findall(r"\ban? `?(Hooked\w+|TransformerBridge)\b", " ".join(text.split())))
    assert "TransformerBridge" in offered
    for name in offered:
        try:
            getattr(model_bridge if name == "TransformerBridge" else transformer_lens, name)
        except (AttributeError, ImportError):
            pytest.fail(f"the docs offer {name}, which TransformerLens {version('transformer-lens')} lacks")
