"""Hostile inputs (tests/hostile_inputs.json, plus lone surrogates made here) through the CLI, analyze() and the app.

(a) `python -m atlas trace CKPT --input-file F.jsonl -o OUT` in-process on tiny checkpoints of both kinds: one
    output line per input, each a valid trace object (docs/trace-format.md) (rows of weights sum to 1, no NaN) or
    {"input": …, "error": …} with a plain message; never a crash.
(b) analyze() on every input: an Analysis with finite weights, or InputError.
(c) The Streamlit app (AppTest) on the nastiest dozen: no exception element, no "Something went wrong", and no
    raw `<script`/`<img`/`<a ` in any chart's JSON (token text must reach Plotly escaped, e.g. `&lt;script`).

An entry of hostile_inputs.json is {"name", "text"} with an optional "repeat": the text repeated that many times
(keeps the file small for the 100k-character cases).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from analysis.analyze import analyze
from analysis.export import FORMAT
from analysis.record import Analysis
from atlas.cli import main as cli_main
from inference.checkpoint import load_checkpoint
from inference.text import InputError
from training.tiny import make_tiny_checkpoint

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("decoder-only", "encoder-decoder")
NAMES = {"decoder-only": "tiny-lm", "encoder-decoder": "tiny-enc-dec"}
ROW_TOLERANCE = 1e-3  # weights are rounded to 6 digits in the trace file: a row of n may be off by n × 5e-7
MAX_LEN = 32  # short sequences keep the ~90 inputs × 2 models fast; long inputs are still cut at max_len


def load_cases() -> list[tuple[str, str]]:
    raw = json.loads((ROOT / "tests" / "hostile_inputs.json").read_text(encoding="utf-8"))
    return [(c["name"], c["text"] * c.get("repeat", 1)) for c in raw]


CASES = load_cases()

# Lone surrogates cannot come from a browser or a UTF-8 file, but a JSON string escape or Python code makes them.
SURROGATE_CASES = [
    ("lone_low_surrogate", "\udcff"),
    ("lone_high_surrogate_inside", "abc\ud800def"),
    ("half_an_emoji", "smile \ud83d please"),
    ("surrogateescape_bytes", b"caf\xe9 cr\xe8me".decode("utf-8", "surrogateescape")),
]

# The dozen the app gets: empty/blank, controls, huge, emoji, bidi, zalgo, markup and template injection, specials.
APP_SUBSET = (
    "empty",
    "mixed_ascii_whitespace",
    "c0_controls",
    "text_100k_chars",
    "emoji_zwj_family",
    "bidi_overrides",
    "zalgo",
    "script_tag",
    "img_onerror",
    "script_breakout",
    "markdown_js_link",
    "template_jinja",
    "sp_specials_in_text",
)

BLANK = ("empty", "mixed_ascii_whitespace")  # the app answers these with its "text is empty" message


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoints folder holding one tiny untrained checkpoint of each kind."""
    root = tmp_path_factory.mktemp("hostile-checkpoints")
    for kind in KINDS:
        make_tiny_checkpoint(root / NAMES[kind], kind, seed=0, max_len=MAX_LEN)
    return root


@pytest.fixture(scope="module")
def ckpts(hostile_dir: Path) -> dict:
    return {kind: load_checkpoint(hostile_dir / NAMES[kind]) for kind in KINDS}


def _reject_constant(name: str):
    raise ValueError(f"non-finite number {name} in the JSON output")


def check_trace_object(obj: dict) -> None:
    """A trace object of the documented format: weights rows sum to 1 (masked cells 0), shapes match the tokens."""
    assert obj["format"] == FORMAT, obj.keys()
    assert obj["attention"], "no attention sub-layers"
    for sublayer in obj["attention"]:
        weights = sublayer["weights"]
        queries, keys = sublayer["queries"], sublayer["keys"]
        assert len(weights[0]) == len(queries) and len(weights[0][0]) == len(keys), sublayer["name"]
        for head in weights:
            for q, row in enumerate(head):
                assert all(isinstance(v, float | int) and math.isfinite(v) for v in row)
                assert abs(sum(row) - 1.0) <= ROW_TOLERANCE, (sublayer["name"], q, sum(row))
    for step in obj["predictions"]:
        assert all(math.isfinite(t["prob"]) for t in step["top"])


def check_error_line(obj: dict, text: str) -> None:
    assert set(obj) == {"input", "error"}, obj.keys()
    assert obj["input"] == text
    assert isinstance(obj["error"], str) and obj["error"].strip()
    assert "Traceback" not in obj["error"] and 'File "' not in obj["error"]


def run_cli(ckpt_dir: Path, texts: list[str], tmp_path: Path, capsys: pytest.CaptureFixture) -> list[dict]:
    """`trace --input-file F.jsonl -o OUT` in-process; the parsed output lines (NaN/Infinity rejected)."""
    infile, outfile = tmp_path / "inputs.jsonl", tmp_path / "out.jsonl"
    infile.write_text("".join(json.dumps(t) + "\n" for t in texts), encoding="utf-8")
    code = cli_main(["trace", str(ckpt_dir), "--input-file", str(infile), "-o", str(outfile)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Traceback" not in err
    lines = outfile.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(texts), f"{len(lines)} output lines for {len(texts)} inputs"
    return [json.loads(line, parse_constant=_reject_constant) for line in lines]


def check_cli_output(objs: list[dict], cases: list[tuple[str, str]]) -> None:
    problems = {}
    for (name, text), obj in zip(cases, objs):
        try:
            if "error" in obj:
                check_error_line(obj, text)
            else:
                check_trace_object(obj)
        except (AssertionError, KeyError, TypeError, IndexError) as exc:
            problems[name] = repr(exc)[:300]
    assert not problems, problems


# (a) the CLI ---------------------------------------------------------------------------------------------------------


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
@pytest.mark.parametrize("kind", KINDS)
def test_cli_one_line_per_hostile_input(kind: str, hostile_dir: Path, tmp_path: Path, capsys) -> None:
    objs = run_cli(hostile_dir / NAMES[kind], [t for _, t in CASES], tmp_path, capsys)
    check_cli_output(objs, CASES)
    errors = {name for (name, _), obj in zip(CASES, objs) if "error" in obj}
    assert "empty" in errors and "plain_sentence" not in errors


@pytest.mark.parametrize("kind", KINDS)
def test_cli_txt_file_with_invalid_utf8_and_nul_bytes(kind: str, hostile_dir: Path, tmp_path: Path, capsys) -> None:
    infile, outfile = tmp_path / "inputs.txt", tmp_path / "out.jsonl"
    infile.write_bytes(b"caf\xe9 cr\xe8me\n\xff\xfe\x00\x00abc\n\xed\xa0\x80 surrogate bytes\n\x00\n\n   \nok\n")
    code = cli_main(["trace", str(hostile_dir / NAMES[kind]), "--input-file", str(infile), "-o", str(outfile)])
    assert code == 0
    assert "Traceback" not in capsys.readouterr().err
    objs = [json.loads(line, parse_constant=_reject_constant) for line in outfile.read_text("utf-8").splitlines()]
    assert len(objs) == 7
    for obj in objs:
        if "error" in obj:
            assert set(obj) == {"input", "error"} and "Traceback" not in obj["error"]
        else:
            check_trace_object(obj)


@pytest.mark.parametrize("kind", KINDS)
def test_cli_lone_surrogates(kind: str, hostile_dir: Path, tmp_path: Path, capsys) -> None:
    objs = run_cli(hostile_dir / NAMES[kind], [t for _, t in SURROGATE_CASES], tmp_path, capsys)
    check_cli_output(objs, SURROGATE_CASES)


# (b) analyze() -------------------------------------------------------------------------------------------------------


def check_analysis(result: Analysis) -> None:
    assert result.text.strip()
    for name, sublayer in result.sublayers.items():
        w = sublayer.weights
        assert np.isfinite(w).all(), name
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5, err_msg=name)
        assert not w[~np.broadcast_to(sublayer.mask, w.shape)].any(), f"{name}: weight on a masked cell"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("name", "text"), CASES, ids=[n for n, _ in CASES])
def test_analyze_gives_a_result_or_input_error(kind: str, name: str, text: str, ckpts: dict) -> None:
    try:
        result = analyze(ckpts[kind], text)
    except InputError as exc:
        assert str(exc).strip()
        return
    check_analysis(result)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("name", "text"), SURROGATE_CASES, ids=[n for n, _ in SURROGATE_CASES])
def test_analyze_lone_surrogates(kind: str, name: str, text: str, ckpts: dict) -> None:
    try:
        result = analyze(ckpts[kind], text)
    except InputError:
        return
    check_analysis(result)


# (c) the app ---------------------------------------------------------------------------------------------------------

RAW_MARKUP = ("<script", "<img", "<a ", "<svg", "javascript:alert")


def strings_in(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return []


def label_strings(fig: dict) -> list[str]:
    """Strings that carry token text: tick labels, customdata (hover), text, titles."""
    out: list[str] = []
    for trace in fig.get("data", []):
        for key in ("customdata", "text", "x", "y", "hovertext"):
            out += strings_in(trace.get(key))
    layout = fig.get("layout", {})
    for key, axis in layout.items():
        if key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            out += strings_in(axis.get("ticktext"))
            out += strings_in(axis.get("title"))
    out += strings_in(layout.get("title"))
    out += strings_in(layout.get("annotations"))
    return out


def app_problems(at) -> list[str]:
    """Exceptions, catch-all error boxes and unescaped markup in the page's charts."""
    problems = [f"exception: {e.value}" for e in at.exception]
    problems += [f"error box: {e.value}" for e in at.error if "Something went wrong" in e.value]
    for chart in at.get("plotly_chart"):
        spec = chart.proto.spec
        lowered = spec.lower()
        problems += [f"raw {m!r} in chart {chart.key}" for m in RAW_MARKUP if m in lowered]
        labels = label_strings(json.loads(spec))
        # "<br>" is ours (viz.style.wrap_title breaks long titles); a typed "<br>" arrives escaped as &lt;br&gt;.
        labels = [s.replace("<br>", " ") for s in labels]
        problems += [f"unescaped '<' or '>' in a label of chart {chart.key}: {s[:80]!r}" for s in labels if "<" in s]
    return problems


@pytest.mark.parametrize("kind", KINDS)
def test_app_survives_the_nastiest_inputs(kind: str, hostile_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(hostile_dir))
    cases = dict(CASES)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["model"] = NAMES[kind]
    at.run()
    assert not app_problems(at), app_problems(at)
    assert at.get("plotly_chart"), "the app shows no chart for its preset sentence"
    problems: dict[str, list[str]] = {}
    for name in APP_SUBSET:
        at.text_area(key="text").input(cases[name]).run()
        found = app_problems(at)
        if name not in BLANK and not at.get("plotly_chart"):
            found.append(f"no chart; errors shown: {[e.value for e in at.error]}")
        if name in ("script_tag", "img_onerror", "script_breakout") and at.get("plotly_chart"):
            specs = " ".join(c.proto.spec for c in at.get("plotly_chart"))
            if "&lt;" not in specs:
                found.append("no escaped '&lt;' in the charts: the markup's '<' went missing")
        if found:
            problems[name] = found
    assert not problems, problems


def test_app_text_from_a_shared_link_is_escaped(hostile_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The text can also come from the URL (?text=…): same guarantees."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(hostile_dir))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params.update({"model": NAMES["decoder-only"], "text": "<img src=x onerror=alert(1)><script>x</script>"})
    at.run()
    assert not app_problems(at), app_problems(at)
    assert at.get("plotly_chart")
