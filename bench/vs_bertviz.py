"""Our charts against bertviz on the same attention tensors: bytes sent to the browser and time to build them.

For 32, 128 and 256 tokens our model's Analysis is handed to bertviz as it expects it (per layer a (1, H, T, T)
tensor; an encoder-decoder's encoder, decoder and cross attention separately) and rendered with
`model_view(..., html_action="return")` and `head_view(..., html_action="return")`. They are compared with:
  model_view ↔ our all-heads grids of every attention type (figure JSON as st.plotly_chart sends it)
  head_view  ↔ our one-head chart (the app sends one head; another head is one more round trip)
bertviz's page is not self-contained: it loads require.js, d3 and jquery from a CDN, so it renders nothing
offline. The script greps the returned HTML for the https:// sources it loads and prints them.

Install bertviz without its declared dependencies (transformers, boto3, …: its two views never import them):
    pip install --no-deps -r requirements-bench.txt
    python bench/vs_bertviz.py [--repeats N] [--quick] [--checkpoints DIR] [--tiny]
"""

from __future__ import annotations

import re
import statistics

import common
import torch

SIZES = (32, 128, 256)
QUICK_SIZES = (32,)
TARGET_RATIO = 20  # our all-heads payload at 256 tokens ≤ 1/20 of bertviz's HTML
INSTALL = "pip install --no-deps -r requirements-bench.txt"
PROBE_PIECE = "</script><script>alert(1)</script>"


def bertviz_inputs(analysis: common.Analysis) -> dict:
    """Our Analysis in bertviz's argument form: tuples of (1, H, Tq, Tk) tensors per layer, and the pieces."""

    def layers(attention: str) -> tuple[torch.Tensor, ...]:
        return tuple(torch.from_numpy(w).unsqueeze(0) for w in analysis.stacked(attention))

    if analysis.source_pieces is None:
        return {"attention": layers("decoder.self_attn"), "tokens": list(analysis.target_pieces)}
    return {
        "encoder_attention": layers("encoder.self_attn"),
        "decoder_attention": layers("decoder.self_attn"),
        "cross_attention": layers("decoder.cross_attn"),
        "encoder_tokens": list(analysis.source_pieces),
        "decoder_tokens": list(analysis.target_pieces),
    }


def external_sources(html: str) -> list[str]:
    """Every https:// address the page loads scripts from: <script src=…> and require.config paths."""
    found = re.findall(r"""<script[^>]*\bsrc=["'](https?://[^"']+)""", html)
    found += re.findall(r"""\w+\s*:\s*['"](https?://[^'"]+)['"]""", html)
    return sorted(set(found))


def script_breakout(bertviz) -> bool:
    """True when a token piece such as `</script>…` reaches bertviz's HTML unescaped (it would end its script)."""
    attn = (torch.full((1, 1, 2, 2), 0.5),)
    html = bertviz.model_view(attn, ["a", PROBE_PIECE], html_action="return").data
    return PROBE_PIECE in html


def measure(bertviz, ckpt, n: int, repeats: int) -> dict:
    analysis = common.analysis_of(ckpt, common.text_of_tokens(ckpt, n))
    kwargs = bertviz_inputs(analysis)
    attention = common.default_attention(analysis)

    def bv_model():
        return bertviz.model_view(**kwargs, html_action="return").data

    def bv_head():
        return bertviz.head_view(**kwargs, html_action="return").data

    def ours_all():
        return [common.spec_json(common.grid_figure(analysis, a, (0, 0))) for a in analysis.attentions]

    def ours_head():
        return common.spec_json(common.head_figure(analysis, attention, 0, 0))

    out = {}
    for name, fn in (("bv_model", bv_model), ("bv_head", bv_head), ("ours_all", ours_all), ("ours_head", ours_head)):
        result = fn()
        out[name + "_bytes"] = (
            sum(len(s.encode()) for s in result) if isinstance(result, list) else len(result.encode())
        )
        if name == "bv_model":
            out["sources"] = external_sources(result)
        out[name + "_s"] = statistics.median(common.timed(fn)[0] for _ in range(repeats))
    return out


def run(args) -> str:
    common.setup(args)
    try:
        import bertviz
    except ImportError:
        return common.emit([f"bertviz is not installed; run: {INSTALL}", ""])
    ckpts, what = common.load_all(args)
    sizes = QUICK_SIZES if args.quick else SIZES
    repeats = min(args.repeats, 3) if args.quick else args.repeats
    table = common.Table(
        [
            "model",
            "tokens",
            "bertviz model_view HTML",
            "our all-heads JSON",
            "bytes ratio",
            "bertviz build",
            "our build",
            "time ratio",
            "bertviz head_view HTML",
            "our one-head JSON",
            "bytes ratio",
        ],
        [],
    )
    sources: set[str] = set()
    at256 = []
    for ckpt in ckpts:
        for n in sizes:
            if n > ckpt.config.max_len:
                table.rows.append([ckpt.name, n, *[f"n/a (max_len {ckpt.config.max_len})"] * 9])
                continue
            m = measure(bertviz, ckpt, n, repeats)
            sources.update(m["sources"])
            ratio = m["bv_model_bytes"] / m["ours_all_bytes"]
            if n == 256:
                at256.append((ckpt.name, ratio))
            table.rows.append(
                [
                    ckpt.name,
                    n,
                    common.kib(m["bv_model_bytes"]),
                    common.kib(m["ours_all_bytes"]),
                    f"**{ratio:.0f}×**",
                    common.ms(m["bv_model_s"]),
                    common.ms(m["ours_all_s"]),
                    f"{m['bv_model_s'] / m['ours_all_s']:.1f}×",
                    common.kib(m["bv_head_bytes"]),
                    common.kib(m["ours_head_bytes"]),
                    f"{m['bv_head_bytes'] / m['ours_head_bytes']:.0f}×",
                ]
            )
    lines = [
        common.header(f"Against bertviz {bertviz_version()} (bench/vs_bertviz.py)", what, ckpts),
        f"Same attention tensors; build time is the median of {repeats} runs (bertviz: the model_view call; ours: "
        "building every attention type's grid and its JSON). Ratios are bertviz ÷ ours, from the same run.\n",
        table.markdown(),
        "Target (not an assertion): our all-heads payload at 256 tokens ≤ 1/20 of bertviz's HTML.",
    ]
    lines += [f"- {name}: bertviz is {r:.0f}× larger ({common.verdict(TARGET_RATIO, r)})" for name, r in at256]
    lines += [
        "",
        "bertviz's HTML is not self-contained: it loads its scripts from a CDN and renders nothing offline. "
        "Script sources found in the returned HTML:",
        *[f"- `{s}`" for s in sorted(sources)],
        "",
        f"bertviz puts token text into its page unescaped: a piece `{PROBE_PIECE}` appears verbatim in the HTML "
        f"(ends bertviz's own <script>): {'yes' if script_breakout(bertviz) else 'no'}.",
        "",
    ]
    return common.emit(lines)


def bertviz_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bertviz")
    except PackageNotFoundError:
        return "?"


def main(argv=None) -> None:
    run(common.parser(__doc__.splitlines()[0]).parse_args(argv))


if __name__ == "__main__":
    main()
