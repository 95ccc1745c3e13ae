"""`python -m atlas quantize CHECKPOINT --bits 8`: a model's own weights stored in fewer bits only when its test loss
moves by at most the tolerance; the card records both losses."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from safetensors.torch import load_file

from inference.checkpoint import WEIGHTS, load_checkpoint, read_metadata
from inference.quantized import QUANTIZED_8
from tests.test_training import tiny_spec, write_task
from training.loop import train
from training.quantize import main as quantize_main


def trained(tmp_path: Path) -> Path:
    write_task(tmp_path / "data", "lm")
    spec = replace(tiny_spec("lm"), model={**tiny_spec("lm").model, "d_model": 32, "d_ff": 64}, max_steps=6)
    return train(spec, tmp_path / "data", tmp_path / "run", seed=0, threads=1, command="t")


def test_8_bit_weights_replace_float16_when_the_test_loss_stays(tmp_path: Path, capsys) -> None:
    run = trained(tmp_path)
    before = (run / WEIGHTS).stat().st_size
    assert quantize_main([str(run), "--bits", "8", "--data", str(tmp_path / "data"), "--threads", "1"]) == 0
    assert read_metadata(run / WEIGHTS)["quantized"] == QUANTIZED_8
    assert (run / WEIGHTS).stat().st_size < before
    report = json.loads((run / "card.json").read_text(encoding="utf-8"))["weights"]
    assert report["bits"] == 8 and report["stored_before"] == "float" and report["tokens"] > 0
    assert abs(report["test_loss_after"] - report["test_loss_before"]) <= 0.01
    assert load_checkpoint(run).config.d_model == 32
    assert not list(tmp_path.glob(".run-*")), "no staging folder left behind"


def test_weights_that_would_move_the_loss_more_are_left_as_they_are(tmp_path: Path, capsys) -> None:
    run = trained(tmp_path)
    kept = load_file(run / WEIGHTS)
    args = [str(run), "--bits", "4", "--data", str(tmp_path / "data"), "--tolerance", "0", "--threads", "1"]
    assert quantize_main(args) == 2
    assert "4-bit weights move the test loss from" in capsys.readouterr().err
    again = load_file(run / WEIGHTS)
    assert kept.keys() == again.keys() and all(kept[k].equal(again[k]) for k in kept)
    assert "weights" not in json.loads((run / "card.json").read_text(encoding="utf-8"))
    assert not list(tmp_path.glob(".run-*"))
