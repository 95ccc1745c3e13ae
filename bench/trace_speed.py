"""Server-side time from text to the two Explore charts, per model and input length.

For each shipped model and 16, 32, 64, 256, 512 tokens (an input analyze() turns into exactly that many):
  analyze     analyze() (what ui.run_model computes on a cache miss; for an
              encoder-decoder this includes greedy decoding of the output, as in the app)
  charts      building the one-head heatmap and the all-heads grid (viz.heads) and turning both into the JSON
              st.plotly_chart sends (to_dict + plotly.io.to_json)
  switch head the one-head chart of another head from the already computed trace, with its JSON
  fragment    what the Explore page's head fragment redoes on a head change: the one-head chart and the grid
              (with the new head highlighted), both with their JSON (the CSV is built only when downloaded)
Every repeat uses a different text of the same length (nothing is served from a cache).

    python bench/trace_speed.py [--repeats N] [--quick] [--checkpoints DIR] [--tiny]
"""

from __future__ import annotations

import statistics

import common

SIZES = (16, 32, 64, 256, 512)
QUICK_SIZES = (16, 32)
TARGET_TOTAL_S = 0.100  # trace + figures at 32 tokens
TARGET_SWITCH_S = 0.050  # switching head


def measure(ckpt, n: int, repeats: int) -> dict[str, float | str]:
    analyze_t, charts_t, switch_t, fragment_t, totals = [], [], [], [], []
    tgt_len = 0
    for r in range(repeats + 1):  # run 0 warms up and is dropped
        text = common.text_of_tokens(ckpt, n, variant=1000 + r)
        t_an, a = common.timed(lambda text=text: common.analysis_of(ckpt, text))
        t_ch, _ = common.timed(lambda a=a: common.explore_render(a))
        attention = common.default_attention(a)
        other = min(1, a.sublayer(attention, 0).n_heads - 1)
        t_sw, _ = common.timed(lambda a=a, att=attention, h=other: common.spec_json(common.head_figure(a, att, 0, h)))

        def fragment(a=a, attention=attention, other=other):
            common.spec_json(common.head_figure(a, attention, 0, other))
            common.spec_json(common.grid_figure(a, attention, (0, other)))

        t_fr, _ = common.timed(fragment)
        if r == 0:
            continue
        tgt_len = len(a.target_pieces)
        analyze_t.append(t_an)
        charts_t.append(t_ch)
        totals.append(t_an + t_ch)
        switch_t.append(t_sw)
        fragment_t.append(t_fr)
    med = statistics.median
    return {
        "analyze": med(analyze_t),
        "charts": med(charts_t),
        "total": med(totals),
        "switch": med(switch_t),
        "fragment": med(fragment_t),
        "tgt": tgt_len,
    }


def run(args) -> str:
    common.setup(args)
    ckpts, what = common.load_all(args)
    sizes = QUICK_SIZES if args.quick else SIZES
    repeats = min(args.repeats, 3) if args.quick else args.repeats
    table = common.Table(
        ["model", "tokens", "analyze", "charts (build + JSON)", "trace + charts", "switch head", "fragment rerun"],
        [],
    )
    at32: list[tuple[str, float, float]] = []
    for ckpt in ckpts:
        enc_dec = ckpt.config.has_cross_attention
        for n in sizes:
            if n > ckpt.config.max_len:
                table.rows.append([ckpt.name, n, *[f"n/a (max_len {ckpt.config.max_len})"] * 5])
                continue
            m = measure(ckpt, n, repeats)
            label = f"{n} (output {m['tgt']})" if enc_dec else str(n)
            table.rows.append(
                [
                    ckpt.name,
                    label,
                    common.ms(m["analyze"]),
                    common.ms(m["charts"]),
                    f"**{common.ms(m['total'])}**",
                    common.ms(m["switch"]),
                    common.ms(m["fragment"]),
                ]
            )
            if n == 32:
                at32.append((ckpt.name, m["total"], m["switch"]))
    lines = [
        common.header("Trace + charts, server side (bench/trace_speed.py)", what, ckpts),
        f"Median of {repeats} runs, each on a different text of exactly that many tokens (bos/eos included; an "
        "encoder-decoder's analyze() also decodes its output greedily, up to 64 tokens, shown in brackets).\n",
        table.markdown(),
        "Targets (not assertions):",
    ]
    for name, total, switch in at32:
        lines.append(
            f"- {name}: trace + charts at 32 tokens {common.ms(total)} (target ≤ 100 ms: "
            f"{common.verdict(total, TARGET_TOTAL_S)}); switching head {common.ms(switch)} "
            f"(target ≤ 50 ms: {common.verdict(switch, TARGET_SWITCH_S)})"
        )
    return common.emit(lines + [""])


def main(argv=None) -> None:
    run(common.parser(__doc__.splitlines()[0]).parse_args(argv))


if __name__ == "__main__":
    main()
