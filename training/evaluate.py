"""`python -m training.evaluate CHECKPOINT`: the card's metrics, computed on the held-out test split.

reverse: exact match of greedy outputs; translate: corpus BLEU and chrF (sacrebleu) and the loop rate, greedy and
beam 4, on the everyday test set (test.*) and on Ding's (test-ding.*), plus ten everyday sample sentences;
lm: perplexity, top-1 next-token accuracy and bits per character over the test documents, and the induction probe
(analysis.induction: the best induction and previous-token heads, the loss on each copy of a repeated run of random
tokens); induction: the probe, and the loss and accuracy on the second copy of the test split's repeated runs.
`--write-card` stores the metrics and samples in card.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from analysis.analyze import generate_text, translate_many
from analysis.induction import measure
from inference.catalog import PRESETS
from inference.checkpoint import CARD, Checkpoint, CheckpointError, is_published, load_checkpoint
from inference.score import perplexity
from model.forward import forward
from training.data.common import read_lines
from training.data.text import PROMPTS
from training.tasks import data_dir

LM_PROMPTS = (
    "The cat sat on the",
    "It is a truth universally acknowledged that",
    "She opened the door and",
    "In the morning the",
    "He said that the government",
)
SAMPLE_TOKENS = 20
# Written for this card (not from any corpus): everyday sentences a class might type, with our own references.
TRANSLATE_SAMPLES = (
    ("The cat sat on the mat.", "Die Katze saß auf der Matte."),
    ("Where is the train station?", "Wo ist der Bahnhof?"),
    ("I have no time today.", "Ich habe heute keine Zeit."),
    ("The weather is very nice today.", "Das Wetter ist heute sehr schön."),
    ("My brother lives in a small house near the river.", "Mein Bruder wohnt in einem kleinen Haus am Fluss."),
    ("Can you help me, please?", "Kannst du mir bitte helfen?"),
    ("We are going to the cinema tonight.", "Wir gehen heute Abend ins Kino."),
    ("The children are playing in the garden.", "Die Kinder spielen im Garten."),
    ("I would like a cup of coffee.", "Ich hätte gern eine Tasse Kaffee."),
    ("She reads a book every evening.", "Sie liest jeden Abend ein Buch."),
)
TEST_SETS = {"everyday": "test", "ding": "test-ding"}  # name -> file stem in data/translate
DECODINGS = {"greedy": 1, "beam4": 4}


def task_of(ckpt: Checkpoint) -> str:
    """The task whose test split scores `ckpt`: its card's training task; a published decoder (no training of
    ours) is scored as a language model on lm-english's test split."""
    try:
        return ckpt.card["hyperparameters"]["training"]["name"]
    except (KeyError, TypeError) as exc:
        if is_published(ckpt.path) and not ckpt.config.has_encoder:
            return "lm"
        if is_published(ckpt.path):
            raise CheckpointError(
                f"{ckpt.path}: an encoder without a masked-LM head predicts no tokens; there is nothing to score"
            ) from exc
        raise CheckpointError(f"{ckpt.path / CARD}: hyperparameters.training.name (the task) is missing") from exc


def resolve(name: str) -> Path:
    """A checkpoint folder or file, or the name of an installed model package (e.g. SmolLM2-135M-Instruct)."""
    from inference.pretrained.packages import installed

    for package, path in installed():
        if name == package.name:
            return path
    return Path(name)


def command_target(ckpt: Checkpoint) -> str:
    """How the evaluate command names `ckpt`: an installed package by its name, anything else by its path."""
    from inference.pretrained.packages import card_for

    return ckpt.name if is_published(ckpt.path) and card_for(ckpt.path) else str(ckpt.path)


def outputs(ckpt: Checkpoint, sources: list[str], desc: str, max_tokens: int = 80, beam: int = 1) -> list[str]:
    """Greedy: batched as the app decodes (`translate_many`); beam search: one source at a time."""
    if beam == 1 and ckpt.config.has_cross_attention:
        return translate_many(ckpt, sources, max_tokens)
    return [generate_text(ckpt, s, max_tokens, beam) for s in tqdm(sources, desc=desc, unit="input", mininterval=2)]


def evaluate_reverse(ckpt: Checkpoint, folder: Path, limit: int | None) -> tuple[dict, list]:
    sources, targets = read_lines(folder / "test.src")[:limit], read_lines(folder / "test.tgt")[:limit]
    hyps = outputs(ckpt, sources, "reverse")
    exact = sum(h == t for h, t in zip(hyps, targets, strict=True)) / len(targets)
    samples = [{"input": s, "output": h, "reference": t} for s, h, t in zip(sources[:10], hyps, targets, strict=False)]
    return {"exact_match": round(exact, 4), "test_examples": len(targets), "decoding": "greedy"}, samples


def has_loop(text: str, run: int = 3) -> bool:
    """True if one word occurs `run` times in a row ("sehr sehr sehr"), case and punctuation ignored."""
    words = re.findall(r"\w+", text.lower())
    return any(len(set(words[i : i + run])) == 1 for i in range(len(words) - run + 1))


def loop_rate(texts: list[str]) -> float:
    """The share of `texts` with a word three times in a row: the symptom of a decoder stuck in a loop."""
    return sum(map(has_loop, texts)) / max(len(texts), 1)


def unprompted_loop_rate(hyps: list[str], sources: list[str]) -> float:
    """The share of outputs with a word three times in a row whose source has none ("Oh no, no, no, no." →
    "Oh nein, nein, nein, nein." is a faithful translation, not a decoder stuck in a loop)."""
    return sum(has_loop(h) and not has_loop(s) for h, s in zip(hyps, sources, strict=True)) / max(len(hyps), 1)


def score_translations(hyps: list[str], refs: list[str], sources: list[str]) -> dict[str, Any]:
    """Corpus BLEU and chrF (sacrebleu defaults) and the loop rates of one decoding of one test set."""
    from sacrebleu.metrics import BLEU, CHRF

    return {
        "bleu": round(BLEU().corpus_score(hyps, [refs]).score, 2),
        "chrf": round(CHRF().corpus_score(hyps, [refs]).score, 2),
        "loop_rate": round(loop_rate(hyps), 4),
        "loop_rate_not_in_source": round(unprompted_loop_rate(hyps, sources), 4),
        "loops": [{"input": s, "output": h} for s, h in zip(sources, hyps, strict=True) if has_loop(h)],
    }


def metric_signatures() -> list[str]:
    """sacrebleu's signatures of the BLEU and chrF settings used (it reports them only after a scoring)."""
    from sacrebleu.metrics import BLEU, CHRF

    metrics = BLEU(), CHRF()
    for metric in metrics:
        metric.corpus_score(["a"], [["a"]])
    return [str(metric.get_signature()) for metric in metrics]


def evaluate_test_set(ckpt: Checkpoint, folder: Path, stem: str, limit: int | None) -> dict[str, Any]:
    """Greedy and beam-search scores of one test set (`stem`.src / `stem`.tgt)."""
    sources, refs = read_lines(folder / f"{stem}.src")[:limit], read_lines(folder / f"{stem}.tgt")[:limit]
    result: dict[str, Any] = {"files": [f"{stem}.src", f"{stem}.tgt"], "pairs": len(refs)}
    for name, beam in DECODINGS.items():
        hyps = outputs(ckpt, sources, f"{stem} {name}", beam=beam)
        result[name] = score_translations(hyps, refs, sources)
    return result


def evaluate_translate(ckpt: Checkpoint, folder: Path, limit: int | None) -> tuple[dict, list]:
    """Every test set present (everyday, Ding), greedy and beam; the headline is greedy on the first one."""
    sets = {name: stem for name, stem in TEST_SETS.items() if (folder / f"{stem}.src").is_file()}
    if not sets:
        read_lines(folder / "test.src")  # raises, naming the prepare command
    scores = {name: evaluate_test_set(ckpt, folder, stem, limit) for name, stem in sets.items()}
    first = next(iter(scores))
    metrics = {
        **{k: v for k, v in scores[first]["greedy"].items() if k != "loops"},
        "headline": f"greedy decoding on the {first} test set ({sets[first]}.src)",
        "test_sets": scores,
        "signatures": metric_signatures(),
        "test_pairs": scores[first]["pairs"],
        "decoding": f"greedy and beam {DECODINGS['beam4']}",
        "loop_rate_means": "the share of outputs with one word three times in a row; loop_rate_not_in_source: "
        "of outputs with one where the source has none (a source's own 'no, no, no' is translated, not a loop); "
        "loops: every such output",
    }
    return metrics, translate_samples(ckpt)


def translate_samples(ckpt: Checkpoint) -> list[dict[str, Any]]:
    """The app's presets for a translator (`"preset": true`: what a class sees first) and the ten everyday sentences
    of TRANSLATE_SAMPLES, greedy (`output`) and beam (`output_beam4`), with a reference where there is one."""
    references = dict(TRANSLATE_SAMPLES)
    shown = [(en, True) for en in PRESETS["translate"]]
    shown += [(en, False) for en in references if en not in PRESETS["translate"]]
    return [
        {
            "input": en,
            "output": generate_text(ckpt, en, 80, 1),
            "output_beam4": generate_text(ckpt, en, 80, DECODINGS["beam4"]),
            **({"reference": references[en]} if en in references else {}),
            **({"preset": True} if preset else {}),
        }
        for en, preset in shown
    ]


def evaluate_lm(ckpt: Checkpoint, folder: Path, limit: int | None, split: str = "test") -> tuple[dict, list]:
    """Samples continue LM_PROMPTS, or the folder's own prompts.txt (training.data.text writes the openings of a
    few test lines there: a text of the user's need not be English). `split` "valid" scores the validation lines
    the same way, line by line, to choose between checkpoints without looking at the test split."""
    lines = read_lines(folder / f"{split}.txt")[:limit]
    ppl, acc, count = perplexity(ckpt, lines)
    characters = sum(len(line) + 1 for line in lines if line.strip())  # + 1: the end of each line, scored as eos
    prompts = read_lines(folder / PROMPTS) if (folder / PROMPTS).is_file() else LM_PROMPTS
    samples = [{"input": p, "output": generate_text(ckpt, p, SAMPLE_TOKENS, 1)} for p in prompts]
    return {
        "perplexity": round(ppl, 3),
        "top1_accuracy": round(acc, 4),
        "induction": measure(ckpt.model, ckpt.config.vocab_size, ckpt.config.bos_id).summary(),
        "test_tokens": count,
        # Per character, not per token: comparable across tokenizers (a 49k-piece vocabulary makes fewer, harder
        # tokens than a 4k one, so perplexity and top-1 per token are not).
        "bits_per_character": round(math.log2(ppl) * count / characters, 4),
        "test_characters": characters,
        "test_lines": sum(1 for line in lines if line.strip()),
    }, samples


@torch.inference_mode()
def evaluate_induction(ckpt: Checkpoint, folder: Path, limit: int | None) -> tuple[dict, list]:
    """The probe, then each test sequence (`<s>` run run): loss and top-1 accuracy over the second run's words but
    its first (which nothing announces), and over the first run's, which only guessing can predict."""
    lines = read_lines(folder / "test.txt")[:limit]
    tok, model = ckpt.tokenizer, ckpt.model
    totals = {"first": [0.0, 0, 0], "second": [0.0, 0, 0]}  # loss, correct, count
    for line in lines:
        ids = torch.tensor([[tok.bos_id, *tok.encode(line)]])
        half = (ids.shape[1] - 1) // 2
        logits, _ = forward(model, ids, record=False)
        logp = torch.log_softmax(logits[0, :-1].float(), dim=-1)  # position i predicts token i + 1
        for part, targets in (("first", range(2, half + 1)), ("second", range(half + 2, 2 * half + 1))):
            for t in targets:
                totals[part][0] -= float(logp[t - 1, ids[0, t]])
                totals[part][1] += int(logp[t - 1].argmax() == ids[0, t])
                totals[part][2] += 1
    metrics: dict[str, Any] = {"induction": measure(model, ckpt.config.vocab_size, ckpt.config.bos_id).summary()}
    for part, (loss, correct, count) in totals.items():
        metrics[f"{part}_run_loss"] = round(loss / count, 4)
        metrics[f"{part}_run_top1_accuracy"] = round(correct / count, 4)
    metrics["test_sequences"] = len(lines)
    samples = []
    for line in lines[:5]:
        words = line.split()
        half = len(words) // 2
        prompt = " ".join(words[: half + 3])
        rest = " ".join(words[half + 3 :])
        output = generate_text(ckpt, prompt, half - 3, 1)
        samples.append({"input": prompt, "output": output, "expected": rest, "max_tokens": half - 3})
    return metrics, samples


EVALUATORS = {
    "reverse": evaluate_reverse,
    "translate": evaluate_translate,
    "lm": evaluate_lm,
    "induction": evaluate_induction,
}


def evaluate(
    ckpt: Checkpoint, data_root: Path, limit: int | None = None, split: str = "test"
) -> tuple[dict[str, Any], list[dict]]:
    task = task_of(ckpt)
    if split != "test" and task != "lm":
        raise ValueError(f"--split {split} is for language models; {task} is scored on its test sets")
    evaluator = EVALUATORS[task] if split == "test" else functools.partial(evaluate_lm, split=split)
    metrics, samples = evaluator(ckpt, data_dir(task, data_root), limit)
    metrics["split"] = split
    metrics["command"] = f"python -m training.evaluate {command_target(ckpt)}" + (f" --limit {limit}" if limit else "")
    metrics["command"] += f" --split {split}" if split != "test" else ""
    for sample in samples:
        sample.setdefault("max_tokens", SAMPLE_TOKENS if task == "lm" else 80)
    return metrics, samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.evaluate", description=__doc__)
    parser.add_argument(
        "checkpoint",
        help="a checkpoint folder, a published model's folder or .gguf, or an installed "
        "model package's name (SmolLM2-135M-Instruct: scored on lm-english's test split)",
    )
    parser.add_argument("--data", default="data")
    parser.add_argument("--limit", type=int, help="only the first N test examples (quick check)")
    parser.add_argument("--write-card", action="store_true", help="store metrics and samples in card.json")
    parser.add_argument(
        "--split",
        choices=("test", "valid"),
        default="test",
        help="valid: a language model's validation lines, scored as the test split is (to choose a checkpoint)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: a shared machine)")
    args = parser.parse_args(argv)
    if args.write_card and args.split != "test":
        parser.error("--write-card stores the test split's figures; leave out --split valid")
    torch.set_num_threads(args.threads)
    try:
        ckpt = load_checkpoint(resolve(args.checkpoint))
        metrics, samples = evaluate(ckpt, Path(args.data), args.limit, args.split)
    except (CheckpointError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"metrics": metrics, "samples": samples}, indent=2, ensure_ascii=False))
    if args.write_card and is_published(ckpt.path):
        from inference.pretrained.packages import card_for, record_metrics

        if card_for(ckpt.path) is None:
            print(
                f"error: {ckpt.path}: --write-card writes our cards and the model packages' figures, "
                "not a published folder's files",
                file=sys.stderr,
            )
            return 2
        print(f"wrote {record_metrics(ckpt.name, metrics, samples)}", file=sys.stderr)
    elif args.write_card:
        card = {**ckpt.card, "metrics": metrics, "samples": samples}
        (ckpt.path / CARD).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
