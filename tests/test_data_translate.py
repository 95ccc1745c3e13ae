"""The EN->DE data preparation on tiny in-memory inputs: joins, alignment, filters, held-out splits. No network."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from training.data import pairs as pf
from training.data import translate as tr

ROOT = Path(__file__).resolve().parents[1]
OFFENSIVE = (frozenset({"damn", "sex"}), ("fuck", "scheiß"))


def test_de_corpus_joins_on_the_md5_of_the_english_original() -> None:
    english = ["Good morning.", "I like  tea."]
    german = [("Ich mag Tee.", hashlib.md5(b"I like  tea.").hexdigest()), ("Waise.", "0" * 32)]
    assert tr.join_by_md5(english, german) == [("I like tea.", "Ich mag Tee.")]


def test_help_pages_align_by_paragraph_id_and_sentence_count() -> None:
    en = (
        '<p id="par_1" class="paragraph">Open the <span class="emph">File</span> menu. Click Save now.</p>'
        '<p id="par_2">Only in English.</p><p id="par_3">One sentence here. And two.</p>'
        '<p id="bm_module">Bookmark text.</p>'
    )
    de = (
        '<p id="par_1">Öffnen Sie das Menü <span>Datei</span>. Klicken Sie auf Speichern.</p>'
        '<p id="par_3">Ein Satz mit zwei Teilen.</p><p id="bm_module">Lesezeichen.</p>'
    )
    english, german = tr.help_paragraphs(en), tr.help_paragraphs(de)
    assert english["par_1"] == "Open the File menu. Click Save now." and "bm_module" not in english
    assert tr.align_paragraphs(english, german) == [
        ("Open the File menu.", "Öffnen Sie das Menü Datei."),
        ("Click Save now.", "Klicken Sie auf Speichern."),
    ]


def test_help_files_pair_by_their_path_under_each_language(tmp_path: Path) -> None:
    for lang, text in (("en-US", "Choose a new colour now."), ("de", "Wählen Sie jetzt eine neue Farbe.")):
        (tmp_path / lang / "text").mkdir(parents=True)
        (tmp_path / lang / "text" / "a.html").write_text(f'<p id="p1">{text}</p>', encoding="utf-8")
    assert tr.read_help(tmp_path) == [("Choose a new colour now.", "Wählen Sie jetzt eine neue Farbe.")]


def test_offensive_words_match_whole_words_or_listed_prefixes(tmp_path: Path) -> None:
    listed = tmp_path / "words.txt"
    listed.write_text("# comment\ndamn\nfuck*  # prefix\n\n", encoding="utf-8")
    words, prefixes = pf.load_word_list(listed)
    assert words == {"damn"} and prefixes == ("fuck",)
    assert pf.is_offensive("What the FUCKING hell.", words, prefixes)
    assert pf.is_offensive("Damn it.", words, prefixes)
    assert not pf.is_offensive("The dam is damp.", words, prefixes)


def test_the_shipped_word_list_catches_slurs_on_either_side() -> None:
    offensive = pf.load_word_list()
    assert pf.is_offensive("You are a bitch.", *offensive)
    assert pf.is_offensive("Das ist Scheiße.", *offensive)
    assert not pf.is_offensive("The weather is very nice today.", *offensive)


def test_filters_count_what_each_check_removed() -> None:
    pairs = [
        ("The cat sleeps now.", "Die Katze schläft jetzt."),
        ("See www.example.com for more.", "Siehe www.example.com für mehr."),
        ("Hi.", "Hallo."),
        ("This is a very long sentence indeed, my friend.", "Das ist lang."),
        ("Good morning to you.", "Good morning to you."),
        ("Damn this old car.", "Verflixtes altes Auto."),
        ("I love you 😍 so much.", "Ich liebe dich 😍 so sehr."),
    ]
    kept, removed = pf.filter_pairs(pairs, pf.standard_checks(OFFENSIVE))
    assert kept == [pairs[0]]
    assert removed == {
        "not_plain_text": 1,
        "url": 1,
        "length_outside_3_to_40_words": 1,
        "length_ratio_outside_0.5_to_2": 1,
        "untranslated": 1,
        "offensive": 1,
    }


def test_clean_source_also_counts_duplicates() -> None:
    pairs = [("The cat sleeps now.", "Die Katze schläft jetzt."), ("the cat sleeps now!", "Die Katze pennt.")]
    kept, counts = tr.clean_source(pairs, OFFENSIVE)
    assert kept == pairs[:1] and counts["removed"]["duplicate"] == 1 and counts["kept"] == 1


def test_training_pairs_never_repeat_a_held_out_sentence() -> None:
    held = [("Where is the station?", "Wo ist der Bahnhof?")]
    pairs = [("where is the station", "Wo bitte?"), ("Hello there, friend.", "wo ist der Bahnhof")]
    pairs.append(("A b c.", "X y z."))
    assert pf.drop_overlap(pairs, held) == [("A b c.", "X y z.")]


def test_everyday_pairs_are_short_plain_and_in_common_vocabulary() -> None:
    vocabulary = frozenset("i have no time today the cat is here haha".split())
    assert pf.is_everyday(("I have no time today.", "Ich habe heute keine Zeit."), vocabulary)
    assert not pf.is_everyday(("I have time.", "Ich habe Zeit."), vocabulary), "under 4 words"
    assert not pf.is_everyday(("The cat is here haha.", "Die Katze ist hier haha."), vocabulary), "chat word"
    assert not pf.is_everyday(("The zebra is here today.", "Das Zebra ist heute hier."), vocabulary), "rare word"
    assert not pf.is_everyday(("i have no time today.", "Ich habe heute keine Zeit."), vocabulary)
    assert not pf.is_everyday(("The cat is here today", "Die Katze ist heute hier."), vocabulary), "no full stop"


def test_held_out_draw_is_seeded_and_disjoint_from_the_rest() -> None:
    pairs = [(f"Sentence number {i}.", f"Satz Nummer {i}.") for i in range(20)]
    picked, rest = pf.pick_heldout(pairs, 5, seed=1, keep=lambda p: p[0].endswith(("2.", "4.", "6.", "8.", "0.")))
    assert len(picked) == 5 and not set(picked) & set(rest) and len(rest) == 15
    assert picked == pf.pick_heldout(pairs, 5, seed=1, keep=lambda p: p[0].endswith(("2.", "4.", "6.", "8.", "0.")))[0]


def test_splits_keep_dings_test_split_and_hold_out_every_test_sentence() -> None:
    ding = [(f"Ding sentence {i} here.", f"Ding Satz {i} hier.") for i in range(1_600)]
    web = [(f"I have time {i} today.", f"Ich habe heute Zeit {i}.") for i in range(2_500)]
    web += [("I have no time today.", "Ich habe heute keine Zeit.")]
    help_pairs = [(f"Click button {i} now.", f"Klicken Sie jetzt {i}.") for i in range(400)]
    splits, report = tr.build_splits(ding, web, help_pairs, seed=0, offensive=OFFENSIVE)
    assert splits["test-ding"] == tr.ding_splits(ding, 0)["test"]
    held = {en for name in ("test", "test-ding", "valid") for en, _ in splits[name]}
    assert not held & {en for en, _ in splits["train"]}
    assert report["train"] == len(splits["train"]) and report["everyday_test"] == len(splits["test"])


COURSE_PACK = {
    "pack_id": "bakery",
    "phrases": [
        {
            "id": "bakery_001",
            "de": "Ich hätte gern ein Brötchen.",
            "en": "I would like a bread roll.",
            "literal": "I would have gladly a bread roll.",
            "examples": [{"de": "Ich hätte gern einen Kaffee.", "en": "I would like a coffee."}],
            "variations": [{"de": "Ich nehme ein Brötchen.", "en": "I'll take a bread roll."}],
        },
        {"id": "verbs_001", "de": "arbeiten", "en": "to work"},
    ],
}
COURSE_STORY = {
    "paragraphs": [
        {"de": "Anna ist müde. Sie geht früh ins Bett.", "en": "Anna is tired. She goes to bed early."},
        {"de": "Es regnet. Anna nimmt den Schirm mit.", "en": "It is raining, so Anna takes her umbrella."},
    ],
    "lines": [{"speaker": "Du", "de": "Guten Morgen!", "en": "Good morning!"}],
}


def test_course_pairs_are_every_en_de_object_with_aligned_paragraphs_split() -> None:
    assert list(tr.course_pairs(COURSE_PACK)) == [
        ("I would like a bread roll.", "Ich hätte gern ein Brötchen."),
        ("I would like a coffee.", "Ich hätte gern einen Kaffee."),
        ("I'll take a bread roll.", "Ich nehme ein Brötchen."),
    ], "the literal gloss is not a translation, 'to work' is not a sentence"
    assert list(tr.course_pairs(COURSE_STORY)) == [
        ("Anna is tired.", "Anna ist müde."),
        ("She goes to bed early.", "Sie geht früh ins Bett."),
        ("It is raining, so Anna takes her umbrella.", "Es regnet. Anna nimmt den Schirm mit."),
    ], "two sentences against one stay one pair; two words are no sentence"


def test_the_course_is_read_from_every_json_file_under_its_content(tmp_path: Path) -> None:
    (tmp_path / "packs").mkdir()
    (tmp_path / "packs" / "bakery.json").write_text(json.dumps(COURSE_PACK), encoding="utf-8")
    (tmp_path / "stories.json").write_text(json.dumps(COURSE_STORY), encoding="utf-8")
    (tmp_path / "notes.txt").write_text('{"en": "Not read at all.", "de": "Gar nicht gelesen."}', encoding="utf-8")
    pairs = tr.read_course(tmp_path)
    assert pairs[0] == ("I would like a bread roll.", "Ich hätte gern ein Brötchen.") and len(pairs) == 6


def splits_with(course: list[tuple[str, str]], shown: list[str]) -> tuple[dict, dict]:
    ding = [(f"Ding sentence {i} here.", f"Ding Satz {i} hier.") for i in range(1_600)]
    web = [(f"I have time {i} today.", f"Ich habe heute Zeit {i}.") for i in range(2_500)]
    web += [("I have no time today.", "Ich habe heute keine Zeit.")]
    help_pairs = [(f"Click button {i} now.", f"Klicken Sie jetzt {i}.") for i in range(400)]
    return tr.build_splits(ding, web, help_pairs, 0, OFFENSIVE, course, shown)


def test_course_pairs_go_to_train_only_repeated_and_never_a_held_out_or_shown_sentence() -> None:
    before, _ = splits_with([], [])
    held = before["test"][0]
    course = [("We need three apples.", "Wir brauchen drei Äpfel."), held, ("Where is the train station?", "Wo?")]
    splits, report = splits_with(course, ["Where is the train station?"])
    assert {k: splits[k] for k in ("test", "test-ding", "valid")} == {
        k: before[k] for k in ("test", "test-ding", "valid")
    }
    assert splits["train"].count(course[0]) == tr.AUF_DEUTSCH_REPEAT
    assert held not in splits["train"] and course[2] not in splits["train"]
    assert report["course_pairs_in_train"] == 1 and report["train_removed_as_shown_sentence"] == 1
    assert len(splits["train"]) == len(before["train"]) + tr.AUF_DEUTSCH_REPEAT


def test_the_sentences_the_app_shows_are_held_out_of_training() -> None:
    from inference.catalog import PRESETS
    from training.data.unseen import english_sentences
    from training.evaluate import TRANSLATE_SAMPLES

    shown = tr.shown_sentences()
    judged = english_sentences()
    assert len(judged) == 32 and "The shop opens at nine o'clock." in judged
    assert set(PRESETS["translate"]) | {en for en, _ in TRANSLATE_SAMPLES} | set(judged) == set(shown)
    pairs = [("The cat sat on the mat!", "Die Katze saß."), ("The cat sat on a mat.", "Die Katze saß.")]
    assert pf.drop_english(pairs, shown) == pairs[1:]


FAKE_PYTHON = """#!/bin/sh
# `python -m atlas evaluate FOLDER`: the figures FOLDER/figures names, and a line in evaluated.log; else Python
if [ "$1 $2 $3" = "-m atlas evaluate" ]; then
  echo "$4" >> "$(dirname "$0")/evaluated.log"
  read -r bleu chrf < "$4/figures"
  echo "{\\"metrics\\": {\\"bleu\\": $bleu, \\"chrf\\": $chrf}, \\"samples\\": []}"
  exit 0
fi
exec "{python}" "$@"
"""


def cpu_compare(tmp_path: Path, run_figures: str, *args: str) -> str:
    """`scripts/cpu_train.sh compare ARGS` in tmp_path, the shipped model scoring 42.32 / 64.01 and the run as told."""
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON.replace("{python}", sys.executable))
    fake.chmod(0o755)
    for folder, figures, weights in (("shipped", "42.32 64.01", "old"), ("runs/run", run_figures, "new")):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "figures").write_text(figures)
        (tmp_path / folder / "card.json").write_text('{"training": {"steps_done": 14000}}')
        for name in ("model.safetensors", "config.json", "tokenizer.model"):
            (tmp_path / folder / name).write_text(weights)
    (tmp_path / "scripts").mkdir(exist_ok=True)
    (tmp_path / "scripts" / "cpu_train.sh").write_bytes(
        (Path(__file__).parents[1] / "scripts/cpu_train.sh").read_bytes()
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(fake), "SHIPPED": "shipped", "RUN": "runs/run"}
    done = subprocess.run(
        ["bash", "scripts/cpu_train.sh", "compare", *args], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_cpu_run_lands_only_when_better_on_both_bleu_and_chrf(tmp_path: Path) -> None:
    assert "not better on both" in cpu_compare(tmp_path, "43.0 63.9")
    assert (tmp_path / "shipped" / "model.safetensors").read_text() == "old"
    assert "would ship" in cpu_compare(tmp_path, "43.0 64.5", "--dry-run")
    assert (tmp_path / "shipped" / "model.safetensors").read_text() == "old"
    assert "copied into shipped" in cpu_compare(tmp_path, "43.0 64.5")
    assert (tmp_path / "shipped" / "model.safetensors").read_text() == "new"
    assert json.loads((tmp_path / "shipped" / "card.json").read_text())["metrics"] == {"bleu": 43.0, "chrf": 64.5}
    evaluated = (tmp_path / "evaluated.log").read_text().split()
    assert evaluated.count("shipped") == 1, "the shipped model is evaluated once, its figures kept in runs/"
