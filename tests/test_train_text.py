"""`python -m atlas train --task lm --text FILE`: a language model on any UTF-8 text, in a folder the app lists.

Trained on a text the test writes (300 lines), with a tiny model (training.train.TEXT_MODEL patched) and a few steps.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from streamlit.testing.v1 import AppTest

import training.train
from analysis.analyze import generate_text
from atlas.cli import main
from inference.catalog import PRESETS, list_checkpoints, preset_family, presets
from inference.checkpoint import load_checkpoint
from training.data.common import sha256_file
from training.data.text import MIN_TEXT_CHARS, split_text
from training.tasks import TEXT_MODEL

ROOT = Path(__file__).resolve().parents[1]
TINY = {**TEXT_MODEL, "d_model": 16, "n_heads": 2, "n_decoder_layers": 1, "d_ff": 32, "max_len": 32}
SUBJECTS = ("The cat", "A dog", "My sister", "The old man", "Our teacher", "The child", "A bird", "The farmer")
VERBS = ("sees", "likes", "finds", "follows", "paints", "carries", "watches", "helps")
THINGS = ("the red ball", "a small house", "the green tree", "an old boat", "the river", "a kite", "the baker", "a hat")
ENDINGS = ("in the morning.", "after school.", "near the sea.", "every day.", "at night.")


def story(lines: int = 300) -> str:
    """`lines` different sentences of a small grammar (about 13,000 characters for 300)."""
    sentences = [f"{s} {v} {t} {e}" for s in SUBJECTS for v in VERBS for t in THINGS for e in ENDINGS]
    return "\n".join(random.Random(0).sample(sentences, lines)) + "\n"


def train_text(capsys, text: Path, out: Path, *extra: str) -> tuple[int, str]:
    """`python -m atlas train --task lm --text TEXT --out OUT --max-steps 4 --threads 1 EXTRA`: exit code, stderr."""
    args = ["train", "--task", "lm", "--text", str(text), "--out", str(out), "--max-steps", "4", "--threads", "1"]
    code = main([*args, *extra])
    return code, capsys.readouterr().err


@pytest.fixture(autouse=True)
def tiny_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(training.train, "TEXT_MODEL", TINY)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the text, its checkpoint folder under a checkpoints root of its own), trained once for the module."""
    root = tmp_path_factory.mktemp("text")
    text = root / "My Story (draft).txt"
    text.write_text(story(), encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(training.train, "TEXT_MODEL", TINY)
        out = root / "checkpoints" / "lm-my-story-draft"
        argv = ["--task", "lm", "--text", str(text), "--out", str(out), "--max-steps", "4", "--threads", "1"]
        assert training.train.main(argv) == 0
    yield text, out


def test_a_text_trains_into_a_folder_the_app_lists_loads_and_generates_from(trained) -> None:
    text, out = trained
    [entry] = list_checkpoints(out.parent, packages=False)
    assert entry.ok and entry.name == "lm-my-story-draft" and entry.kind == "decoder-only"
    assert "My Story (draft).txt" in entry.card["task"]
    ckpt = load_checkpoint(out)
    assert ckpt.config.d_model == TINY["d_model"] and ckpt.card["training"]["steps_done"] == 4
    assert isinstance(generate_text(ckpt, "The cat sees", 5), str)
    metrics, samples = ckpt.card["metrics"], ckpt.card["samples"]
    assert metrics["perplexity"] > 1 and 0 <= metrics["top1_accuracy"] <= 1 and metrics["split"] == "test"
    assert metrics["command"].endswith(f"--data {out / 'data'}")
    test_lines = (out / "data" / "lm" / "test.txt").read_text(encoding="utf-8").splitlines()
    assert len(samples) == 5 and all(line.startswith(s["input"]) for s, line in zip(samples, test_lines, strict=False))
    [source] = json.loads((out / "data" / "lm" / "sources.json").read_text(encoding="utf-8"))["sources"]
    assert source["name"] == text.name and source["sha256"] == sha256_file(text) and source["lines"] == 300
    assert (out / "tokenizer.model").read_bytes() == (out / "data" / "lm" / "tokenizer.model").read_bytes()
    own = presets(entry.name, entry.kind, entry.card)  # the app offers the text's own openings first
    assert list(own[:5]) == [s["input"] for s in samples] and own[5:] == PRESETS["lm"]


def test_a_text_named_like_another_task_still_gets_a_language_models_presets(trained, tmp_path) -> None:
    _, out = trained
    card = json.loads((out / "card.json").read_text(encoding="utf-8"))
    card["task"] = "Language model (decoder-only) on reverse translation notes.txt"
    assert preset_family("lm-reverse-translation", "decoder-only", card) == "lm"


def test_the_default_folder_is_named_after_the_text_where_the_app_looks(trained, tmp_path, capsys, monkeypatch) -> None:
    text, _ = trained
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))
    assert main(["train", "--task", "lm", "--text", str(text), "--max-steps", "1", "--threads", "1"]) == 0
    assert capsys.readouterr().out.strip() == f"saved {tmp_path / 'lm-my-story-draft'}"
    assert [e.name for e in list_checkpoints()] == ["lm-my-story-draft"]


def test_small_texts_still_hold_out_valid_and_test_lines() -> None:
    lines = story(300).splitlines()
    splits = split_text(lines, heldout_chars=1_500)
    assert all(sum(len(line) + 1 for line in splits[s]) >= 1_500 for s in ("valid", "test"))
    assert sorted(sum(splits.values(), [])) == sorted(lines), "every line in exactly one split"
    assert split_text(lines, heldout_chars=1_500) == splits, "deterministic"


BAD = {
    "missing": (None, "file not found"),
    "folder": ("folder", "is a folder"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 100, "holds NUL bytes"),
    "latin-1": ("Café crème\n".encode("latin-1") * 2000, r"not UTF-8 text \(byte 0xe9 at offset 3 is invalid"),
    "empty": (b"", "holds no text"),
    "whitespace": (b" \n\t\n\r\n" * 50, "holds no text"),
    "too little": (story(60).encode(), f"training needs at least {MIN_TEXT_CHARS:,} characters"),
    "one line repeated": (b"The cat sat on the mat.\n" * 2000, r"24 characters of text once blank and repeated lines"),
}


@pytest.mark.parametrize("case", BAD)
def test_a_bad_text_is_one_line_naming_it_and_exit_code_2(case: str, tmp_path: Path, capsys) -> None:
    content, message = BAD[case]
    text = tmp_path / "my.txt"
    if content == "folder":
        text.mkdir()
    elif content is not None:
        text.write_bytes(content)
    code, err = train_text(capsys, text, tmp_path / "out")
    assert code == 2 and "Traceback" not in err
    assert err.splitlines()[-1].startswith(f"error: {text}: ")
    assert re.search(message, err.splitlines()[-1]), err
    assert not (tmp_path / "out").exists(), "nothing is written before the text is known to be good"


def test_a_folder_with_files_is_kept_unless_its_run_is_resumed(trained, tmp_path: Path, capsys) -> None:
    text, _ = trained
    out = tmp_path / "lm"
    assert train_text(capsys, text, out)[0] == 0
    weights = (out / "model.safetensors").read_bytes()
    code, err = train_text(capsys, text, out)
    assert code == 2 and f"error: {out}: already holds files" in err and f"--resume {out}" in err
    assert (out / "model.safetensors").read_bytes() == weights
    code, err = train_text(capsys, text, out, "--resume", str(out))
    assert code == 0, err
    assert load_checkpoint(out).card["training"]["steps_done"] == 8


def test_resuming_on_a_changed_text_is_refused(trained, tmp_path: Path, capsys) -> None:
    text, first = trained
    changed = tmp_path / text.name
    changed.write_text(story(400), encoding="utf-8")
    code, err = train_text(capsys, changed, tmp_path / "again", "--resume", str(first))
    assert code == 2 and "gives another tokenizer than the run being resumed" in err


def test_the_same_seed_gives_the_same_weights(trained, tmp_path: Path, capsys) -> None:
    text, _ = trained
    runs = {name: tmp_path / name for name in ("a", "b", "c")}
    for name, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        assert train_text(capsys, text, runs[name], "--seed", seed)[0] == 0
    a, b, c = (load_file(runs[name] / "model.safetensors") for name in "abc")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a), "another seed, other weights"


PAGES = [f"views/{name}.py" for name in ("explore", "lesson", "generate", "paper", "attention_math", "positional")]
PAGES += [f"views/{name}.py" for name in ("masks", "rollout", "head_stats", "ablation", "compare", "training")]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_every_page_draws_the_text_model(trained, page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _, out = trained
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(out.parent))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"model": out.name, "text": "The cat sees the river"})
    at.run()
    at.switch_page(page).run()
    problems = [e.value for e in at.exception] + [e.value for e in at.error]
    assert not problems, problems
    assert at.selectbox(key="model").value == out.name


def test_a_text_over_the_size_cap_is_refused_unread_and_one_within_is_read_a_megabyte_at_a_time(
    tmp_path: Path, monkeypatch
) -> None:
    from training.data import text as text_module

    big = tmp_path / "big.txt"
    big.write_bytes(story(400).encode() * 8)
    reads = []
    real_open = Path.open

    def counting_open(self, *args, **kwargs):
        handle = real_open(self, *args, **kwargs)
        real_read = handle.read
        handle.read = lambda n=-1: reads.append(n) or real_read(n)  # type: ignore[method-assign]
        return handle

    monkeypatch.setattr(Path, "open", counting_open)
    assert big.stat().st_size > 100_000
    with pytest.raises(text_module.TextError, match="larger than 0 MB; a run reads at most 6 M tokens"):
        text_module.read_text(big, max_bytes=100_000)
    assert not reads, "refused by its size, unread"
    text_module.read_text(big, max_bytes=big.stat().st_size)
    assert reads and all(0 < n <= 2**20 for n in reads), "read a megabyte at a time, never the whole file"


def test_a_file_ending_inside_a_character_names_it(tmp_path: Path) -> None:
    from training.data.text import TextError, read_text

    cut = tmp_path / "cut.txt"
    cut.write_bytes("Grüße ".encode() * 3000 + "ü".encode()[:1])
    with pytest.raises(TextError, match="ends inside a multi-byte character"):
        read_text(cut)
