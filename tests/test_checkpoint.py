"""Checkpoints: a round trip keeps everything; any missing or damaged file gives a CheckpointError naming it."""

from __future__ import annotations

import json
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from inference.checkpoint import (
    CARD,
    CONFIG,
    RECORDED,
    TOKENIZER,
    WEIGHTS,
    CheckpointError,
    load_checkpoint,
    record_config,
    save_checkpoint,
)
from inference.tokenizer import Tokenizer
from model.config import BOUNDS
from model.factory import build_model
from training.tiny import make_tiny_checkpoint, tiny_config, tiny_tokenizer_bytes

ROOT = Path(__file__).resolve().parents[1]
CARD_CONTENT = {
    "task": "round trip",
    "data": [{"name": "none", "license": "MIT"}],
    "hyperparameters": {"lr": 1e-3},
    "metrics": {"bleu": 1.5},
    "command": "pytest",
    "samples": ["ä ö ü"],
}


@pytest.fixture(scope="module")
def tokenizer_bytes() -> bytes:
    return tiny_tokenizer_bytes(300)


@pytest.fixture
def damaged(tiny_checkpoints, tmp_path: Path):
    """A private copy of a tiny checkpoint of either kind, to be damaged by the test."""

    def copy(kind: str = "decoder-only") -> Path:
        target = tmp_path / f"copy-{kind}"
        shutil.copytree(tiny_checkpoints[kind], target)
        return target

    return copy


def logits_of(model, gen_seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(gen_seed)
    ids = torch.randint(4, model.config.vocab_size, (2, 6), generator=gen)
    with torch.no_grad():
        return (model(ids, ids) if model.config.has_cross_attention else model(ids))[0]


@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only"])
@pytest.mark.parametrize(
    "overrides",
    [{}, {"positional": "learned", "tie_embeddings": False, "norm": "pre"}],
    ids=["post-sinusoidal-tied", "pre-learned-untied"],
)
def test_a_checkpoint_round_trip_keeps_logits_config_card_and_tokenizer(kind, overrides, tokenizer_bytes, tmp_path):
    tokenizer = Tokenizer(tokenizer_bytes)
    torch.manual_seed(3)
    model = build_model(tiny_config(kind, tokenizer.vocab_size, **overrides)).eval()
    path = save_checkpoint(tmp_path / "ckpt", model, tokenizer_bytes, CARD_CONTENT)
    assert sorted(p.name for p in path.iterdir()) == sorted([WEIGHTS, CONFIG, TOKENIZER, CARD])
    ckpt = load_checkpoint(path)
    assert ckpt.name == "ckpt" and ckpt.path == path
    assert ckpt.config == model.config
    assert ckpt.card == {**CARD_CONTENT, "tokenizer_sha256": tokenizer.sha256}
    assert ckpt.tokenizer.sha256 == tokenizer.sha256 == json.loads((path / CONFIG).read_text())["tokenizer_sha256"]
    assert type(ckpt.model) is type(model)
    assert not ckpt.model.training
    assert not any(p.requires_grad for p in ckpt.model.parameters())
    assert torch.equal(logits_of(ckpt.model), logits_of(model))
    loaded, original = ckpt.model.state_dict(), model.state_dict()
    assert loaded.keys() == original.keys()
    assert all(torch.equal(loaded[k], original[k]) for k in original)
    if model.config.tie_embeddings:
        assert ckpt.model.generator.weight is ckpt.model.embed.lut.weight


def test_make_tiny_checkpoint_is_deterministic_for_a_seed(tiny_checkpoints, tmp_path) -> None:
    again = load_checkpoint(make_tiny_checkpoint(tmp_path / "again", "decoder-only", seed=0))
    other = load_checkpoint(make_tiny_checkpoint(tmp_path / "other", "decoder-only", seed=1))
    first = load_checkpoint(tiny_checkpoints["decoder-only"])
    assert torch.equal(logits_of(again.model), logits_of(first.model))
    assert not torch.equal(logits_of(other.model), logits_of(first.model))


def test_a_missing_checkpoint_directory_is_named(tmp_path) -> None:
    missing = tmp_path / "no-such-checkpoint"
    with pytest.raises(CheckpointError, match="no-such-checkpoint"):
        load_checkpoint(missing)
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(CheckpointError, match="a-file"):
        load_checkpoint(tmp_path / "a-file")


@pytest.mark.parametrize("name", [WEIGHTS, CONFIG, TOKENIZER, CARD])
def test_each_missing_file_is_named(damaged, name: str) -> None:
    path = damaged()
    (path / name).unlink()
    with pytest.raises(CheckpointError, match=name.replace(".", r"\.")) as info:
        load_checkpoint(path)
    assert "not found" in str(info.value)


@pytest.mark.parametrize("keep", [0, 7, 100, -1000])
def test_a_truncated_weights_file_is_named(damaged, keep: int) -> None:
    path = damaged("encoder-decoder")
    data = (path / WEIGHTS).read_bytes()
    (path / WEIGHTS).write_bytes(data[:keep])
    with pytest.raises(CheckpointError, match=r"model\.safetensors"):
        load_checkpoint(path)


class WritesMarker:
    """Unpickling this object opens (creates) the marker file: what a malicious pickle would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


@pytest.mark.parametrize("writer", ["pickle", "torch.save"])
def test_a_pickle_in_place_of_the_weights_is_refused_without_being_unpickled(damaged, tmp_path, writer) -> None:
    # the payload is live: unpickling it really creates its marker
    probe = tmp_path / "probe-marker"
    pickle.loads(pickle.dumps(WritesMarker(probe)))  # noqa: S301 - our own payload, to prove it works
    assert probe.exists()

    path = damaged()
    marker = tmp_path / "marker-created"
    payload = {"embed.lut.weight": WritesMarker(marker)}
    if writer == "pickle":
        (path / WEIGHTS).write_bytes(pickle.dumps(payload))
    else:
        torch.save(payload, path / WEIGHTS)
    with pytest.raises(CheckpointError, match=r"model\.safetensors"):
        load_checkpoint(path)
    assert not marker.exists()


@pytest.mark.parametrize(
    "content",
    ["{not json", "", '["a", "list"]', '{"format": 2, "model": {}}', "\udcff"],
    ids=["broken", "empty", "list", "wrong-format", "not-utf8"],
)
def test_an_invalid_config_json_is_named(damaged, content: str) -> None:
    path = damaged()
    if content == "\udcff":
        (path / CONFIG).write_bytes(b"\xff\xfe{")
    else:
        (path / CONFIG).write_text(content)
    with pytest.raises(CheckpointError, match=r"config\.json"):
        load_checkpoint(path)


def edit_config(path: Path, **model_changes) -> None:
    raw = json.loads((path / CONFIG).read_text())
    raw["model"].update(model_changes)
    (path / CONFIG).write_text(json.dumps(raw))


@pytest.mark.parametrize(
    "changes",
    [{"n_heads": 5}, {"kind": "gpt"}, {"dropout": "abc"}, {"dropout": "0.1"}, {"tie_embeddings": "no"}, {"extra": 1}],
)
def test_config_values_that_fail_validation_are_named(damaged, changes) -> None:
    path = damaged()
    edit_config(path, **changes)
    with pytest.raises(CheckpointError, match=r"config\.json") as info:
        load_checkpoint(path)
    assert next(iter(changes)) in str(info.value)


@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only"])
def test_a_config_with_a_wrong_d_model_names_the_weights_file(damaged, kind) -> None:
    path = damaged(kind)
    edit_config(path, d_model=64)
    with pytest.raises(CheckpointError, match=r"model\.safetensors") as info:
        load_checkpoint(path)
    assert "config.json" in str(info.value)  # says what it should match


@pytest.mark.parametrize(("changes", "word"), [({"positional": "learned"}, "missing"), ({"n_decoder_layers": 1}, "")])
def test_weights_that_do_not_fit_the_config_are_named(damaged, changes, word) -> None:
    path = damaged()
    edit_config(path, **changes)
    with pytest.raises(CheckpointError, match=r"model\.safetensors") as info:
        load_checkpoint(path)
    assert word in str(info.value)


def test_a_replaced_tokenizer_is_caught_by_its_sha256(damaged) -> None:
    path = damaged()
    (path / TOKENIZER).write_bytes(tiny_tokenizer_bytes(320))
    with pytest.raises(CheckpointError, match=r"tokenizer\.model.*sha256") as info:
        load_checkpoint(path)
    assert "does not match" in str(info.value)


def test_a_tokenizer_file_that_is_not_sentencepiece_is_named(damaged) -> None:
    path = damaged()
    (path / TOKENIZER).write_bytes(b"definitely not a sentencepiece model")
    with pytest.raises(CheckpointError, match=r"tokenizer\.model"):
        load_checkpoint(path)


def test_a_card_with_missing_keys_or_another_tokenizer_hash_is_named(damaged) -> None:
    path = damaged()
    card = json.loads((path / CARD).read_text())
    (path / CARD).write_text(json.dumps({k: v for k, v in card.items() if k != "metrics"}))
    with pytest.raises(CheckpointError, match=r"card\.json.*metrics"):
        load_checkpoint(path)
    (path / CARD).write_text(json.dumps({**card, "tokenizer_sha256": "0" * 64}))
    with pytest.raises(CheckpointError, match=r"card\.json"):
        load_checkpoint(path)
    (path / CARD).write_text("[]")
    with pytest.raises(CheckpointError, match=r"card\.json"):
        load_checkpoint(path)


# ---------------------------------------------------------------- checkpoint trust: sizes, header, finite weights


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("d_ff", 1_000_000_000_000),
        ("vocab_size", 1_000_001),
        ("d_model", 8192 * 2),
        ("n_heads", 512),
        ("n_decoder_layers", 129),
        ("n_encoder_layers", 10_000),
        ("max_len", 65537),
    ],
)
def test_a_size_above_its_bound_is_named_before_any_weight_is_allocated(damaged, monkeypatch, field, value) -> None:
    path = damaged()
    edit_config(path, **{field: value})
    monkeypatch.setattr("inference.checkpoint.build_model", lambda *a, **k: pytest.fail("a model was built"))
    with pytest.raises(CheckpointError, match=r"config\.json") as info:
        load_checkpoint(path)
    message = str(info.value)
    assert f"{field} is {value}, above its bound of {BOUNDS[field]}" in message
    assert "typo" in message  # says what to do


def test_sizes_each_in_bounds_but_too_many_parameters_together_are_named(damaged, monkeypatch) -> None:
    path = damaged()
    edit_config(path, d_model=8192, n_heads=8, d_ff=65536, n_decoder_layers=128, max_len=64)
    monkeypatch.setattr("inference.checkpoint.build_model", lambda *a, **k: pytest.fail("a model was built"))
    with pytest.raises(CheckpointError, match=r"config\.json.*parameters.*2,000,000,000") as info:
        load_checkpoint(path)
    assert "lower d_model" in str(info.value)


@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only"])
@pytest.mark.parametrize("overrides", [{}, {"positional": "learned", "tie_embeddings": False, "norm": "pre"}])
def test_the_parameter_count_from_the_config_is_that_of_the_model(kind, overrides) -> None:
    # the bound on parameters is only as good as this count: it must agree with the model the config builds
    config = tiny_config(kind, 50, **overrides)
    assert config.n_parameters == sum(p.numel() for p in build_model(config).parameters())
    if kind == "decoder-only":  # an encoder layer count a decoder-only model ignores adds no weights
        ignored = tiny_config(kind, 50, n_encoder_layers=3, **overrides)
        assert ignored.n_parameters == config.n_parameters


def header(path: Path) -> dict[str, str]:
    with safe_open(str(path / WEIGHTS), "pt") as file:
        return file.metadata()


def tensor_bytes(path: Path) -> dict[str, bytes]:
    with safe_open(str(path / WEIGHTS), "pt") as file:
        return {key: file.get_tensor(key).numpy().tobytes() for key in file.keys()}


@pytest.mark.parametrize("bits", [32, 16, 8, 4])
def test_save_checkpoint_records_kind_width_heads_and_layers_in_the_weights_header(tokenizer_bytes, tmp_path, bits):
    model = build_model(tiny_config("encoder-decoder", Tokenizer(tokenizer_bytes).vocab_size, n_decoder_layers=3))
    path = save_checkpoint(tmp_path / "ckpt", model, tokenizer_bytes, CARD_CONTENT, bits=bits)
    expected = {"kind": "encoder-decoder", "d_model": "32", "n_heads": "4", "n_encoder_layers": "2"}
    assert header(path).items() >= {**expected, "n_decoder_layers": "3"}.items()
    loaded = load_checkpoint(path).model.state_dict()
    for name, weight in model.state_dict().items():  # each weight back within half a step of its width
        step = weight.abs().max() / {32: 2**23, 16: 2**10, 8: 127, 4: 7}[bits]
        torch.testing.assert_close(loaded[name], weight, atol=float(step) / 2 + 1e-6, rtol=0, msg=name)


def test_8_bit_weights_stored_in_another_dtype_are_named(tokenizer_bytes, tmp_path) -> None:
    model = build_model(tiny_config("decoder-only", Tokenizer(tokenizer_bytes).vocab_size))
    path = save_checkpoint(tmp_path / "ckpt", model, tokenizer_bytes, CARD_CONTENT, bits=8)
    tensors = load_file(str(path / WEIGHTS))
    name = next(k for k in tensors if k.endswith(".int8"))
    tensors[name] = tensors[name].to(torch.uint8)
    save_file(tensors, str(path / WEIGHTS), metadata=header(path))
    with pytest.raises(CheckpointError, match=f"tensor {name} is stored as torch.uint8; 8-bit files hold torch.int8"):
        load_checkpoint(path)


def test_a_config_json_with_another_head_count_than_the_weights_is_named(damaged) -> None:
    # 8 heads of 4 instead of 4 heads of 8: every tensor keeps its shape, only the header can tell
    path = damaged()
    edit_config(path, n_heads=8)
    with pytest.raises(CheckpointError, match=r"model\.safetensors: was saved with n_heads=4") as info:
        load_checkpoint(path)
    assert "config.json says 8" in str(info.value) and "put them back in config.json" in str(info.value)


def strip_header(path: Path) -> None:
    """Rewrite the weights as a checkpoint saved before the header recorded the config."""
    metadata = {k: v for k, v in header(path).items() if k not in RECORDED}
    save_file(load_file(str(path / WEIGHTS)), str(path / WEIGHTS), metadata=metadata)


def test_weights_without_the_recorded_config_are_refused_saying_how_to_record_it(damaged) -> None:
    path = damaged("encoder-decoder")
    before = tensor_bytes(path)
    strip_header(path)
    with pytest.raises(CheckpointError, match=r"model\.safetensors: the header does not record kind") as info:
        load_checkpoint(path)
    assert f"python -m inference.checkpoint {path}" in str(info.value)

    done = subprocess.run(
        [sys.executable, "-m", "inference.checkpoint", str(path)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert tensor_bytes(path) == before  # the same tensors, byte for byte: only the header grew
    assert header(path)["n_heads"] == "4"
    assert load_checkpoint(path).config.n_heads == 4


def test_recording_the_config_keeps_a_header_that_disagrees_with_config_json(damaged) -> None:
    path = damaged()
    edit_config(path, n_heads=8)
    with pytest.raises(CheckpointError, match=r"n_heads=4 \(config\.json says 8\)"):
        record_config(path)
    assert header(path)["n_heads"] == "4"


@pytest.mark.parametrize(
    ("part", "value"),
    [("decoder.layers.0.self_attn", float("nan")), ("encoder.layers.1", float("inf")), ("embed", float("-inf"))],
)
def test_weights_holding_nan_or_infinity_are_refused_naming_the_tensor(damaged, part, value) -> None:
    path = damaged("encoder-decoder")
    tensors, metadata = load_file(str(path / WEIGHTS)), header(path)
    tensor = next(name for name in sorted(tensors) if name.startswith(part))
    tensors[tensor].view(-1)[[0, -1]] = value
    save_file(tensors, str(path / WEIGHTS), metadata=metadata)
    with pytest.raises(CheckpointError, match=rf"model\.safetensors: tensor {re.escape(tensor)} holds 2 NaN") as info:
        load_checkpoint(path)
    assert "restore the file or retrain" in str(info.value)


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool, torch.uint8])
def test_weights_stored_as_integers_or_booleans_are_refused_naming_the_tensor(damaged, dtype) -> None:
    path = damaged("decoder-only")
    tensors, metadata = load_file(str(path / WEIGHTS)), header(path)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name].to(dtype)
    save_file(tensors, str(path / WEIGHTS), metadata=metadata)
    stored = {torch.int32: "I32", torch.bool: "BOOL", torch.uint8: "U8"}[dtype]
    with pytest.raises(CheckpointError, match=rf"tensor {re.escape(name)} is stored as {stored}; weights must be"):
        load_checkpoint(path)
