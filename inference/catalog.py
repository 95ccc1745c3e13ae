"""Which checkpoints exist, what their cards say, and which preset sentences suit each model."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference.checkpoint import (
    CARD,
    CONFIG,
    TOKENIZER,
    WEIGHTS,
    CheckpointError,
    is_published,
    load_card,
    load_config,
)
from inference.experiment import is_experiment_model
from inference.jsonfile import JsonFileError, read_json

ENV_VAR = "ATLAS_CHECKPOINTS"
PRETRAINED_VAR = "ATLAS_PRETRAINED"  # 1: list the installed model packages, 0: do not (default: see pretrained_listed)
# A published folder's config.json model_type → our kind (inference.pretrained.loaders reads each of these).
PUBLISHED_KINDS = {"bert": "encoder-only", "gpt2": "decoder-only", "llama": "decoder-only"}
# A published folder's tokenizer: tokenizer.json, or a GPT-2's older vocab.json + merges.txt.
PUBLISHED_TOKENIZERS = ("tokenizer.json", "vocab.json", "merges.txt")
# A card names a head's sub-layer (`decoder.layers.1.self_attn`) under this key: the card format's, kept as every
# card was written, so that cards trained and measured before read as they are.
SUBLAYER_KEY = "block"
DEFAULT_DIR = Path(__file__).resolve().parent.parent / "checkpoints"
DEFAULT_MODEL = "lm-english"  # what a first visit opens on when it is listed: the model a class comes to see
MODEL_VAR = "ATLAS_MODEL"  # the model a bare link opens instead (`python -m atlas app --model NAME` sets it)

# The sentences of Figures 3–5 of "Attention Is All You Need" (Vaswani et al., 2017): the Paper view draws them.
PAPER_SENTENCES = (
    "It is in this spirit that a majority of American governments have passed new laws since 2009 making the "
    "registration or voting process more difficult.",
    "The Law will never be perfect, but its application should be just - this is what we are missing, in my opinion.",
)

PRESETS: dict[str, tuple[str, ...]] = {
    "reverse": ("abcdef", "pineapple", "bookkeeping", "hello", "abcdefghijklmnop"),  # its alphabet is a–p only
    # The first, which the pages open on, is one it translates right ("Ich möchte bitte eine Tasse Kaffee."; the
    # cat's mat comes out "Mat", tests/test_defaults.py).
    "translate": (
        "I would like a cup of coffee, please.",
        "The cat sat on the mat.",
        "Where is the train station?",
        "We are going to the park tomorrow.",
        "My sister reads a book every evening.",
        *PAPER_SENTENCES,
    ),
    "lm": (
        "The cat sat on the mat.",
        "Once upon a time, there was a little girl who",
        "The capital of France is",
        "She opened the door and saw",
        "The cat sat on the mat. The cat sat on the",
        "Mr and Mrs Dursley lived at number four, Privet Drive. They were the last people you would expect. "
        "Mr and Mrs Dursley lived at number four, Privet Drive. They were the last",
        *PAPER_SENTENCES,
    ),
    # runs of words from its 2,000-word vocabulary (lower case, no punctuation: "mat." is not a word it knows). The
    # first, which the pages open on, ends on a word seen once before, so the copy is plain (tests/test_defaults.py);
    # the last ends on "the", which two different words followed: the head copies the one that followed it twice.
    "induction": (
        "john gave mary a book and then john gave mary a",
        "one day a young king came to the city and sat by the gate one day a young king came to the city and",
        "red blue green black white red blue green black white red blue",
        "water fire earth light water fire earth light water fire earth",
        "the old man went down to the river and the old man went down to the",
    ),
    # seed 003's centre-word models: a blank between two words on each side, words of their 2,000-word vocabulary
    "fivegram": (
        "it was the ___ day of the week",
        "what do you ___ to do",
        "he took off his ___ and put it down",
        "the old man ___ to the river",
        "she opened the ___ and saw",
        "once upon a ___ there was",
    ),
}


# Compare's default second text for each preset: one word changed, the same number of tokens in every shipped
# model whose presets hold the first (tests/test_catalog_pairs.py), so the difference of their heads is drawn.
WINOGRAD = (
    "The animal didn't cross the street because it was too tired.",
    "The animal didn't cross the street because it was too wide.",
)
MINIMAL_PAIRS: dict[str, str] = {
    "The cat sat on the mat.": "The dog sat on the mat.",
    "Once upon a time, there was a little girl who": "Once upon a time, there was a little boy who",
    "The capital of France is": "The capital of England is",
    "She opened the door and saw": "He opened the door and saw",
    "The cat sat on the mat. The cat sat on the": "The dog sat on the mat. The dog sat on the",
    PRESETS["lm"][5]: PRESETS["lm"][5].replace("number four", "number five"),
    PAPER_SENTENCES[0]: PAPER_SENTENCES[0].replace("American", "European"),
    PAPER_SENTENCES[1]: PAPER_SENTENCES[1].replace("perfect", "complete"),
    "Where is the train station?": "Where is the bus station?",
    "I would like a cup of coffee, please.": "I would like a cup of tea, please.",
    "We are going to the park tomorrow.": "We are going to the park today.",
    "My sister reads a book every evening.": "My brother reads a book every evening.",
    WINOGRAD[0]: WINOGRAD[1],
    "it was the ___ day of the week": "it was the ___ night of the week",
    "what do you ___ to do": "what do they ___ to do",
    "he took off his ___ and put it down": "she took off her ___ and put it down",
    "the old man ___ to the river": "the old woman ___ to the river",
    "she opened the ___ and saw": "he opened the ___ and saw",
}


@dataclass(frozen=True)
class Entry:
    """One directory under the checkpoints folder: loadable-looking or not (then `error` says why)."""

    name: str
    path: Path
    kind: str | None = None
    card: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def checkpoints_dir() -> Path:
    """`$ATLAS_CHECKPOINTS` when set, else `checkpoints/` beside the app."""
    value = os.environ.get(ENV_VAR, "").strip()
    return Path(value).expanduser() if value else DEFAULT_DIR


def pretrained_listed(root: Path) -> bool:
    """Whether the installed model packages (inference.pretrained.packages) are listed beside `root`'s checkpoints:
    `$ATLAS_PRETRAINED` 1 or 0 when set; otherwise only beside the app's own folder, `$ATLAS_CHECKPOINTS` unset
    (a folder chosen by a test or a deployment lists that folder alone)."""
    value = os.environ.get(PRETRAINED_VAR, "").strip().lower()
    if value:
        return value not in ("0", "false", "no", "off")
    return not os.environ.get(ENV_VAR, "").strip() and root.resolve() == DEFAULT_DIR


def _looks_like_checkpoint(path: Path) -> bool:
    return any((path / f).exists() for f in (WEIGHTS, CONFIG, TOKENIZER, CARD))


def published_entry(path: Path) -> Entry:
    """A published model's folder (Hugging Face layout) or .gguf file under the root: listed from its config.json
    or its name alone; the weights, and whether they fit, are read on loading."""
    if path.suffix == ".gguf":
        return Entry(path.stem, path, "decoder-only", {"task": "Llama-architecture GGUF file", "source": str(path)})
    try:
        config = read_json(path / CONFIG)
    except JsonFileError as exc:
        return Entry(path.name, path, error=str(exc))
    model_type = config.get("model_type") if isinstance(config, dict) else None
    kind = PUBLISHED_KINDS.get(model_type)
    if kind is None:
        readable = ", ".join(PUBLISHED_KINDS)
        return Entry(path.name, path, error=f"{path / CONFIG}: model_type {model_type!r}; this app reads {readable}")
    return Entry(path.name, path, kind, {"task": f"{model_type} checkpoint (Hugging Face layout)", "source": str(path)})


def package_entries() -> list[Entry]:
    """The installed model packages, each with its card; nothing is read but the packages' metadata."""
    from inference.pretrained.packages import installed

    return [Entry(package.name, path, package.kind, package.full_card()) for package, path in installed()]


def list_checkpoints(root: Path | None = None, packages: bool | None = None) -> list[Entry]:
    """Every sub-directory holding a checkpoint file, and every published model's folder or .gguf file, sorted by
    name; config and card are checked (cheap), the weights only when the model is loaded. Then the installed
    model packages, when `packages` (None: `pretrained_listed(root)`)."""
    root = checkpoints_dir() if root is None else root
    packages = pretrained_listed(root) if packages is None else packages
    extra = package_entries() if packages else []
    if not root.is_dir():
        return extra
    entries = []
    for path in sorted(p for p in root.iterdir() if not p.name.startswith(".")):
        if path.is_file() and path.suffix == ".gguf" or path.is_dir() and is_published(path):
            entries.append(published_entry(path))
            continue
        if not path.is_dir() or not _looks_like_checkpoint(path):
            continue
        try:
            config, _ = load_config(path)
            card = load_card(path)
        except CheckpointError as exc:
            entries.append(Entry(path.name, path, error=str(exc)))
            continue
        except Exception as exc:  # whatever one folder holds, it never hides the others: one line naming it
            entries.append(Entry(path.name, path, error=f"{path}: {type(exc).__name__}: {exc}".replace("\n", " ")))
            continue
        entries.append(Entry(path.name, path, config.kind, card))
    return entries + extra


def find_checkpoint(path_or_name: str | Path) -> Path:
    """Where a checkpoint named by a person lies (atlas.load and the command line share this rule): an existing
    path wins; a bare name is a folder in the checkpoints folder (checkpoints_dir) or an installed model package.
    CheckpointError naming the checkpoints there when neither has it."""
    given = Path(path_or_name).expanduser()
    if given.exists():
        return given
    name = str(path_or_name)
    root = checkpoints_dir()
    if given.name == name and name not in ("", ".", ".."):  # a bare name, not a path that does not exist
        if (root / name).exists():
            return root / name
        for entry in package_entries():
            if entry.name == name:
                return entry.path
    known = ", ".join(e.name for e in list_checkpoints(root, packages=True) if e.ok) or "none"
    raise CheckpointError(f"{name}: no such checkpoint path, nor a checkpoint of that name in {root} (there: {known})")


def folder_stamp(root: Path | None = None) -> tuple[tuple[str, float], ...]:
    """(name, stamp) of every sub-directory: changes when a checkpoint is added, removed or replaced. A few stat
    calls, where `list_checkpoints` reads every config and card: the app lists again only when this changes."""
    root = checkpoints_dir() if root is None else root
    extra = tuple((e.name, stamp(e.path)) for e in package_entries()) if pretrained_listed(root) else ()
    if not root.is_dir():
        return extra
    listed = (p for p in sorted(root.iterdir()) if not p.name.startswith("."))
    return tuple((p.name, stamp(p)) for p in listed if p.is_dir() or p.suffix == ".gguf") + extra


def stamp(path: Path) -> float:
    """Latest modification time of the checkpoint's files (or of the file itself: a .gguf, a package's zip): a cache
    key that changes when it is replaced."""
    if path.is_file():
        return path.stat().st_mtime
    files = (WEIGHTS, CONFIG, TOKENIZER, CARD, *PUBLISHED_TOKENIZERS)
    times = [(path / f).stat().st_mtime for f in files if (path / f).exists()]
    return max(times, default=0.0)


def preset_family(name: str, kind: str | None, card: dict[str, Any]) -> str:
    """'reverse', 'translate', 'lm', 'induction' or 'fivegram': the task our training command recorded on the card
    (`experiment` for seed 003's 5-gram models); otherwise judged from the card's task, the directory name and the
    model kind (a text named "reverse.txt" trains an LM)."""
    if is_experiment_model(card):
        return "fivegram"
    trained = (card.get("hyperparameters") or {}).get("training") or {}
    if isinstance(trained, dict) and trained.get("name") in PRESETS:
        return trained["name"]
    words = f"{card.get('task', '')} {name}".lower()
    if "revers" in words:
        return "reverse"
    if "translat" in words or "en-de" in words or kind == "encoder-decoder":
        return "translate"
    return "lm"


def presets(name: str, kind: str | None, card: dict[str, Any]) -> tuple[str, ...]:
    """Preset inputs for a checkpoint: a language model trained on a user's text (`train --text`) offers the
    openings of its own test lines (its card's data.prompts, which its samples continue) first, then the English
    ones."""
    family = preset_family(name, kind, card)
    data = card.get("data") if isinstance(card.get("data"), dict) else {}
    own = tuple(p for p in data.get("prompts") or [] if isinstance(p, str) and p.strip()) if family == "lm" else ()
    return tuple(dict.fromkeys(own + PRESETS[family]))


def card_summary(card: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
    """The card's task and its metrics as (name, value) rows, values formatted for reading; a published model's
    card adds its source package, licence, size and layers × heads."""
    metrics = card.get("metrics") or {}
    rows = published_rows(card)
    if isinstance(metrics, dict):
        for key, value in metrics.items():
            if isinstance(value, dict | list):  # per-test-set tables and signatures: the card has them
                continue
            text = f"{value:.4g}" if isinstance(value, float) else str(value)
            rows.append((str(key), text))
    return str(card.get("task", "")), rows


def headline(card: dict[str, Any]) -> str:
    """How good the model is, in one plain sentence, from the figures its card holds (written by the evaluate
    command): the first of next-token accuracy, BLEU, exact match, copy accuracy or word accuracy the card has;
    "" when it has none of them (the details table then says what it has)."""
    metrics = card.get("metrics")
    if not isinstance(metrics, dict):
        return ""

    def number(key: str) -> float | None:
        value = metrics.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    if (top1 := number("top1_accuracy")) is not None:
        perplexity = number("perplexity")
        tail = f" (perplexity {perplexity:.1f})" if perplexity is not None else ""
        return f"Guesses the next token right {_percent(top1)} of the time on held-out text{tail}."
    if (bleu := number("bleu")) is not None:
        pairs = number("test_pairs")
        many = f" {int(pairs):,}" if pairs is not None else ""
        how = ""
        if (beam := decoding_beam(card)) > 1:  # the figure of the decoding the app uses, where the card has it
            sets = metrics.get("test_sets")
            everyday = sets.get("everyday") if isinstance(sets, dict) else None
            measured = everyday.get(f"beam{beam}") if isinstance(everyday, dict) else None
            if isinstance(measured, dict) and isinstance(measured.get("bleu"), int | float):
                bleu, how = float(measured["bleu"]), f", written with beam search ({beam}) as here,"
        return (
            f"Scores BLEU {bleu:.1f} (of 100) on{many} held-out sentences{how} against one reference translation each."
        )
    if (exact := number("exact_match")) is not None:
        return f"Writes {_percent(exact)} of held-out inputs exactly right."
    if (second := number("second_run_top1_accuracy")) is not None:
        first = number("first_run_top1_accuracy")
        tail = f", against {_percent(first)} on the first, random copy" if first is not None else ""
        return f"Copies a repeated run of random words right {_percent(second)} of the time{tail}."
    if (accuracy := number("accuracy")) is not None:
        return f"Guesses the centre word right {_percent(accuracy)} of the time on held-out text."
    return ""


def recorded_head(card: dict[str, Any]) -> tuple[str, int, str] | None:
    """The head whose formation a run recorded, as (sub-layer name, 0-based head, what it does): the card's best
    induction head, else its best previous-token head (the evaluate command's probe, analysis.induction); None
    when the card names neither or names them in another shape."""
    probe = (card.get("metrics") or {}).get("induction") if isinstance(card.get("metrics"), dict) else None
    if not isinstance(probe, dict):
        return None
    for key, what in (("best_induction_head", "induction"), ("best_previous_token_head", "previous-token")):
        best = probe.get(key)
        if isinstance(best, dict) and isinstance(best.get(SUBLAYER_KEY), str) and isinstance(best.get("head"), int):
            return best[SUBLAYER_KEY], best["head"] - 1, what  # the card counts heads from 1, as it is read
    return None


# The pages that open on a text of their own, and where the card's `defaults` (python -m atlas defaults) keeps it.
# Explore (address "") opens on the repeating text where a language model's opening induction head shows its pattern.
PAGE_TEXTS = {
    "": ("head", "text"),
    "ablation": ("ablation", "text"),
    "compare": ("compare", "first"),
    "training": ("training", "text"),
}


def card_defaults(card: dict[str, Any], what: str) -> dict[str, Any] | None:
    """The card's measured default `what` ("head", "ablation", "compare", "training"; analysis.defaults), or None
    when the card has none in that shape."""
    found = card.get("defaults")
    found = found.get(what) if isinstance(found, dict) else None
    return found if isinstance(found, dict) else None


MAX_BEAM = 8


def decoding_beam(card: dict[str, Any]) -> int:
    """The beam an encoder-decoder's own output is decoded with in the app: the card's measured `defaults.decoding`
    (analysis.defaults.decoding: beam 4 only where evaluate measured it better), else 1 (greedy)."""
    beam = (card_defaults(card, "decoding") or {}).get("beam")
    return beam if isinstance(beam, int) and not isinstance(beam, bool) and 1 <= beam <= MAX_BEAM else 1


def default_head(card: dict[str, Any], what: str = "head") -> tuple[str, int] | None:
    """(sub-layer name, 0-based head) of the card's measured default `what` ("head" or "ablation"); None without one."""
    found = card_defaults(card, what)
    if found is None or not isinstance(found.get(SUBLAYER_KEY), str) or not isinstance(found.get("head"), int):
        return None
    return found[SUBLAYER_KEY], found["head"] - 1  # the card counts heads from 1, as it is read


def opening_text(card: dict[str, Any], page: str) -> str | None:
    """The text page `page` (its address, "ablation") opens on by the card's measurement; None: the first preset."""
    what, key = PAGE_TEXTS.get(page, ("", ""))
    text = (card_defaults(card, what) or {}).get(key) if what else None
    return text if isinstance(text, str) and text else None


def _percent(share: float) -> str:
    """A share as a percentage a person reads: whole numbers from 10 % to 99 %, one decimal outside (0.999 is not
    100 %)."""
    return f"{share:.0%}" if 0.1 <= share <= 0.99 else f"{share:.1%}"


def published_rows(card: dict[str, Any]) -> list[tuple[str, str]]:
    """Where a published model came from and what it is, as (name, value) rows; none for our own cards."""
    source = card.get("source")
    if not isinstance(source, dict):
        return []
    rows = [("package", f"{source.get('package')} {source.get('version') or ''}".strip())]
    rows.append(("upstream", str(source.get("upstream", ""))))
    rows.append(("licence", str(card.get("licence", "unknown"))))
    if "layers" in card and "heads" in card:
        shared = f" ({card['kv_heads']} key/value heads)" if "kv_heads" in card else ""
        rows.append(("layers × heads", f"{card['layers']} × {card['heads']}{shared}"))
    if "parameters" in card:
        rows.append(("parameters", f"{card['parameters'] / 1e6:.1f} M"))
    return rows


def default_model() -> str:
    """The model a bare link opens: `ATLAS_MODEL` when set (`python -m atlas app --model NAME`), else
    DEFAULT_MODEL."""
    return os.environ.get(MODEL_VAR, "").strip() or DEFAULT_MODEL
