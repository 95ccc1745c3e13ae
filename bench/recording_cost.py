"""What recording every head costs: the same model and weights run with record=True (every step explicit, scores
and weights kept) against record=False (the model's own fused `scaled_dot_product_attention` path, model/attention.py).

The fused path is not bit-identical to the explicit one (a different summation order), so the script reports the
largest absolute difference between the two passes' logits and checks it is within 1e-4.

Inputs are random ordinary token ids of exactly N positions (an encoder-decoder gets N source and N target tokens,
teacher-forced); no tokenizer or generation is involved.

    python bench/recording_cost.py [--repeats N] [--quick] [--checkpoints DIR] [--tiny]
"""

from __future__ import annotations

import statistics

import common
import torch
from torch import Tensor

from model.forward import forward
from model.trace import Trace

SIZES = (16, 64, 256, 512)
QUICK_SIZES = (16, 64)
TOLERANCE = 1e-4


def trace_bytes(trace: Trace) -> int:
    """Bytes of every tensor the trace holds for attention (scores and weights if recorded, K, V; masks once)."""
    total = 0
    for rec in trace.attention.values():
        for t in (rec.scores, rec.weights, rec.keys, rec.values):
            if t is not None:
                total += t.numel() * t.element_size()
    total += sum(m.numel() * m.element_size() for m in trace.masks.values())
    return total


def inputs(ckpt, n: int, seed: int = 0) -> tuple[Tensor, Tensor | None]:
    """(ids, source_ids) of n random tokens each, as model.forward takes them (a source for a translator only)."""
    gen = torch.Generator().manual_seed(seed)
    first = max(ckpt.config.pad_id, ckpt.config.unk_id, ckpt.config.bos_id, ckpt.config.eos_id) + 1
    ids = torch.randint(first, ckpt.config.vocab_size, (1, n), generator=gen)
    ids[0, 0] = ckpt.config.bos_id
    if ckpt.config.has_cross_attention:
        src = torch.randint(first, ckpt.config.vocab_size, (1, n), generator=gen)
        src[0, -1] = ckpt.config.eos_id
        return ids, src
    return ids, None


@torch.inference_mode()
def measure(ckpt, n: int, repeats: int) -> dict[str, float]:
    model = ckpt.model
    args = inputs(ckpt, n)
    recorded, trace = forward(model, *args, record=True)
    fused, fused_trace = forward(model, *args, record=False)
    timings: dict[str, list[float]] = {"record": [], "no_record": []}
    runs = {
        "record": lambda: forward(model, *args, record=True),
        "no_record": lambda: forward(model, *args, record=False),
    }
    for fn in runs.values():
        fn()  # warm-up
    for _ in range(repeats):  # interleaved, so a load spike on the machine hits both alike
        for name, fn in runs.items():
            timings[name].append(common.timed(fn)[0])
    return {
        **{k: statistics.median(v) for k, v in timings.items()},
        "diff": float((fused - recorded).abs().max()),
        "bytes": trace_bytes(trace),
        "fused_bytes": trace_bytes(fused_trace),
    }


def run(args) -> str:
    common.setup(args)
    ckpts, what = common.load_all(args)
    sizes = QUICK_SIZES if args.quick else SIZES
    repeats = min(args.repeats, 3) if args.quick else args.repeats
    table = common.Table(
        [
            "model",
            "tokens",
            "record=True",
            "record=False (fused SDPA)",
            "record / no-record",
            "trace tensors (record=True)",
            "trace tensors (record=False)",
            "logits max abs diff",
        ],
        [],
    )
    diffs: list[float] = []
    for ckpt in ckpts:
        for n in sizes:
            if n > ckpt.config.max_len:
                table.rows.append([ckpt.name, n, *[f"n/a (max_len {ckpt.config.max_len})"] * 6])
                continue
            m = measure(ckpt, n, repeats)
            diffs.append(m["diff"])
            table.rows.append(
                [
                    ckpt.name,
                    n,
                    common.ms(m["record"]),
                    common.ms(m["no_record"]),
                    f"{m['record'] / m['no_record']:.2f}×",
                    common.kib(m["bytes"]),
                    common.kib(m["fused_bytes"]),
                    f"{m['diff']:.1e} ({'ok' if m['diff'] <= TOLERANCE else 'FAIL'})",
                ]
            )
    worst = max(diffs, default=0.0)
    status = "within" if worst <= TOLERANCE else "OUTSIDE"
    return common.emit(
        [
            common.header("Cost of recording the trace (bench/recording_cost.py)", what, ckpts),
            f"One forward pass (batch of one) of the same model, median of {repeats} interleaved runs. "
            "Encoder-decoder: N source and N target tokens, teacher-forced. record=False keeps only the keys, "
            "values and masks (the decoding cache).\n",
            table.markdown(),
            f"Check: record=False logits vs record=True logits, largest difference {worst:.1e}, {status} "
            f"{TOLERANCE:g} (last column).",
            "",
        ]
    )


def main(argv=None) -> None:
    run(common.parser(__doc__.splitlines()[0]).parse_args(argv))


if __name__ == "__main__":
    main()
