"""model.forward: the one way to run any model, and the only one outside model/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from model.config import ModelConfig
from model.factory import build_model
from model.forward import forward

ROOT = Path(__file__).resolve().parent.parent
# Where a model is run: every package but model/ (which defines the forwards) and tests/ (which test them).
RUNNERS = ["app.py", "atlas", "inference", "analysis", "ui", "views", "viz", "training", "bench", "scripts"]


def small(kind: str) -> torch.nn.Module:
    layers = {
        "n_encoder_layers": 0 if kind == "decoder-only" else 1,
        "n_decoder_layers": 0 if kind == "encoder-only" else 1,
    }
    config = ModelConfig(kind=kind, vocab_size=20, d_model=16, n_heads=2, d_ff=32, dropout=0.0, max_len=32, **layers)
    return build_model(config).eval()


def direct_calls(path: Path) -> list[str]:
    """`model(…)`, `ckpt.model(…)`, `something.model.forward(…)`: a model object called outside model.forward."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "forward" and not isinstance(func.value, ast.Name):
            func = func.value
        named = (isinstance(func, ast.Name) and func.id in ("model", "lm", "translator")) or (
            isinstance(func, ast.Attribute) and func.attr == "model"
        )
        if named:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_nothing_outside_model_runs_a_model_but_through_forward() -> None:
    files = [p for name in RUNNERS for p in ([ROOT / name] if name.endswith(".py") else (ROOT / name).rglob("*.py"))]
    assert len(files) > 50
    calls = [call for path in files for call in direct_calls(path)]
    assert calls == [], "run models through model.forward.forward, where the branch on the kind lives"


@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only", "encoder-only"])
def test_forward_gives_what_each_models_own_forward_gives(kind: str) -> None:
    torch.manual_seed(0)
    model = small(kind)
    ids, source = torch.tensor([[2, 5, 6, 7]]), torch.tensor([[8, 9, 3]])
    if kind == "encoder-decoder":
        own, by_forward = model(source, ids), forward(model, ids, source)
    else:
        own, by_forward = model(ids), forward(model, ids)
    assert torch.equal(own[0], by_forward[0])
    assert list(own[1].attention) == list(by_forward[1].attention)


def test_forward_continues_a_past_as_the_full_pass_gives() -> None:
    model = small("decoder-only")
    ids = torch.tensor([[2, 5, 6, 7, 8]])
    whole, _ = forward(model, ids, record=False)
    _, past = forward(model, ids[:, :3], record=False)
    rest, _ = forward(model, ids[:, 3:], past=past, record=False)
    assert torch.allclose(whole[:, 3:], rest, atol=1e-5)


@pytest.mark.parametrize(
    ("kind", "source", "past", "words"),
    [
        ("encoder-decoder", False, False, "reads a source"),
        ("decoder-only", True, False, "has no source"),
        ("encoder-only", True, False, "has no source"),
        ("encoder-only", False, True, "nothing to continue"),
    ],
)
def test_forward_names_what_a_kind_cannot_take(kind: str, source: bool, past: bool, words: str) -> None:
    model = small(kind)
    ids = torch.tensor([[2, 5, 6]])
    earlier = forward(model, ids)[1] if past else None
    with pytest.raises(ValueError, match=words):
        forward(model, ids, ids if source else None, earlier)


def test_decoder_layers_from_a_layers_stream_give_the_whole_passs_logits() -> None:
    from model.forward import decoder_layers, decoder_logits

    torch.manual_seed(0)
    config = ModelConfig(kind="decoder-only", vocab_size=20, d_model=16, n_heads=2, d_ff=32, dropout=0.0, max_len=32)
    model = build_model(config).eval()
    ids = torch.tensor([[2, 5, 6, 7, 9], [2, 8, 4, 0, 0]])  # the second row padded (pad_id 0)
    with torch.no_grad():
        logits, trace = forward(model, ids, activations=True)
        for first in range(config.n_decoder_layers):
            x = trace.activations[f"decoder.layers.{first}.resid_pre"]
            out = decoder_layers(model, ids, x, first, config.n_decoder_layers)
            torch.testing.assert_close(decoder_logits(model, out[:, -2:]), logits[:, -2:], rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="decoder-only"):
        decoder_layers(small("encoder-only"), ids, x, 0, 1)
