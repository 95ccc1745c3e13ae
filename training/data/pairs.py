"""Filters for English -> German sentence pairs: length, ratio, URLs, offensive words, duplicates, held-out overlap.

Every filter is a small pure function; :func:`filter_pairs` applies them in order and counts what each removed, so
the manifest can say exactly what was dropped and why.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from training.data.common import has_control_chars

Pair = tuple[str, str]

OFFENSIVE_WORDS_FILE = Path(__file__).with_name("offensive_words.txt")
MIN_WORDS, MAX_WORDS = 3, 40
MIN_RATIO, MAX_RATIO = 0.5, 2.0

_URL = re.compile(r"https?://|www\.|\b[\w-]+\.(?:com|org|net|de|html?)\b", re.I)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
# Latin letters, digits, ASCII punctuation and the few symbols normalize_text leaves: no emoji, no other scripts.
_CHAT_WORDS = frozenset("haha hahaha lol omg lmao gonna wanna gotta ya ur u yeah ok okay".split())
_PLAIN = re.compile(r"[\x20-\x7e\u00a1-\u024f\u20ac]*")


def n_words(text: str) -> int:
    return len(text.split())


def length_ok(pair: Pair, lo: int = MIN_WORDS, hi: int = MAX_WORDS) -> bool:
    """Both sides have ``lo``..``hi`` whitespace-separated words."""
    return all(lo <= n_words(side) <= hi for side in pair)


def ratio_ok(pair: Pair, lo: float = MIN_RATIO, hi: float = MAX_RATIO) -> bool:
    """German words / English words lies within ``lo``..``hi``."""
    return lo <= n_words(pair[1]) / max(n_words(pair[0]), 1) <= hi


def has_url(text: str) -> bool:
    return bool(_URL.search(text))


def is_plain_text(text: str) -> bool:
    """Latin script and ordinary punctuation only: no emoji, ASCII art symbols or control characters."""
    return bool(_PLAIN.fullmatch(text)) and not has_control_chars(text) and not re.search(r"(.)\1{3,}", text)


def words_of(text: str) -> list[str]:
    """Lower-cased words (letters and inner apostrophes)."""
    return [w.lower() for w in _WORD.findall(text)]


def load_word_list(path: Path = OFFENSIVE_WORDS_FILE) -> tuple[frozenset[str], tuple[str, ...]]:
    """Exact words and prefixes (entries ending in ``*``) from a list file; ``#`` starts a comment."""
    entries = [line.split("#")[0].strip().lower() for line in path.read_text(encoding="utf-8").splitlines()]
    entries = [e for e in entries if e]
    return frozenset(e for e in entries if not e.endswith("*")), tuple(e[:-1] for e in entries if e.endswith("*"))


def is_offensive(text: str, words: frozenset[str], prefixes: tuple[str, ...]) -> bool:
    """True if any word of ``text`` is on the list or starts with a listed prefix."""
    return any(w in words or w.startswith(prefixes) for w in words_of(text))


def pair_key(text: str) -> str:
    """What counts as "the same sentence": lower case, letters and digits only."""
    return "".join(ch for ch in text.lower() if ch.isalnum())


def filter_pairs(
    pairs: Iterable[Pair], checks: Sequence[tuple[str, Callable[[Pair], bool]]]
) -> tuple[list[Pair], dict[str, int]]:
    """Keep pairs passing every check (in order); count the pairs each named check removed first."""
    removed = Counter({name: 0 for name, _ in checks})
    kept = []
    for pair in pairs:
        failed = next((name for name, check in checks if not check(pair)), None)
        if failed is None:
            kept.append(pair)
        else:
            removed[failed] += 1
    return kept, dict(removed)


def standard_checks(offensive: tuple[frozenset[str], tuple[str, ...]]) -> list[tuple[str, Callable[[Pair], bool]]]:
    """The filters every web-derived source goes through, named as the manifest reports them."""
    return [
        ("not_plain_text", lambda p: is_plain_text(p[0]) and is_plain_text(p[1])),
        ("url", lambda p: not (has_url(p[0]) or has_url(p[1]))),
        ("length_outside_3_to_40_words", length_ok),
        ("length_ratio_outside_0.5_to_2", ratio_ok),
        ("untranslated", lambda p: pair_key(p[0]) != pair_key(p[1])),
        ("offensive", lambda p: not (is_offensive(p[0], *offensive) or is_offensive(p[1], *offensive))),
    ]


def clean_pairs(pairs: Iterable[Pair], checks: Sequence[tuple[str, Callable[[Pair], bool]]]) -> tuple[list[Pair], dict]:
    """`checks` (filter_pairs), then duplicates (dedupe); the counts say what each step removed."""
    kept, removed = filter_pairs(pairs, checks)
    unique = dedupe(kept)
    return unique, {"removed": {**removed, "duplicate": len(kept) - len(unique)}, "kept": len(unique)}


def dedupe(pairs: Iterable[Pair]) -> list[Pair]:
    """First pair for each English sentence (by :func:`pair_key`), in order."""
    seen: set[str] = set()
    out = []
    for en, de in pairs:
        key = pair_key(en)
        if key not in seen:
            seen.add(key)
            out.append((en, de))
    return out


def drop_overlap(pairs: Iterable[Pair], heldout: Iterable[Pair]) -> list[Pair]:
    """Pairs whose English or German side does not occur on the same side of any held-out pair."""
    held = list(heldout)
    en_keys, de_keys = {pair_key(en) for en, _ in held}, {pair_key(de) for _, de in held}
    return [(en, de) for en, de in pairs if pair_key(en) not in en_keys and pair_key(de) not in de_keys]


def drop_english(pairs: Iterable[Pair], sentences: Iterable[str]) -> list[Pair]:
    """Pairs whose English side is none of `sentences` (compared as :func:`pair_key` does)."""
    keys = {pair_key(s) for s in sentences}
    return [(en, de) for en, de in pairs if pair_key(en) not in keys]


def common_vocabulary(sentences: Iterable[str], size: int) -> frozenset[str]:
    """The ``size`` most frequent lower-cased words of ``sentences`` (ties by first occurrence)."""
    return frozenset(w for w, _ in Counter(w for s in sentences for w in words_of(s)).most_common(size))


def is_everyday(pair: Pair, vocabulary: frozenset[str], lo: int = 4, hi: int = 15) -> bool:
    """A short, clean sentence a learner could meet: ``lo``..``hi`` English words, all in ``vocabulary``, a
    capital first letter and final ``.?!`` on both sides, no digits, all-caps words, quotes, brackets, chat words
    (``haha``, ``gonna``), lower-case ``i`` or space before punctuation."""
    en, de = pair
    return (
        lo <= n_words(en) <= hi
        and all(re.match(r"[A-ZÄÖÜ]", s) and re.search(r"[.?!]$", s) for s in (en, de))
        and not re.search(r"[\d\"()\[\]{}:;/_*#@&<>|~^]", en + de)
        and not any(len(w) > 1 and w.isupper() and w != "I" for w in en.split() + de.split())
        and all(w in vocabulary and w not in _CHAT_WORDS for w in words_of(en))
        and not re.search(r"\s[,.?!]|\bi\b", en)
    )


def pick_heldout(
    pairs: list[Pair], n: int, seed: int, keep: Callable[[Pair], bool] = lambda p: True
) -> tuple[list[Pair], list[Pair]]:
    """``n`` pairs drawn with ``seed`` among those ``keep`` accepts, and every other pair (order kept)."""
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    chosen = [i for i in order if keep(pairs[i])][:n]
    taken = set(chosen)
    return [pairs[i] for i in chosen], [p for i, p in enumerate(pairs) if i not in taken]
