"""What recording every head costs: the instrumented forward (record=True) against record=False and against the same
weights run through PyTorch's fused `scaled_dot_product_attention`.

The SDPA variant is written here (sdpa_forward below), not patched into the model: it walks the model's own modules
(embeddings, positions, residual/LayerNorm blocks, feed-forward, output projection) and replaces only the explicit
softmax(QKᵀ/√d)·V with F.scaled_dot_product_attention under the same boolean masks. Its logits are checked
against the instrumented forward's (max abs difference ≤ 1e-4) and the check is printed.

Inputs are random ordinary token ids of exactly N positions (an encoder-decoder gets N source and N target tokens,
teacher-forced); no tokenizer or generation is involved.

    python bench/recording_cost.py [--repeats N] [--quick] [--checkpoints DIR] [--tiny]
"""

from __future__ import annotations

import statistics

import common
import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from model.attention import MultiHeadedAttention
from model.functional import attention_mask, padding_mask
from model.transformer import DecoderLayer, EncoderDecoder, EncoderLayer, TransformerBase

SIZES = (16, 64, 256, 512)
QUICK_SIZES = (16, 64)
TOLERANCE = 1e-4


def sdpa_attention(mha: MultiHeadedAttention, query: Tensor, key_value: Tensor, mask: Tensor) -> Tensor:
    """The module's projections around F.scaled_dot_product_attention; `mask` (B, Tq, Tk), True = may attend."""
    q = mha.split_heads(mha.w_q(query))
    k, v = mha.project_kv(key_value)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.unsqueeze(1))  # (B, H, Tq, d_head)
    b, _, tq, _ = heads.shape
    return mha.w_o(heads.transpose(1, 2).reshape(b, tq, mha.n_heads * mha.d_head))


def sdpa_encoder_layer(layer: EncoderLayer, x: Tensor, mask: Tensor) -> Tensor:
    h = layer.sublayer[0].input(x)
    x = layer.sublayer[0].output(x, sdpa_attention(layer.self_attn, h, h, mask))
    return layer.sublayer[1].output(x, layer.feed_forward(layer.sublayer[1].input(x)))


def sdpa_decoder_layer(
    layer: DecoderLayer, x: Tensor, self_mask: Tensor, memory: Tensor | None, cross_mask: Tensor | None
) -> Tensor:
    h = layer.sublayer[0].input(x)
    x = layer.sublayer[0].output(x, sdpa_attention(layer.self_attn, h, h, self_mask))
    if layer.cross_attn is not None:
        h = layer.sublayer[1].input(x)
        x = layer.sublayer[1].output(x, sdpa_attention(layer.cross_attn, h, memory, cross_mask))
    last = layer.sublayer[-1]
    return last.output(x, layer.feed_forward(last.input(x)))


@torch.no_grad()
def sdpa_forward(model: TransformerBase, *ids: Tensor) -> Tensor:
    """Logits of `model(source, target)` / `model(ids)` computed with fused attention and no trace."""
    cfg = model.config
    memory = source_valid = cross_mask = None
    target = ids[-1]
    if isinstance(model, EncoderDecoder):
        source = ids[0]
        source_valid = padding_mask(source, cfg.pad_id)
        x, _ = model.embed_with_positions(source)
        enc_mask = attention_mask(source_valid, source_valid)
        for layer in model.encoder.layers:
            x = sdpa_encoder_layer(layer, x, enc_mask)
        memory = model.encoder.norm(x)
    target_valid = padding_mask(target, cfg.pad_id)
    self_mask = attention_mask(target_valid, target_valid, causal=True)
    if source_valid is not None:
        cross_mask = attention_mask(target_valid, source_valid)
    x, _ = model.embed_with_positions(target)
    for layer in model.decoder.layers:
        x = sdpa_decoder_layer(layer, x, self_mask, memory, cross_mask)
    return model.generator(model.decoder.norm(x))


def trace_bytes(trace) -> int:
    """Bytes of every tensor the trace holds for attention (scores, weights, Q, K, V; masks counted once)."""
    total = 0
    for rec in trace.attention.values():
        for t in (rec.scores, rec.weights, rec.queries, rec.keys, rec.values):
            total += t.numel() * t.element_size()
    total += sum(m.numel() * m.element_size() for m in trace.masks.values())
    return total


def inputs(ckpt, n: int, seed: int = 0) -> tuple[Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    first = max(ckpt.config.pad_id, ckpt.config.unk_id, ckpt.config.bos_id, ckpt.config.eos_id) + 1
    ids = torch.randint(first, ckpt.config.vocab_size, (1, n), generator=gen)
    ids[0, 0] = ckpt.config.bos_id
    if ckpt.config.is_encoder_decoder:
        src = torch.randint(first, ckpt.config.vocab_size, (1, n), generator=gen)
        src[0, -1] = ckpt.config.eos_id
        return src, ids
    return (ids,)


@torch.no_grad()
def measure(ckpt, n: int, repeats: int) -> dict[str, float]:
    model = ckpt.model
    args = inputs(ckpt, n)
    ref, trace = model(*args)
    fused = sdpa_forward(model, *args)
    no_rec, _ = model(*args, record=False)
    timings: dict[str, list[float]] = {"record": [], "no_record": [], "sdpa": []}
    runs = {
        "record": lambda: model(*args),
        "no_record": lambda: model(*args, record=False),
        "sdpa": lambda: sdpa_forward(model, *args),
    }
    for fn in runs.values():
        fn()  # warm-up
    for _ in range(repeats):  # interleaved, so a load spike on the machine hits all three alike
        for name, fn in runs.items():
            timings[name].append(common.timed(fn)[0])
    return {
        **{k: statistics.median(v) for k, v in timings.items()},
        "diff_sdpa": float((fused - ref).abs().max()),
        "diff_norec": float((no_rec - ref).abs().max()),
        "bytes": trace_bytes(trace),
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
            "record=False",
            "fused SDPA",
            "record / no-record",
            "record / SDPA",
            "trace tensors",
            "SDPA logits max abs diff",
        ],
        [],
    )
    checks = []
    for ckpt in ckpts:
        for n in sizes:
            if n > ckpt.config.max_len:
                table.rows.append([ckpt.name, n, *[f"n/a (max_len {ckpt.config.max_len})"] * 7])
                continue
            m = measure(ckpt, n, repeats)
            ok = m["diff_sdpa"] <= TOLERANCE and m["diff_norec"] == 0.0
            checks.append(ok)
            table.rows.append(
                [
                    ckpt.name,
                    n,
                    common.ms(m["record"]),
                    common.ms(m["no_record"]),
                    common.ms(m["sdpa"]),
                    f"{m['record'] / m['no_record']:.2f}×",
                    f"{m['record'] / m['sdpa']:.2f}×",
                    common.kib(m["bytes"]),
                    f"{m['diff_sdpa']:.1e} ({'ok' if ok else 'FAIL'})",
                ]
            )
    status = "all within" if all(checks) else "SOME OUTSIDE"
    return common.emit(
        [
            common.header("Cost of recording the trace (bench/recording_cost.py)", what, ckpts),
            f"One forward pass (batch of one), median of {repeats} interleaved runs. Encoder-decoder: N source and "
            "N target tokens, teacher-forced.\n",
            table.markdown(),
            f"Check: SDPA logits vs instrumented logits, {status} {TOLERANCE:g} (last column); record=False "
            "logits identical to record=True: " + ("yes" if all(checks) else "see FAIL rows") + ".",
            "",
        ]
    )


def main(argv=None) -> None:
    run(common.parser(__doc__.splitlines()[0]).parse_args(argv))


if __name__ == "__main__":
    main()
