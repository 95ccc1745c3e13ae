"""Compare's "another model" (views/compare.py) in AppTest: one text, two models' heads side by side, each model
with its own tokenizer. The same model under two names reads the same tokens and differs by zero; a model of other
size and tokenizer shows its nearest head and says that no difference is drawn; a model without the attention says
so; the choice comes back from a link, and it opens on a model that reads the same presets."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from test_app import APP, chart, ok

from analysis.analyze import analyze
from inference.checkpoint import load_checkpoint
from tests.plotly_data import decode_typed_array

ROOT = Path(__file__).resolve().parents[1]
TEXT = "the cat sat on the mat"


def open_compare(folder: Path, monkeypatch: pytest.MonkeyPatch, **query: str) -> AppTest:
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(folder))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"text": TEXT, "compare_with": "model", **query})
    at.run()
    return ok(at.switch_page("views/compare.py").run())


def z(spec: dict) -> np.ndarray:
    values = spec["data"][0]["z"]
    return decode_typed_array(values) if isinstance(values, dict) else np.asarray(values, dtype=float)


def captions(at: AppTest) -> str:
    return " ".join(c.value for c in at.caption).replace("\\", "")  # literal() escapes Markdown's punctuation


def test_the_same_model_under_two_names_differs_by_zero(tiny_checkpoints, tmp_path, monkeypatch) -> None:
    for name in ("lm-a", "lm-b"):
        shutil.copytree(tiny_checkpoints["decoder-only"], tmp_path / name)
    shutil.copytree(ROOT / "checkpoints" / "fivegram-1L-1H", tmp_path / "fivegram-1L-1H")  # listed first
    at = open_compare(tmp_path, monkeypatch, model="lm-a", L="2", H="3")
    assert at.selectbox(key="compare_model").value == "lm-b"  # it opens on a model that reads the same presets
    assert at.query_params["compare_with"] == "model" and at.query_params["compare_model"] == "lm-b"
    expected = analyze(load_checkpoint(tmp_path / "lm-b"), TEXT).sublayers["decoder.layers.1.self_attn"].weights[2]
    np.testing.assert_allclose(z(chart(at, "compare_second")), expected, atol=1e-6)
    assert not np.abs(z(chart(at, "compare_difference"))).max() > 0
    assert "Both models read the same" in captions(at)
    assert "Next token by lm-b" in " ".join(m.value for m in at.markdown)


def test_another_size_and_tokenizer_shows_its_nearest_head_and_no_difference(
    tiny_checkpoints, tmp_path, monkeypatch
) -> None:
    shutil.copytree(tiny_checkpoints["decoder-only"], tmp_path / "lm-tiny")
    shutil.copytree(ROOT / "checkpoints" / "lm-english", tmp_path / "lm-english")
    at = open_compare(tmp_path, monkeypatch, model="lm-english", compare_model="lm-tiny", L="6", H="8")
    said = captions(at)
    assert "lm-tiny has 2 layers of 4 heads: beside layer 6, its layer 2, head 4." in said
    assert "The two heads read different tokens" in said and "compare_difference" not in {
        c.key for c in at.get("plotly_chart")
    }
    tiny = analyze(load_checkpoint(tmp_path / "lm-tiny"), TEXT).sublayers["decoder.layers.1.self_attn"].weights[3]
    np.testing.assert_allclose(z(chart(at, "compare_second")), tiny, atol=1e-6)


def test_what_the_second_model_cannot_read_is_said_under_it(tiny_checkpoints, tmp_path, monkeypatch) -> None:
    """lm-english's opening names read by the induction model, whose vocabulary has none of them: its note (the
    words it reads as <unk>) under its heatmap, where the sidebar says only the first model's."""
    for name in ("lm-english", "induction"):
        shutil.copytree(ROOT / "checkpoints" / name, tmp_path / name)
    text = "Anna Pavlova met Boris Godunov. Anna Pavlova met Boris"
    at = open_compare(tmp_path, monkeypatch, model="lm-english", compare_model="induction", text=text)
    (note,) = analyze(load_checkpoint(tmp_path / "induction"), text).notes
    assert "not in induction's vocabulary" in note and note.replace("\\", "") in captions(at)


def test_a_model_without_the_attention_says_so(tiny_checkpoints, tmp_path, monkeypatch) -> None:
    shutil.copytree(tiny_checkpoints["encoder-decoder"], tmp_path / "translate-tiny")
    shutil.copytree(ROOT / "checkpoints" / "fivegram-1L-1H", tmp_path / "fivegram-1L-1H")
    at = open_compare(
        tmp_path,
        monkeypatch,
        model="translate-tiny",
        compare_model="fivegram-1L-1H",
        text="the old man ___ to the river",
    )
    assert "fivegram-1L-1H has no cross-attention" in " ".join(e.value for e in at.error).replace("\\", "")


def test_two_models_of_one_layout_show_every_heads_change(tmp_path, monkeypatch) -> None:
    """A centre-word model and its tied-embedding sibling (one tokenizer, one layout): the every-head map is
    analysis.head_diff's total variation, and its sentence names the head that moved most."""
    from analysis.head_diff import head_differences

    for name in ("fivegram-3L-8H", "fivegram-3L-8H-tied"):
        shutil.copytree(ROOT / "checkpoints" / name, tmp_path / name)
    text = "the old man ___ to the river"
    at = open_compare(tmp_path, monkeypatch, model="fivegram-3L-8H", compare_model="fivegram-3L-8H-tied", text=text)
    found = head_differences(
        analyze(load_checkpoint(tmp_path / "fivegram-3L-8H"), text),
        analyze(load_checkpoint(tmp_path / "fivegram-3L-8H-tied"), text),
    )
    grid = z(chart(at, "compare_every_head"))
    for d in found:
        assert grid[d.layer, d.head] == pytest.approx(d.total_variation, abs=1e-6)
    most = max(found, key=lambda d: d.total_variation)
    assert f"layer {most.layer + 1}, head {most.head + 1}" in captions(at)


def test_models_of_other_layouts_say_why_there_is_no_overview(tmp_path, monkeypatch) -> None:
    """One tokenizer, 8 and 16 heads a layer: the chosen head's difference is drawn, the every-head map is not, and
    one line says why."""
    for name in ("fivegram-3L-8H", "fivegram-3L-16H"):
        shutil.copytree(ROOT / "checkpoints" / name, tmp_path / name)
    text = "the old man ___ to the river"
    at = open_compare(tmp_path, monkeypatch, model="fivegram-3L-8H", compare_model="fivegram-3L-16H", text=text)
    assert "compare_every_head" not in {c.key for c in at.get("plotly_chart")}
    assert "No head-by-head overview of the two models" in captions(at)
    assert "8 heads a layer in the first model, 16 in the second" in captions(at)
