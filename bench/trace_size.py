"""Bytes of a trace file at 32, 128 and 256 tokens, and what an opened one keeps in the server's memory.

"npz" and "json" are Explore's two "Whole analysis" downloads of the text (analysis.export: what a person uploads
on the page "Open a trace file"); "parsed" is the Analysis `read_trace` makes of the .npz, measured as the byte
budget measures it (inference.memory.measured_bytes): what the server keeps per opened file, once however many
sessions open it; "traces kept" is how many such files the trace store (ui.cache.TRACES, its share of the budget)
holds at once before the least recently drawn is let go. It leaves out the upload itself (Streamlit holds a file's
bytes while it is read, then the page drops them) and the figures drawn from the trace (kept like a model's).

    python bench/trace_size.py [--quick] [--checkpoints DIR] [--tiny]
"""

from __future__ import annotations

import common

from analysis.export import to_json, to_npz_bytes
from analysis.imported import read_trace
from inference.memory import measured_bytes
from ui.kept import SHARE

SIZES = (32, 128, 256)
QUICK_SIZES = (32,)


def measure(ckpt, n: int) -> dict[str, int]:
    analysis = common.analysis_of(ckpt, common.text_of_tokens(ckpt, n))
    npz = to_npz_bytes(analysis)
    parsed = read_trace(npz, "trace.npz")
    return {"npz": len(npz), "json": len(to_json(analysis).encode("utf-8")), "parsed": measured_bytes(parsed)}


def run(args) -> str:
    common.setup(args)
    ckpts, what = common.load_all(args)
    sizes = QUICK_SIZES if args.quick else SIZES
    table = common.Table(["model", "tokens", "npz", "json", "parsed", "traces kept"], [])
    for ckpt in ckpts:
        for n in sizes:
            if n > ckpt.config.max_len:
                table.rows.append([ckpt.name, n, *[f"n/a (max_len {ckpt.config.max_len})"] * 4])
                continue
            m = measure(ckpt, n)
            kept = SHARE // m["parsed"]
            table.rows.append([ckpt.name, n, *(common.kib(m[k]) for k in ("npz", "json", "parsed")), f"{kept:,}"])
    return common.emit(
        [
            common.header("Trace file size (bench/trace_size.py)", what, ckpts),
            f"Explore's downloads of the text, and the Analysis the server keeps per opened file (a store of "
            f"{common.kib(SHARE)}). Sizes are deterministic (one run).\n",
            table.markdown(),
        ]
    )


def main(argv=None) -> None:
    run(common.parser(__doc__.splitlines()[0]).parse_args(argv))


if __name__ == "__main__":
    main()
