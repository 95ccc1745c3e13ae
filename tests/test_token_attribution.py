"""Per-token attributions (analysis/token_attribution.py) against computations of our own in plain torch and numpy:
the gradients read through a hook on a copy of the model, the rollout's row, and attention flow's maximum flow in
a two-layer network, where every path to one token is a path of its own."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from analysis import token_attribution as token_attribution_module
from analysis.analyze import analyze
from analysis.attribution import decoder_inputs
from analysis.rollout import RESIDUAL, analysis_rollout, head_mean, with_residual
from analysis.token_attribution import FLOW_TOKENS, METHODS, token_attribution
from inference.checkpoint import Checkpoint, load_checkpoint
from model.forward import forward

ROOT = Path(__file__).resolve().parents[1]
TEXT = "The cat sat on the mat because the cat was"
REPEATED = "john gave mary a book and then john gave mary a"


@pytest.fixture(scope="module")
def lm() -> Checkpoint:
    return load_checkpoint(ROOT / "checkpoints" / "lm-english")


@pytest.fixture(scope="module")
def translator() -> Checkpoint:
    return load_checkpoint(ROOT / "checkpoints" / "translate-en-de")


@pytest.fixture(scope="module")
def induction() -> Checkpoint:
    return load_checkpoint(ROOT / "checkpoints" / "induction")


def hooked_gradient(ckpt: Checkpoint, text: str, position: int, token: int, alpha: float) -> dict[str, np.ndarray]:
    """∂f/∂e and e for each stack, f the logit of `token` after `position` with the embeddings scaled by `alpha`:
    a copy of the model whose embedding module's output is replaced by a hook (our own route, not the Patch)."""
    analysis = analyze(ckpt, text)
    source, target = decoder_inputs(ckpt, analysis.text, analysis.target_ids)
    model = copy.deepcopy(ckpt.model).eval()
    seen: list[torch.Tensor] = []

    def scaled(module: torch.nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
        leaf = (alpha * output.detach()).requires_grad_(True)
        seen.append(leaf)
        return leaf

    model.embed.register_forward_hook(scaled)
    with torch.enable_grad():
        logits, _ = forward(model, target, source, record=False)
        logits[0, position, token].backward()
    stacks = ["encoder", "decoder"] if source is not None else ["decoder"]  # the encoder embeds first
    return {
        s: (leaf.grad[0].double().numpy(), leaf.detach()[0].double().numpy() / alpha)
        for s, leaf in zip(stacks, seen, strict=True)
    }


def split(found, values: np.ndarray) -> dict[str, np.ndarray]:
    stacks = np.array(found.stacks)
    return {s: values[stacks == s] for s in ("encoder", "decoder") if (stacks == s).any()}


@pytest.mark.parametrize("which", ["lm", "translator"])
def test_gradient_times_input_and_saliency_equal_the_gradient_read_through_a_hook(which: str, request) -> None:
    ckpt = request.getfixturevalue(which)
    analysis = analyze(ckpt, TEXT)
    position = 1 if which == "translator" else len(analysis.target_ids) - 1
    found = token_attribution(ckpt, analysis, position, steps=4)
    mine = hooked_gradient(ckpt, TEXT, position, found.token, 1.0)
    for stack, (grad, embedding) in mine.items():
        if stack == "decoder":  # the tokens after the position cannot reach it: left out
            grad, embedding = grad[: position + 1], embedding[: position + 1]
        np.testing.assert_allclose(
            split(found, found.scores["gradient × input"])[stack], (grad * embedding).sum(-1), atol=1e-4
        )
        np.testing.assert_allclose(
            split(found, found.scores["saliency"])[stack], np.linalg.norm(grad, axis=-1), atol=1e-4
        )
    assert set(split(found, found.scores["saliency"])) == set(mine)


def test_one_step_of_integrated_gradients_is_the_gradient_at_the_midpoint_times_the_input(lm: Checkpoint) -> None:
    analysis = analyze(lm, TEXT)
    position = len(analysis.target_ids) - 1
    found = token_attribution(lm, analysis, position, steps=1)
    grad, embedding = hooked_gradient(lm, TEXT, position, found.token, 0.5)["decoder"]
    np.testing.assert_allclose(found.scores["integrated gradients"], (grad * embedding).sum(-1), atol=1e-4)


@pytest.mark.parametrize("which", ["lm", "translator"])
def test_integrated_gradients_add_up_to_the_logit_against_no_embeddings(which: str, request) -> None:
    """Completeness: with 128 steps the sum is within 2 % of f(e) − f(0), and nearer than with 8."""
    ckpt = request.getfixturevalue(which)
    analysis = analyze(ckpt, TEXT)
    position = 1 if which == "translator" else len(analysis.target_ids) - 1
    fine, coarse = (token_attribution(ckpt, analysis, position, steps=s) for s in (128, 8))
    source, target = decoder_inputs(ckpt, analysis.text, analysis.target_ids)
    logits, _ = forward(ckpt.model, target, source, record=False)
    assert fine.logit == pytest.approx(float(logits[0, position, fine.token]), abs=1e-4)
    assert fine.token == int(logits[0, position].argmax()), "the model's top guess by default"
    assert fine.gap <= 0.02 * abs(fine.logit - fine.baseline)
    assert fine.gap < coarse.gap
    assert fine.gap == pytest.approx(abs(fine.scores["integrated gradients"].sum() - (fine.logit - fine.baseline)))


def test_the_rollout_column_is_the_rollouts_row_at_the_position(lm: Checkpoint, translator: Checkpoint) -> None:
    analysis = analyze(lm, TEXT)
    found = token_attribution(lm, analysis, 4, steps=1)
    np.testing.assert_allclose(
        found.scores["rollout"], analysis_rollout(analysis, "decoder.self_attn").maps[-1][4][:5], atol=1e-6
    )
    analysis = analyze(translator, TEXT)
    found = token_attribution(translator, analysis, 2, steps=1)
    by_stack = split(found, found.scores["rollout"])
    np.testing.assert_allclose(
        by_stack["encoder"], analysis_rollout(analysis, "decoder.cross_attn").maps[-1][2], atol=1e-6
    )
    np.testing.assert_allclose(
        by_stack["decoder"], analysis_rollout(analysis, "decoder.self_attn").maps[-1][2][:3], atol=1e-6
    )
    assert found.pieces == analysis.source_pieces + analysis.target_pieces[:3], "the decoder's tokens up to 3"


def test_attention_flow_in_two_layers_is_the_sum_over_middle_positions_of_the_narrower_edge(
    induction: Checkpoint,
) -> None:
    """Two layers: the paths from position p to token j go through one middle position k each and share no edge,
    so the maximum flow is Σ_k min(Ā₂[p, k], Ā₁[k, j])."""
    analysis = analyze(induction, REPEATED)
    layers = with_residual(head_mean(analysis.stacked("decoder.self_attn")), RESIDUAL)
    assert layers.shape[0] == 2
    p = layers.shape[-1] - 1
    found = token_attribution(induction, analysis, p, steps=1)
    expected = np.minimum(layers[1][p][:, None], layers[0]).sum(axis=0)
    np.testing.assert_allclose(found.scores["attention flow"], expected, atol=1e-6)
    assert found.scores["attention flow"].max() <= 1 + 1e-9


def test_a_text_longer_than_the_flows_bound_has_no_flow_column_and_says_why(
    lm: Checkpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    analysis = analyze(lm, TEXT)
    tokens = len(analysis.target_ids)
    monkeypatch.setattr(token_attribution_module, "FLOW_TOKENS", tokens)
    kept = token_attribution(lm, analysis, tokens - 1, steps=1)
    assert "attention flow" in kept.scores and not kept.notes, "a text of exactly the bound keeps its flow"
    monkeypatch.setattr(token_attribution_module, "FLOW_TOKENS", tokens - 1)
    cut = token_attribution(lm, analysis, tokens - 1, steps=1)
    assert "attention flow" not in cut.scores and f"up to {tokens - 1} tokens" in cut.notes[0]
    assert set(cut.scores) == set(METHODS) - {"attention flow"}
    assert FLOW_TOKENS == 64


def test_nothing_is_left_on_the_model(lm: Checkpoint) -> None:
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    grads = [p.requires_grad for p in lm.model.parameters()]
    analysis = analyze(lm, TEXT)
    token_attribution(lm, analysis, 3, steps=2)
    assert all(torch.equal(before[k], v) for k, v in lm.model.state_dict().items())
    assert [p.requires_grad for p in lm.model.parameters()] == grads
    assert all(p.grad is None for p in lm.model.parameters())
    assert not lm.model.embed._forward_hooks and not lm.model.training


@pytest.mark.parametrize(
    ("steps", "position", "said"),
    [
        (0, 1, "steps is a whole number"),
        (True, 1, "steps is a whole number"),
        (513, 1, "1 to 512"),
        (4, 99, "position 100"),
    ],
)
def test_bad_arguments_are_one_line(lm: Checkpoint, steps: object, position: int, said: str) -> None:
    analysis = analyze(lm, TEXT)
    with pytest.raises(ValueError, match=said):
        token_attribution(lm, analysis, position, steps=steps)


def test_an_encoder_only_model_is_refused_in_one_line() -> None:
    bert = load_checkpoint(ROOT / "checkpoints" / "fivegram-1L-1H")
    with pytest.raises(ValueError, match="read a decoder's stream"):
        token_attribution(bert, analyze(bert, "the old man ___ to the river"), 0)


def test_the_api_gives_a_table_a_row_a_token_and_the_apps_figure(lm: Checkpoint, translator: Checkpoint) -> None:
    import atlas

    table = atlas.token_attribution(lm, TEXT)
    analysis = analyze(lm, TEXT)
    assert list(table["token"]) == list(analysis.target_pieces)
    assert list(table["position"]) == list(range(1, len(table) + 1)), "places count from 1"
    assert set(METHODS) <= set(table.columns)
    assert table.attrs["position"] == len(analysis.target_ids) and table.attrs["token"].strip("▁")
    direct = token_attribution(lm, analysis, len(analysis.target_ids) - 1)
    np.testing.assert_allclose(table["saliency"], direct.scores["saliency"])
    pair = atlas.token_attribution(translator, TEXT, position=2, token="▁Katze")
    assert list(pair["stack"]).count("input") == 2 and pair.attrs["token"] == "▁Katze"
    assert (pair["stack"] == "source").sum() == len(analyze(translator, TEXT).source_pieces)
    fig = atlas.token_attribution(lm, "The <b>cat</b> sat", figure=True)
    (heat,) = fig.data
    assert list(heat.y) == list(METHODS)
    assert all("<b>" not in label for label in fig.layout.xaxis.ticktext), "a person's text is escaped"
    np.testing.assert_allclose(np.abs(np.array(heat.z)).max(axis=1), 1.0)  # each row against its own largest


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"position": 0}, "count from 1"),
        ({"position": 99}, "out of range"),
        ({"token": "xyzzyq"}, "not one token"),
        ({"steps": 0}, "whole number from 1"),
    ],
)
def test_the_apis_bad_arguments_are_one_line(lm: Checkpoint, arguments: dict, said: str) -> None:
    import atlas

    with pytest.raises(ValueError, match=said):
        atlas.token_attribution(lm, TEXT, **arguments)
    with pytest.raises(ValueError, match="one text"):
        atlas.token_attribution(lm, [TEXT, TEXT])
