"""`python -m training.evaluate CHECKPOINT`: the card's metrics, computed on the held-out test split.

reverse: exact match of greedy outputs; translate: corpus BLEU and chrF (sacrebleu) of greedy outputs;
lm: perplexity and top-1 next-token accuracy. `--write-card` stores the metrics and samples in card.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from inference.analyze import generate_text
from inference.checkpoint import CARD, Checkpoint, CheckpointError, load_checkpoint
from inference.score import perplexity
from training.tasks import data_dir
from training.train import read_lines

LM_PROMPTS = (
    "The cat sat on the",
    "It is a truth universally acknowledged that",
    "She opened the door and",
    "In the morning the",
    "He said that the government",
)
SAMPLE_TOKENS = 20


def task_of(ckpt: Checkpoint) -> str:
    try:
        return ckpt.card["hyperparameters"]["training"]["name"]
    except (KeyError, TypeError) as exc:
        raise CheckpointError(f"{ckpt.path / CARD}: hyperparameters.training.name (the task) is missing") from exc


def outputs(ckpt: Checkpoint, sources: list[str], desc: str, max_tokens: int = 80) -> list[str]:
    return [generate_text(ckpt, s, max_tokens, 1) for s in tqdm(sources, desc=desc, unit="input", mininterval=2)]


def evaluate_reverse(ckpt: Checkpoint, folder: Path, limit: int | None) -> tuple[dict, list]:
    sources, targets = read_lines(folder / "test.src")[:limit], read_lines(folder / "test.tgt")[:limit]
    hyps = outputs(ckpt, sources, "reverse")
    exact = sum(h == t for h, t in zip(hyps, targets, strict=True)) / len(targets)
    samples = [{"input": s, "output": h, "reference": t} for s, h, t in zip(sources[:10], hyps, targets, strict=False)]
    return {"exact_match": round(exact, 4), "test_examples": len(targets), "decoding": "greedy"}, samples


def evaluate_translate(ckpt: Checkpoint, folder: Path, limit: int | None) -> tuple[dict, list]:
    from sacrebleu.metrics import BLEU, CHRF

    sources, refs = read_lines(folder / "test.src")[:limit], read_lines(folder / "test.tgt")[:limit]
    hyps = outputs(ckpt, sources, "translate")
    bleu, chrf = BLEU(), CHRF()
    metrics = {
        "bleu": round(bleu.corpus_score(hyps, [refs]).score, 2),
        "chrf": round(chrf.corpus_score(hyps, [refs]).score, 2),
        "signatures": [str(bleu.get_signature()), str(chrf.get_signature())],
        "test_pairs": len(refs),
        "decoding": "greedy",
    }
    samples = [{"input": s, "output": h, "reference": r} for s, h, r in zip(sources[:10], hyps, refs, strict=False)]
    return metrics, samples


def evaluate_lm(ckpt: Checkpoint, folder: Path, limit: int | None) -> tuple[dict, list]:
    lines = read_lines(folder / "test.txt")[:limit]
    ppl, acc, count = perplexity(ckpt, lines)
    samples = [{"input": p, "output": generate_text(ckpt, p, SAMPLE_TOKENS, 1)} for p in LM_PROMPTS]
    return {"perplexity": round(ppl, 3), "top1_accuracy": round(acc, 4), "test_tokens": count}, samples


EVALUATORS = {"reverse": evaluate_reverse, "translate": evaluate_translate, "lm": evaluate_lm}


def evaluate(ckpt: Checkpoint, data_root: Path, limit: int | None = None) -> tuple[dict[str, Any], list[dict]]:
    task = task_of(ckpt)
    metrics, samples = EVALUATORS[task](ckpt, data_dir(task, data_root), limit)
    metrics["split"] = "test"
    metrics["command"] = f"python -m training.evaluate {ckpt.path}" + (f" --limit {limit}" if limit else "")
    for sample in samples:
        sample["max_tokens"] = SAMPLE_TOKENS if task == "lm" else 80
    return metrics, samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.evaluate", description=__doc__)
    parser.add_argument("checkpoint")
    parser.add_argument("--data", default="data")
    parser.add_argument("--limit", type=int, help="only the first N test examples (quick check)")
    parser.add_argument("--write-card", action="store_true", help="store metrics and samples in card.json")
    args = parser.parse_args(argv)
    try:
        ckpt = load_checkpoint(args.checkpoint)
        metrics, samples = evaluate(ckpt, Path(args.data), args.limit)
    except (CheckpointError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"metrics": metrics, "samples": samples}, indent=2, ensure_ascii=False))
    if args.write_card:
        card = {**ckpt.card, "metrics": metrics, "samples": samples}
        (ckpt.path / CARD).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
