"""The CPU one typed sentence costs Explore, in-process: app.py in Streamlit's AppTest, no server, no websocket.

A first look at what a change to the page's own Python saves (bench/classroom.py measures the whole path a class
takes). Two warm-up sentences, then N distinct sentences typed one after another; prints the median and the least
CPU seconds (user + system, this process) a typed page, with the load.

    python bench/page_cpu.py [--model lm-english] [--sentences 12]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def sentences(count: int) -> list[str]:
    words = [(a, b, c) for a in ("cat", "dog", "teacher", "girl") for b in ("sat", "walked", "slept") for c in
             ("door", "river", "school")]  # fmt: skip
    return [f"The {a} {b} near the {c} this morning." for a, b, c in words][:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lm-english")
    parser.add_argument("--sentences", type=int, default=12, help="typed sentences timed (at most 36)")
    args = parser.parse_args(argv)
    os.environ.setdefault("ATLAS_CHECKPOINTS", str(ROOT / "checkpoints"))
    sys.path.insert(0, str(ROOT))
    import torch
    from streamlit.testing.v1 import AppTest

    torch.set_num_threads(1)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["model"] = args.model
    at.run()
    for text in ("A warm sentence to start.", "Another one before timing."):
        at.text_area(key="text").set_value(text)
        at.run()
    costs = []
    for text in sentences(args.sentences):
        at.text_area(key="text").set_value(text)
        start = cpu()
        at.run()
        costs.append(cpu() - start)
        if at.exception:
            print(f"error: the page raised {at.exception[0].value}", file=sys.stderr)
            return 1
    print(
        f"{args.model}: CPU a typed page median {statistics.median(costs) * 1000:.1f} ms, least "
        f"{min(costs) * 1000:.1f} ms over {len(costs)} sentences (load {os.getloadavg()[0]:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
