"""Every circuit function of atlas on device="cuda" against device="cpu": a tiny transformers GPT-2 and Llama
(mapped objects) and the shipped lm-english checkpoint. Prints the largest difference of each and any failure;
needs a CUDA GPU (run on the device machine).

    python bench/any_model_device.py
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_any_model import OTHER, TEXT, tiny_gpt2, tiny_llama, word_tokenizer

import atlas


def frame_gap(a, b) -> float:
    numbers = [c for c in a.columns if a[c].dtype.kind == "f"]
    return float(np.nanmax(np.abs(a[numbers].to_numpy() - b[numbers].to_numpy()))) if numbers else 0.0


def run(label: str, model, kw: dict, text: str, other: str, answer, versus) -> None:
    calls = {
        "analyze": lambda d: atlas.analyze(model, [text, other], device=d, **kw),
        "logit_attribution_scores": lambda d: atlas.logit_attribution_scores(model, [text, other], device=d, **kw)[1],
        "patch_scores": lambda d: atlas.patch_scores(model, text, other, answer, versus, device=d, **kw),
        "patch_scores approximate": lambda d: atlas.patch_scores(
            model, text, other, answer, versus, approximate=True, device=d, **kw
        ),
        "composition_scores": lambda d: atlas.composition_scores(model, centre=True, baseline=0, device=d, **kw),
        "logit_lens table": lambda d: atlas.logit_lens(model, text, as_table=True, device=d, **kw),
        "logit_lens": lambda d: atlas.logit_lens(model, text, device=d, **kw),
    }
    for name, call in calls.items():
        try:
            cpu = call("cpu")
            start = time.perf_counter()
            gpu = call("cuda")
            took = time.perf_counter() - start
            if name == "analyze":
                gap = max(
                    float(np.abs(x.sublayer(n, 0).weights - y.sublayer(n, 0).weights).max())
                    for x, y in zip(cpu, gpu, strict=True)
                    for n in x.attentions
                )
            elif name == "logit_lens":
                gap = float(np.abs(np.asarray(cpu.data[0].z) - np.asarray(gpu.data[0].z)).max())
            else:
                gap = frame_gap(cpu, gpu)
            print(f"{label:10} {name:26} max |cpu - cuda| {gap:.2e}  cuda call {took * 1000:.0f} ms")
        except Exception:
            print(f"{label:10} {name:26} FAILED")
            traceback.print_exc(limit=-4)


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no cuda")
    tok = word_tokenizer()
    run("gpt2", tiny_gpt2(), {"tokenizer": tok}, TEXT, OTHER, "mat", "rug")
    run("llama", tiny_llama(), {"tokenizer": tok}, TEXT, OTHER, "mat", "rug")
    lm = atlas.load("lm-english")
    run("lm-english", lm, {}, "The cat sat on the mat and the dog", "The cat sat on the mat and the cat", None, None)
