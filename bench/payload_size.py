"""Bytes the browser receives for the Explore charts at 32, 128 and 256 tokens.

The size is the figure JSON st.plotly_chart puts in its message (to_dict + plotly.io.to_json), and that JSON
gzip'd (level 6, as a compressing proxy would send it). "one head" is the one-head heatmap; "grid" is the
all-heads grid of the attention type the page opens on; "all types" adds up the grids of every attention type
of the model (encoder self, decoder self and cross for an encoder-decoder), which is what bertviz's model_view
puts in one page.

    python bench/payload_size.py [--quick] [--checkpoints DIR] [--tiny]
"""

from __future__ import annotations

import gzip

import common

SIZES = (32, 128, 256)
QUICK_SIZES = (32,)


def sizes_of(text: str) -> tuple[int, int]:
    raw = text.encode("utf-8")
    return len(raw), len(gzip.compress(raw, compresslevel=6))


def all_heads_json(analysis: common.Analysis) -> list[str]:
    """Every attention type's grid as sent (one chart per type)."""
    return [common.spec_json(common.grid_figure(analysis, a, (0, 0))) for a in analysis.attentions]


def measure(ckpt, n: int) -> dict[str, tuple[int, int]]:
    analysis = common.analysis_of(ckpt, common.text_of_tokens(ckpt, n))
    one, grid = common.explore_render(analysis)
    everything = all_heads_json(analysis)
    all_raw = sum(sizes_of(s)[0] for s in everything)
    all_gz = sum(sizes_of(s)[1] for s in everything)
    return {"one": sizes_of(one), "grid": sizes_of(grid), "all": (all_raw, all_gz), "groups": len(everything)}


def run(args) -> str:
    common.setup(args)
    ckpts, what = common.load_all(args)
    sizes = QUICK_SIZES if args.quick else SIZES
    table = common.Table(
        ["model", "tokens", "one head", "one head gzip", "grid", "grid gzip", "all types", "all types gzip"], []
    )
    for ckpt in ckpts:
        for n in sizes:
            if n > ckpt.config.max_len:
                table.rows.append([ckpt.name, n, *[f"n/a (max_len {ckpt.config.max_len})"] * 6])
                continue
            m = measure(ckpt, n)
            table.rows.append(
                [
                    ckpt.name,
                    n,
                    *(common.kib(b) for b in m["one"]),
                    *(common.kib(b) for b in m["grid"]),
                    *(f"{common.kib(b)} ({m['groups']} grid{'s' if m['groups'] > 1 else ''})" for b in m["all"]),
                ]
            )
    return common.emit(
        [
            common.header("Payload size (bench/payload_size.py)", what, ckpts),
            "Figure JSON as st.plotly_chart sends it, and gzip'd. Sizes are deterministic (one run).\n",
            table.markdown(),
        ]
    )


def main(argv=None) -> None:
    run(common.parser(__doc__.splitlines()[0]).parse_args(argv))


if __name__ == "__main__":
    main()
