"""Every checkpoint shipped in checkpoints/ loads, has a complete card, and reproduces its card's samples."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from atlas.cli import generate_text
from inference.checkpoint import CARD_KEYS, load_checkpoint
from inference.experiment import ROWS

pytestmark = pytest.mark.slow  # every shipped model against its card (5 s): CI runs them

ROOT = Path(__file__).resolve().parent.parent / "checkpoints"
SHIPPED = ("reverse", "translate-en-de", "lm-english", "induction")
METRICS = {
    "reverse": ("exact_match",),
    "translate-en-de": ("bleu", "chrf"),
    "lm-english": ("perplexity", "top1_accuracy"),
    "induction": ("second_run_loss", "second_run_top1_accuracy"),
}


def test_the_shipped_checkpoints_and_the_whole_repository_stay_within_60_mb() -> None:
    """With their training snapshots (reverse's and lm-english's in 4 bits, induction's in float16) and seed 003's
    table of 5-gram models (4 bits; tests/test_experiment.py checks them): the repository's limit is 60 MB for
    every file it tracks."""
    assert sorted(p.name for p in ROOT.iterdir() if p.is_dir()) == sorted(SHIPPED + tuple(r.name for r in ROWS))
    size = sum(f.stat().st_size for f in ROOT.rglob("*") if f.is_file())
    assert size <= 56e6, f"checkpoints take {size / 1e6:.1f} MB"
    repo = ROOT.parent
    if not (repo / ".git").exists():
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True).stdout.decode()
    others = [repo / n for n in listed.split("\0") if n and not n.startswith("checkpoints/")]
    total = size + sum(p.stat().st_size for p in others if p.is_file())  # checkpoints/ as it is on disk
    assert total <= 60e6, f"the repository's files take {total / 1e6:.1f} MB"


@pytest.mark.parametrize("name", [*SHIPPED, ROWS[0].name])
def test_every_preset_sentence_is_within_the_models_vocabulary(name: str) -> None:
    """A 5-gram model's presets: the words it reads around the blank (every model of the table has one tokenizer)."""
    from inference.catalog import presets
    from inference.text import centre_context, outside_vocabulary

    ckpt = load_checkpoint(ROOT / name)
    for text in presets(name, ckpt.config.kind, ckpt.card):
        read = " ".join(centre_context(text, 2, [])) if ckpt.config.switches.sum_outputs else text
        assert outside_vocabulary(ckpt.tokenizer, read) == {}, text


@pytest.fixture(scope="module", params=SHIPPED)
def shipped(request):
    return load_checkpoint(ROOT / request.param)


def test_card_is_complete_and_names_its_data_licenses(shipped) -> None:
    card = shipped.card
    assert set(CARD_KEYS) <= set(card)
    assert card["metrics"].get("split") == "test", "metrics come from training.evaluate on the test split"
    for key in METRICS[shipped.name]:
        assert isinstance(card["metrics"][key], int | float)
    licenses = [s.get("license") for s in card["data"]["sources"]]
    assert licenses and all(isinstance(lic, str) and lic for lic in licenses)
    assert card["command"].startswith(("python -m model.train --task", "python -m training.train --task"))


def test_tokenizer_hash_matches_config_and_card(shipped) -> None:
    digest = hashlib.sha256((shipped.path / "tokenizer.model").read_bytes()).hexdigest()
    config = json.loads((shipped.path / "config.json").read_text(encoding="utf-8"))
    assert digest == config["tokenizer_sha256"] == shipped.card["tokenizer_sha256"]


def test_generate_reproduces_the_cards_samples(shipped) -> None:
    samples = shipped.card["samples"]
    assert len(samples) >= (10 if shipped.name == "translate-en-de" else 5)
    for sample in samples:
        assert generate_text(shipped, sample["input"], sample["max_tokens"], 1) == sample["output"]
