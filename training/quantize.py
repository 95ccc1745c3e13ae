"""`python -m training.quantize CHECKPOINT --bits 8`: store a checkpoint's own weights in fewer bits, if that costs
at most `--tolerance` nats on its test split.

A shipped model's weights take most of the repository's room. In 8 bits (inference.quantized: groups of 32 with a
float16 scale each) they take half of float16's bytes; whether that changes what the model does is measured, not
assumed: the loss per token on the test split, with the weights as they are and as they would be stored, on the
batches the run validated with (training.batches.validation_batches). The weights are rewritten only when the two
differ by at most the tolerance; the card records both figures. Run `python -m atlas evaluate CHECKPOINT
--write-card` after it, so the card's metrics are those of the weights as shipped.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
from pathlib import Path

import torch

from inference.checkpoint import (
    CARD,
    TOKENIZER,
    WEIGHTS,
    CheckpointError,
    load_checkpoint,
    read_metadata,
    save_checkpoint,
)
from training.batches import evaluate_loss, run_validation_batches

TOLERANCE = 0.01  # nats per token: what 8-bit weights may add to the test loss


def quantize_checkpoint(
    checkpoint: Path, bits: int, data_root: Path, tolerance: float = TOLERANCE, command: str = ""
) -> dict:
    """Measure, then rewrite `checkpoint`'s weights in `bits` bits when the test loss moves by at most `tolerance`;
    returns what was measured. Raises CheckpointError (nothing written) when it moves by more."""
    ckpt = load_checkpoint(checkpoint)
    stored_as = read_metadata(checkpoint / WEIGHTS).get("quantized") or "float"
    batches = run_validation_batches(ckpt, data_root, split="test")
    kind, pad = ckpt.config.kind, ckpt.tokenizer.pad_id
    before = evaluate_loss(ckpt.model, batches, kind, pad)
    staging = checkpoint.parent / f".{checkpoint.name}-{bits}bit"
    save_checkpoint(staging, ckpt.model.eval(), (checkpoint / TOKENIZER).read_bytes(), ckpt.card, bits=bits)
    after = evaluate_loss(load_checkpoint(staging).model, batches, kind, pad)
    report = {
        "bits": bits,
        "test_loss_before": round(before, 4),
        "test_loss_after": round(after, 4),
        "stored_before": stored_as,
        "tokens": sum(int((b[1] if kind == "encoder-decoder" else b)[:, 1:].ne(pad).sum()) for b in batches),
        "command": command,
    }
    if abs(after - before) > tolerance:
        shutil.rmtree(staging)
        raise CheckpointError(
            f"{checkpoint}: {bits}-bit weights move the test loss from {before:.4f} to {after:.4f} nats, more than "
            f"{tolerance}; the weights are left as they are"
        )
    (staging / WEIGHTS).replace(checkpoint / WEIGHTS)
    shutil.rmtree(staging)
    card = json.loads((checkpoint / CARD).read_text(encoding="utf-8"))
    card["weights"] = report
    (checkpoint / CARD).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.quantize", description=__doc__)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--bits", type=int, choices=(8, 4), default=8)
    parser.add_argument("--data", type=Path, default=Path("data"), help="prepared data root (default: data)")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE, help=f"nats per token (default {TOLERANCE})")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    command = "python -m training.quantize " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    try:
        report = quantize_checkpoint(args.checkpoint, args.bits, args.data, args.tolerance, command)
    except (CheckpointError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    size = (args.checkpoint / WEIGHTS).stat().st_size
    print(json.dumps(report))
    print(f"{args.checkpoint / WEIGHTS}: {size / 1e6:.1f} MB in {args.bits} bits", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
