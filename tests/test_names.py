"""Sublayer names are built and read in one place (model/names.py): TransformerLens keeps one `get_act_name`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from model.names import (
    attention_type,
    layer_name,
    parse_attention_type,
    parse_sublayer_name,
    sublayer_layer,
    sublayer_name,
)

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("model", "inference", "analysis", "ui", "viz", "views", "atlas", "training", "course")


def test_a_sublayer_name_round_trips_and_names_its_layer_and_kind() -> None:
    name = sublayer_name("decoder", 1, "cross_attn")
    assert name == "decoder.layers.1.cross_attn" and name.startswith(layer_name("decoder", 1) + ".")
    assert parse_sublayer_name(name) == ("decoder", 1, "cross_attn") and sublayer_layer(name) == 1
    assert attention_type(name) == "decoder.cross_attn" and parse_attention_type("decoder.cross_attn") == (
        "decoder",
        "cross_attn",
    )
    for bad in ("decoder.layers.x.self_attn", "middle.layers.0.self_attn", "encoder.layers.0.ffn", "a.b"):
        with pytest.raises(ValueError, match="not an attention sub-layer name"):
            parse_sublayer_name(bad)
    with pytest.raises(ValueError, match="not an attention type"):
        parse_attention_type("encoder.layers.0.self_attn")


def offenders() -> list[str]:
    """f-strings that build `….layers.…` and `.split(".")` calls outside model/names.py."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "model" / "names.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
                if isinstance(node, ast.JoinedStr) and any(
                    isinstance(v, ast.Constant) and ".layers." in str(v.value) or str(v.value).startswith("layers.")
                    for v in node.values
                    if isinstance(v, ast.Constant)
                ):
                    found.append(f"{where}: builds a sub-layer name")
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "split"
                    and len(node.args) == 1
                    and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value == "."
                ):
                    found.append(f"{where}: splits a name by hand")
    return found


def test_no_sublayer_name_is_built_or_split_by_hand_outside_its_home() -> None:
    assert offenders() == []
