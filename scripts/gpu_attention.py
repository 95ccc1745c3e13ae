"""Check and time the translator's training step under each way of computing its attention, on its own batches.

The translator's batches differ in shape from step to step (pairs sorted into buckets by length: a few hundred rows
of a few dozen tokens), the language model's never do, and cuDNN's attention kernel plans every new shape. "code"
below is the model's fused path with torch's own choice of kernel, cuDNN allowed. Every variant computes the same
softmax(QKᵀ/√d_k)V under the same mask, and on the CPU the fused and explicit paths agree (tests/test_attention.py);
on a GPU each kernel is first checked against the explicit arithmetic on a real batch (float32, dropout off). The
training command computes the heads explicitly on a GPU (training.batches.explicit_heads) until a kernel is shown
equal there. Variants are timed in turn on the same batches: a kernel that plans per shape is slow only the first
time it meets one, so give --warm no fewer steps than --timed.

    python scripts/gpu_attention.py                       # the check and the table (cuda, bfloat16 as training)
    python scripts/gpu_attention.py --train -- ARGS...    # then training.train ARGS, fused, under the fastest
    python scripts/gpu_attention.py --use NAME --train -- ARGS...   # under NAME, checking and timing none

Prints one JSON line a variant for the check (largest differences from the explicit arithmetic) and for the timing
(milliseconds a step over the timed steps, or the error it raised), and the profiler's top CUDA kernels for the
variant the code uses now.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812 (as model/attention.py)
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inference.tokenizer import Tokenizer
from model.attention import MultiHeadedAttention, masked_softmax
from model.factory import build_model
from model.forward import forward
from training.batches import encode_pairs, pair_batches
from training.loop import build
from training.tasks import TASKS, data_dir

CODE = MultiHeadedAttention.fused  # what the repository's model runs now


def with_backends(*backends: SDPBackend):
    def fused(self, q, k, v, mask):
        with sdpa_kernel(list(backends)):
            return CODE(self, q, k, v, mask)

    return fused


def float_mask(self, q, k, v, mask):
    """The mask as an additive bias in the queries' dtype (0 where allowed, -inf elsewhere)."""
    any_allowed = mask.any(dim=-1, keepdim=True)
    allowed = (mask | ~any_allowed).unsqueeze(1)
    bias = torch.zeros(allowed.shape, dtype=q.dtype, device=q.device).masked_fill(~allowed, float("-inf"))
    p = self.dropout.p if self.training else 0.0
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p)
    return heads.masked_fill(~any_allowed.unsqueeze(1), 0.0)


def explicit(self, q, k, v, mask):
    """The record path's arithmetic (MultiHeadedAttention.forward with record=True), without keeping the weights."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
    return self.dropout(masked_softmax(scores, mask.unsqueeze(1))) @ v


VARIANTS = {
    "code": CODE,
    "no-cudnn": with_backends(SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH),
    "efficient": with_backends(SDPBackend.EFFICIENT_ATTENTION),
    "math": with_backends(SDPBackend.MATH),
    "cudnn": with_backends(SDPBackend.CUDNN_ATTENTION),
    "float-mask": float_mask,
    "explicit": explicit,
}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def pair_loss(model: nn.Module, batch, criterion: nn.Module) -> torch.Tensor:
    """The training loss of a (source, target) batch on the fused path (record=False), where each variant runs."""
    device = next(model.parameters()).device
    source, target = (t.to(device) for t in batch)
    logits, _ = forward(model, target[:, :-1], source, record=False)
    return criterion(logits.reshape(-1, logits.shape[-1]), target[:, 1:].reshape(-1))


def check_variants(model: nn.Module, batch, criterion: nn.Module) -> None:
    """Each variant against the explicit arithmetic on one real batch, in float32 with dropout off: the largest
    difference of the logits and of the gradients (relative to the largest gradient), one JSON line each."""
    model.eval()  # dropout off: the variants draw their dropout masks differently

    def grads_and_logits(fused):
        MultiHeadedAttention.fused = fused
        model.zero_grad(set_to_none=True)
        device = next(model.parameters()).device
        source, target = (t.to(device) for t in batch)
        logits, _ = forward(model, target[:, :-1], source, record=False)
        criterion(logits.reshape(-1, logits.shape[-1]), target[:, 1:].reshape(-1)).backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        return logits.detach(), grads

    reference_logits, reference_grads = grads_and_logits(explicit)
    scale = float(reference_grads.abs().max())
    for name, fused in VARIANTS.items():
        try:
            logits, grads = grads_and_logits(fused)
            diff = {
                "logits_max_diff": float((logits - reference_logits).abs().max()),
                "grads_max_diff_relative": float((grads - reference_grads).abs().max()) / scale,
            }
        except Exception as exc:
            diff = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        print(json.dumps({f"{name} vs explicit (float32)": diff}), flush=True)
    MultiHeadedAttention.fused = CODE
    model.zero_grad(set_to_none=True)
    model.train()


def time_variants(device: torch.device, warm: int, timed: int, data: Path) -> dict[str, dict]:
    spec = TASKS["translate"]
    folder = data_dir("translate", data)
    tok = Tokenizer.from_file(folder / "tokenizer.model")
    torch.manual_seed(0)
    model = build_model(build(spec, tok)).train().to(device)
    pairs = encode_pairs(tok, folder, "train", spec.max_train_len)
    source = pair_batches(pairs, spec.batch_tokens, random.Random(0), tok.pad_id)
    batches = [next(source) for _ in range(warm + timed)]  # the same batches, shapes varying, for every variant
    print(json.dumps({"rows": [b[0].shape[0] for b in batches], "widths": [b[1].shape[1] for b in batches]}))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    criterion = nn.CrossEntropyLoss(ignore_index=tok.pad_id, label_smoothing=spec.label_smoothing)

    def step(batch) -> float:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            loss = pair_loss(model, batch, criterion)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()

    check_variants(model, batches[warm], criterion)
    results = {}
    for name, fused in VARIANTS.items():
        MultiHeadedAttention.fused = fused
        try:
            for batch in batches[:warm]:
                step(batch)
            sync(device)
            begun = time.perf_counter()
            for batch in batches[warm:]:
                step(batch)
            sync(device)
            results[name] = {"ms_per_step": round(1000 * (time.perf_counter() - begun) / timed, 1)}
        except Exception as exc:  # a backend that refuses these inputs is a result, not a failure
            results[name] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        print(json.dumps({name: results[name]}), flush=True)
    MultiHeadedAttention.fused = CODE
    if device.type == "cuda":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for batch in batches[warm : warm + 3]:
                step(batch)
            sync(device)
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60))
    return results


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    rest: list[str] = []
    if "--" in argv:
        argv, rest = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--data", type=Path, default=Path("data"))
    parser.add_argument("--warm", type=int, default=4)
    parser.add_argument("--timed", type=int, default=12)
    parser.add_argument("--train", action="store_true", help="then train with the arguments after --")
    parser.add_argument("--use", choices=sorted(VARIANTS), help="train under this variant, timing none")
    args = parser.parse_args(argv)
    if args.use:
        fastest = args.use
    else:
        results = time_variants(torch.device(args.device), args.warm, args.timed, args.data)
        timed = {k: v["ms_per_step"] for k, v in results.items() if "ms_per_step" in v}
        fastest = min(timed, key=timed.get)
        print(json.dumps({"fastest": fastest, "ms_per_step": timed[fastest], "code": timed.get("code")}), flush=True)
    if not args.train:
        return 0
    from training import batches, train

    MultiHeadedAttention.fused = VARIANTS[fastest]
    batches.explicit_heads = lambda device: False  # the fused path, so that the chosen variant runs
    print(f"training under {fastest}: python -m training.train {' '.join(rest)}", file=sys.stderr, flush=True)
    return train.main(rest)


if __name__ == "__main__":
    sys.exit(main())
