"""`python -m atlas …` on tiny checkpoints (mostly in-process through `atlas.cli.main`), and `clean_text`."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from analysis.analyze import analyze
from atlas.cli import main
from inference.checkpoint import load_checkpoint
from inference.decoding import generate

ROOT = Path(__file__).resolve().parents[1]
TOP_KEYS = {"format", "checkpoint", "kind", "positional", "positional_encoding", "kv_head_of_query_head"}
TOP_KEYS |= {"attention", "predictions", "text"}
TOKEN_KEYS = {"encoder-decoder": {"source_tokens", "target_tokens", "output_text"}, "decoder-only": {"target_tokens"}}
TOKEN_KEYS["encoder-only"] = {"source_tokens"}
ENTRY_KEYS = {"name", "stack", "layer", "type", "queries", "keys", "weights", "scores", "mask"}
TEXT = "The cat sat on the mat."
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}  # tiny models: no spin-waiting threads on a busy machine


@pytest.fixture(scope="module")
def ckpts(tiny_checkpoints):
    """kind → (path, loaded checkpoint)."""
    return {kind: (path, load_checkpoint(path)) for kind, path in tiny_checkpoints.items()}


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def expected_names(config) -> set[str]:
    names = {f"decoder.layers.{i}.self_attn" for i in range(config.n_decoder_layers)}
    if config.has_cross_attention:
        names |= {f"encoder.layers.{i}.self_attn" for i in range(config.n_encoder_layers)}
        names |= {f"decoder.layers.{i}.cross_attn" for i in range(config.n_decoder_layers)}
    return names


def check_trace_object(obj: dict, ckpt, k: int = 5) -> None:
    """Everything docs/trace-format (format 3) promises about one object of an encoder-decoder or a language model."""
    cfg = ckpt.config
    assert set(obj) == TOP_KEYS | TOKEN_KEYS[cfg.kind]
    assert obj["format"] == 3 and obj["checkpoint"] == ckpt.name and obj["kind"] == cfg.kind
    target = obj["target_tokens"]  # the decoder's input: a language model's text
    source = obj["source_tokens"] if cfg.has_cross_attention else target
    assert all(isinstance(p, str) for p in source + target)
    pe = np.array(obj["positional_encoding"])
    rotary = obj["positional"] == "rotary"
    assert obj["positional"] == cfg.positional
    assert pe.shape == (len(source), cfg.d_model // cfg.n_heads if rotary else cfg.d_model)
    group = cfg.n_heads // cfg.kv_heads  # query heads per key/value head: 1 for the paper's multi-head attention
    assert obj["kv_head_of_query_head"] == [h // group for h in range(cfg.n_heads)]
    assert {e["name"] for e in obj["attention"]} == expected_names(cfg)
    for entry in obj["attention"]:
        assert set(entry) == ENTRY_KEYS
        stack, _, layer, type_ = entry["name"].split(".")
        assert (entry["stack"], entry["layer"], entry["type"]) == (stack, int(layer), type_)
        queries = source if stack == "encoder" else target
        keys = target if (stack == "decoder" and type_ == "self_attn") else source
        assert entry["queries"] == queries and entry["keys"] == keys
        weights, mask = np.array(entry["weights"], dtype=float), np.array(entry["mask"])
        assert weights.shape == (cfg.n_heads, len(queries), len(keys))
        assert mask.shape == (len(queries), len(keys)) and mask.dtype == bool
        assert len(entry["scores"]) == cfg.n_heads
        for head in range(cfg.n_heads):
            assert len(entry["scores"][head]) == len(queries)
            for i, row in enumerate(entry["scores"][head]):
                assert len(row) == len(keys)
                for j, score in enumerate(row):
                    assert (score is None) == (not mask[i, j])
                    assert score is None or isinstance(score, float)
        assert np.all(weights[:, ~mask] == 0)
        np.testing.assert_allclose(weights.sum(-1)[:, mask.any(-1)], 1.0, atol=1e-4)
        if stack == "decoder" and type_ == "self_attn":
            assert not np.triu(mask, 1).any()
    assert [p["position"] for p in obj["predictions"]] == list(range(len(target)))
    for prediction in obj["predictions"]:
        assert set(prediction) == {"position", "top"}
        assert len(prediction["top"]) == k
        probs = [item["prob"] for item in prediction["top"]]
        assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-5  # most probable first
        for item in prediction["top"]:
            assert set(item) == {"token", "id", "prob"}
            assert item["token"] == ckpt.tokenizer.pieces([item["id"]])[0]


# ---------------------------------------------------------------- trace


@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only"])
def test_trace_emits_json_with_exactly_the_documented_keys(capsys, ckpts, kind) -> None:
    path, ckpt = ckpts[kind]
    args = ["trace", path, TEXT] + (["--target", "Die Katze sitzt."] if kind == "encoder-decoder" else [])
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    assert out.count("\n") == 1
    check_trace_object(json.loads(out), ckpt)


def test_trace_weights_and_scores_are_those_of_the_model(capsys, ckpts) -> None:
    path, ckpt = ckpts["encoder-decoder"]
    code, out, _ = cli(capsys, "trace", path, TEXT, "--target", "Die Katze.", "--top-k", "3")
    assert code == 0
    obj = json.loads(out)
    check_trace_object(obj, ckpt, k=3)
    cfg = ckpt.config
    source = torch.tensor([ckpt.tokenizer.encode(TEXT) + [cfg.eos_id]])
    target = torch.tensor([[cfg.bos_id, *ckpt.tokenizer.encode("Die Katze.")]])
    assert obj["source_tokens"] == ckpt.tokenizer.pieces(source[0].tolist())
    assert obj["target_tokens"] == ckpt.tokenizer.pieces(target[0].tolist())
    assert obj["target_tokens"][0] == "<s>" and obj["source_tokens"][-1] == "</s>"
    with torch.no_grad():
        logits, trace = ckpt.model(source, target)  # the model itself, not the Analysis the CLI printed
    for entry in obj["attention"]:
        rec = trace.attention[entry["name"]]
        np.testing.assert_allclose(np.array(entry["weights"]), rec.weights[0].numpy(), atol=1e-6)
        scores = np.array([[[np.nan if s is None else s for s in row] for row in head] for head in entry["scores"]])
        expected = np.where(rec.mask[0].numpy(), rec.scores[0].numpy(), np.nan)
        np.testing.assert_allclose(scores, expected, atol=1e-5)
    np.testing.assert_allclose(obj["positional_encoding"], trace.positional_encoding["encoder"].numpy(), atol=1e-6)
    probs = torch.softmax(logits[0], dim=-1)
    for prediction in obj["predictions"]:  # the 3 most probable
        row = probs[prediction["position"]]
        third = row.topk(3).values[-1]
        assert all(row[item["id"]] >= third - 1e-6 for item in prediction["top"])
        assert [item["prob"] for item in prediction["top"]] == pytest.approx(
            row[[i["id"] for i in prediction["top"]]].tolist(), abs=1e-6
        )


def test_trace_of_an_encoder_decoder_without_target_decodes_its_own_greedy_output(capsys, ckpts) -> None:
    path, ckpt = ckpts["encoder-decoder"]
    code, out, _ = cli(capsys, "trace", path, "Where is the station?")
    assert code == 0
    obj = json.loads(out)
    cfg = ckpt.config
    source = torch.tensor([ckpt.tokenizer.encode("Where is the station?") + [cfg.eos_id]])
    ids = generate(ckpt.model, [cfg.bos_id], source, max_tokens=64).ids
    assert obj["target_tokens"] == ckpt.tokenizer.pieces([cfg.bos_id, *ids])
    assert len(obj["predictions"]) == len(obj["target_tokens"])


def test_trace_writes_an_npz_with_output_npz(capsys, ckpts, tmp_path) -> None:
    path, ckpt = ckpts["encoder-decoder"]
    target = tmp_path / "out.npz"
    code, out, _ = cli(capsys, "trace", path, TEXT, "--target", "Die Katze.", "-o", target)
    assert code == 0 and out == ""
    with np.load(target, allow_pickle=False) as npz:
        arrays = dict(npz)
    names = expected_names(ckpt.config)
    suffixes = ("weights", "scores", "mask")
    assert set(arrays) == {f"{n}.{s}" for n in names for s in suffixes} | {"positional_encoding", "meta.json"}
    meta = json.loads(arrays["meta.json"].tobytes().decode("utf-8"))
    assert set(meta) == TOP_KEYS - {"attention", "positional_encoding"} | TOKEN_KEYS["encoder-decoder"]
    s, t = len(meta["source_tokens"]), len(meta["target_tokens"])
    assert arrays["positional_encoding"].shape == (s, ckpt.config.d_model)
    h = ckpt.config.n_heads
    for name in names:
        tq, tk = (s, s) if name.startswith("encoder") else (t, s if "cross" in name else t)
        weights, scores, mask = (arrays[f"{name}.{x}"] for x in suffixes)
        assert weights.shape == scores.shape == (h, tq, tk) and mask.shape == (tq, tk) and mask.dtype == bool
        assert np.array_equal(np.isnan(scores), np.broadcast_to(~mask, scores.shape))
        assert np.all(weights[:, ~mask] == 0)


def test_trace_writes_the_same_json_with_output_json(capsys, ckpts, tmp_path) -> None:
    path, _ = ckpts["decoder-only"]
    code, out, _ = cli(capsys, "trace", path, TEXT)
    target = tmp_path / "out.json"
    code2, out2, _ = cli(capsys, "trace", path, TEXT, "-o", target)
    assert code == code2 == 0 and out2 == ""
    assert json.loads(target.read_text(encoding="utf-8")) == json.loads(out)


def test_trace_input_file_txt_gives_one_line_per_input_and_goes_on_after_a_bad_one(capsys, ckpts, tmp_path) -> None:
    path, ckpt = ckpts["decoder-only"]
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("The cat sat.\n\nA dog ran in the park.\n   \n", encoding="utf-8")
    code, out, _ = cli(capsys, "trace", path, "--input-file", inputs)
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 4
    check_trace_object(lines[0], ckpt)
    check_trace_object(lines[2], ckpt)
    for bad, text in ((lines[1], ""), (lines[3], "   ")):
        assert set(bad) == {"input", "error"}
        assert bad["input"] == text and "empty" in bad["error"]


def test_trace_input_file_jsonl_reports_bad_lines_and_goes_on(capsys, ckpts, tmp_path) -> None:
    path, ckpt = ckpts["encoder-decoder"]
    inputs = tmp_path / "inputs.jsonl"
    lines_in = ['"The cat sat."', "42", '""', "{not json", '"Line one\\nline two"']
    inputs.write_text("\n".join(lines_in) + "\n", encoding="utf-8")
    out_file = tmp_path / "out.jsonl"
    code, out, _ = cli(capsys, "trace", path, "--input-file", inputs, "--target", "Die Katze.", "-o", out_file)
    assert code == 0 and out == ""
    results = [json.loads(line) for line in out_file.read_text(encoding="utf-8").splitlines()]
    assert len(results) == 5
    for i in (0, 4):
        check_trace_object(results[i], ckpt)
    assert results[1] == {"input": None, "error": results[1]["error"]}
    assert "inputs.jsonl:2" in results[1]["error"] and "string" in results[1]["error"]
    assert set(results[2]) == {"input", "error"} and results[2]["input"] == ""
    assert set(results[3]) == {"input", "error"} and "inputs.jsonl:4" in results[3]["error"]


def test_trace_notes_removed_control_characters_on_stderr(capsys, ckpts) -> None:
    path, _ = ckpts["decoder-only"]
    code, out, err = cli(capsys, "trace", path, "The\x00 cat\x07 sat.")
    assert code == 0
    plain = json.loads(cli(capsys, "trace", path, "The cat sat.")[1])
    assert json.loads(out)["target_tokens"] == plain["target_tokens"]
    assert "note:" in err and "control character" in err


# ---------------------------------------------------------------- generate, info, score


@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only"])
@pytest.mark.parametrize("beam", [1, 2])
def test_generate_prints_one_line_with_the_generated_text(capsys, ckpts, kind, beam) -> None:
    path, ckpt = ckpts[kind]
    code, out, err = cli(capsys, "generate", path, "The cat", "--max-tokens", "6", "--beam", beam)
    assert code == 0, err
    assert out.count("\n") == 1 and out.endswith("\n")
    cfg, tok = ckpt.config, ckpt.tokenizer
    if kind == "encoder-decoder":
        result = generate(ckpt.model, [cfg.bos_id], torch.tensor([tok.encode("The cat") + [cfg.eos_id]]), 6, beam)
    else:
        result = generate(ckpt.model, [cfg.bos_id, *tok.encode("The cat")], None, 6, beam)
    assert out[:-1] == tok.decode(result.ids)


def test_generate_input_file_prints_a_line_per_input_and_reports_bad_ones(capsys, ckpts, tmp_path) -> None:
    path, _ = ckpts["decoder-only"]
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('"The cat"\n7\n"A dog"\n', encoding="utf-8")
    code, out, err = cli(capsys, "generate", path, "--input-file", inputs, "--max-tokens", "3")
    assert code == 1
    assert len(out.splitlines()) == 3 and out.splitlines()[1] == ""
    assert "in.jsonl:2" in err


def test_info_prints_the_card(capsys, ckpts) -> None:
    path, ckpt = ckpts["decoder-only"]
    code, out, _ = cli(capsys, "info", path)
    assert code == 0
    assert json.loads(out) == ckpt.card == json.loads((path / "card.json").read_text(encoding="utf-8"))


def test_score_prints_perplexity_and_accuracy_of_a_language_model(capsys, ckpts, tmp_path) -> None:
    path, ckpt = ckpts["decoder-only"]
    lines = ["The cat sat on the mat.", "", "Where is the station?"]
    inputs = tmp_path / "score.txt"
    inputs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, _ = cli(capsys, "score", path, "--input-file", inputs)
    assert code == 0
    match = re.fullmatch(r"perplexity (\S+)\s+top1_accuracy (\S+)\s+tokens (\d+)\n", out)
    assert match, out
    ppl, acc, count = float(match[1]), float(match[2]), int(match[3])
    # independently: bos + tokens + eos per non-empty line, every next token scored
    cfg, nll, correct, n = ckpt.config, 0.0, 0, 0
    for line in filter(None, lines):
        ids = torch.tensor([[cfg.bos_id, *ckpt.tokenizer.encode(line), cfg.eos_id]])
        with torch.no_grad():
            logits, _ = ckpt.model(ids, record=False)
        log_probs = torch.log_softmax(logits[0, :-1].double(), dim=-1)
        nll -= float(log_probs[torch.arange(ids.shape[1] - 1), ids[0, 1:]].sum())
        correct += int((log_probs.argmax(-1) == ids[0, 1:]).sum())
        n += ids.shape[1] - 1
    assert count == n
    assert ppl == pytest.approx(math.exp(nll / n), rel=1e-3)
    assert acc == pytest.approx(correct / n, abs=1e-4)


def test_score_refuses_an_encoder_decoder(capsys, ckpts, tmp_path) -> None:
    path, _ = ckpts["encoder-decoder"]
    inputs = tmp_path / "score.txt"
    inputs.write_text("The cat.\n", encoding="utf-8")
    code, _, err = cli(capsys, "score", path, "--input-file", inputs)
    assert code == 2 and "language model" in err


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("command", [["info"], ["trace", "{ckpt}", "x"], ["generate", "{ckpt}", "x"]])
def test_a_missing_checkpoint_exits_2_naming_the_path(capsys, tmp_path, command) -> None:
    missing = tmp_path / "no-such-ckpt"
    args = [str(missing) if a == "{ckpt}" else a for a in command]
    if args == ["info"]:
        args.append(str(missing))
    code, out, err = cli(capsys, *args)
    assert code == 2 and out == ""
    assert str(missing) in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["trace", "{lm}"], "TEXT"),
        (["trace", "{lm}", "   "], "empty"),
        (["trace", "{lm}", "x", "--top-k", "0"], "--top-k"),
        (["generate", "{lm}", "x", "--beam", "0"], "--beam"),
        (["generate", "{lm}", "x", "--max-tokens", "-1"], "--max-tokens"),
        (["trace", "{lm}", "--input-file", "{missing}"], "no-such-inputs.txt"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(capsys, ckpts, tmp_path, args, message) -> None:
    fill = {"{lm}": str(ckpts["decoder-only"][0]), "{missing}": str(tmp_path / "no-such-inputs.txt")}
    code, _, err = cli(capsys, *[fill.get(a, a) for a in args])
    assert code == 2
    assert err.startswith("error:") and message in err


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_python_dash_m_model_trace_runs_as_a_program(tiny_checkpoints) -> None:
    path = tiny_checkpoints["decoder-only"]
    result = subprocess.run(
        [sys.executable, "-m", "atlas", "trace", str(path), TEXT],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    obj = json.loads(result.stdout)
    assert set(obj) == TOP_KEYS | TOKEN_KEYS["decoder-only"] and obj["kind"] == "decoder-only"
    assert all(set(entry) == ENTRY_KEYS for entry in obj["attention"])


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_python_dash_m_model_with_a_missing_checkpoint_exits_2_without_a_traceback(tmp_path) -> None:
    missing = tmp_path / "missing-checkpoint"
    result = subprocess.run(
        [sys.executable, "-m", "atlas", "trace", str(missing), TEXT],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert str(missing) in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def can_create_in(folder: Path) -> bool:
    try:
        (folder / "atlas-probe").touch()
    except OSError:
        return False
    return True


@pytest.fixture
def read_only_folder(tmp_path: Path):
    """A folder no file can be created in: a chmod 555 one, or /sys where chmod does not stop root."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    usable = [f for f in (folder, Path("/sys")) if not can_create_in(f)]
    if not usable:
        pytest.skip("no read-only folder here: chmod does not stop this user and there is no /sys")
    yield usable[0]
    folder.chmod(0o755)


@pytest.mark.parametrize("where", ["missing-folder", "a-folder", "read-only"])
@pytest.mark.parametrize("how", ["out.json", "out.npz", "out.jsonl with --input-file"])
def test_trace_to_an_unwritable_output_path_is_a_one_line_error_and_exit_2(
    capsys, ckpts, tmp_path, read_only_folder, where, how
) -> None:
    if where == "a-folder" and "--input-file" in how:
        pytest.skip("a folder takes one archive per input (test_trace_input_file_into_a_folder_…)")
    name = how.split()[0]
    output = {
        "missing-folder": tmp_path / "no-such-folder" / name,
        "a-folder": tmp_path,
        "read-only": read_only_folder / name,
    }[where]
    inputs = tmp_path / "inputs.txt"
    inputs.write_text(TEXT + "\n")
    source = ["--input-file", inputs] if "--input-file" in how else [TEXT]
    code, out, err = cli(capsys, "trace", ckpts["decoder-only"][0], *source, "-o", output)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {output}: cannot write there (") and err.count("\n") == 1, err
    assert "writable folder" in err


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        ("prepare", "python -m training.data prepare"),
        ("train", "python -m training.train"),
        ("evaluate", "python -m training.evaluate"),
        ("average", "python -m training.average"),
        ("snapshots", "python -m training.snapshots"),
    ],
)
def test_the_training_commands_hand_over_to_the_training_package(capsys, command: str, usage: str) -> None:
    with pytest.raises(SystemExit) as stop:
        main([command, "--help"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {usage}")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--beam", "1000"), "--beam must be between 1 and 16"),
        (("--max-tokens", "100000"), "is more than"),
        (("--top-k", "0"), "--top-k must be between 1 and 100"),
    ],
)
def test_absurd_decoding_settings_are_one_error_line(capsys, ckpts, args, message) -> None:
    command = "trace" if args[0] == "--top-k" else "generate"
    code, out, err = cli(capsys, command, ckpts["decoder-only"][0], TEXT, *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a device that is always full)")
@pytest.mark.parametrize("to_file", [True, False])
def test_a_full_disk_is_one_error_line_and_exit_2(tiny_checkpoints, to_file) -> None:
    args = [sys.executable, "-m", "atlas", "trace", str(tiny_checkpoints["decoder-only"]), TEXT]
    with open("/dev/full", "w") as full:
        if to_file:
            done = subprocess.run([*args, "-o", "/dev/full"], capture_output=True, text=True, env=ENV, cwd=ROOT)
        else:
            done = subprocess.run(args, stdout=full, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "No space left on device" in done.stderr


def test_score_names_a_line_holding_a_lone_surrogate_instead_of_a_traceback(capsys, ckpts, tmp_path) -> None:
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('"The cat."\n"bad \\ud800 text"\n', encoding="utf-8")
    code, _, err = cli(capsys, "score", ckpts["decoder-only"][0], "--input-file", inputs)
    assert code == 2 and "in.jsonl:2: holds \\ud800" in err and err.count("\n") == 1


@pytest.mark.parametrize("command", ["trace", "generate", "score"])
def test_hostile_jsonl_lines_are_one_error_each_and_the_others_run(capsys, ckpts, tmp_path, command) -> None:
    """100,000 nested "[" raised RecursionError and a 5,000-digit integer ValueError, ending the whole run."""
    path, _ = ckpts["decoder-only"]
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('"The cat"\n' + "[" * 100_000 + "\n" + "9" * 5000 + '\n"A dog"\n', encoding="utf-8")
    extra = ["-o", tmp_path / "out.jsonl"] if command == "trace" else []
    extra += ["--max-tokens", "2"] if command == "generate" else []
    code, out, err = cli(capsys, command, path, "--input-file", inputs, *extra)
    messages = err if command != "trace" else (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    assert "in.jsonl:2: nested 100000 levels deep" in messages
    assert "Traceback" not in err
    digits_line = 3
    if command == "score":  # score stops at its first bad line, by design: the digits on their own
        inputs.write_text('"The cat"\n' + "9" * 5000 + "\n", encoding="utf-8")
        code, out, err = cli(capsys, command, path, "--input-file", inputs)
        assert code == 2 and err.count("\n") == 1
        messages, digits_line = err, 2
    assert f"in.jsonl:{digits_line}: holds an integer of 5000 digits" in messages
    if command == "trace":
        results = [json.loads(line) for line in messages.splitlines()]
        assert [set(r) == {"input", "error"} for r in results] == [False, True, True, False]


def test_trace_input_file_into_a_folder_writes_one_npz_archive_per_input(capsys, ckpts, tmp_path) -> None:
    path, ckpt = ckpts["decoder-only"]
    inputs = tmp_path / "inputs.txt"
    texts = ["The cat sat."] + [""] + [f"A dog ran {i} times." for i in range(9)]  # 11 inputs: 01 … 11
    inputs.write_text("\n".join(texts) + "\n", encoding="utf-8")
    folder = tmp_path / "traces"
    code, out, err = cli(capsys, "trace", path, "--input-file", inputs, "-o", f"{folder}/")
    assert code == 0 and out == ""
    assert sorted(p.name for p in folder.iterdir()) == [f"{n:02d}.npz" for n in range(1, 12) if n != 2]
    assert err.startswith("error: input 2: ") and "empty" in err  # the empty line: no archive, the others go on
    for number in (1, 11):
        with np.load(folder / f"{number:02d}.npz", allow_pickle=False) as archive:
            meta = json.loads(archive["meta.json"].tobytes().decode("utf-8"))
            assert meta["text"] == texts[number - 1]
            expected = analyze(ckpt, texts[number - 1])
            for name, sublayer in expected.sublayers.items():
                np.testing.assert_array_equal(archive[f"{name}.weights"], sublayer.weights.astype(np.float32))
                np.testing.assert_array_equal(archive[f"{name}.mask"], sublayer.mask)
    code, _, _ = cli(capsys, "trace", path, "--input-file", inputs, "-o", folder)  # an existing folder, no slash
    assert code == 0 and len(list(folder.iterdir())) == 10


def test_trace_input_file_into_a_read_only_folder_is_a_one_line_error(capsys, ckpts, tmp_path, read_only_folder):
    inputs = tmp_path / "inputs.txt"
    inputs.write_text(TEXT + "\n")
    code, out, err = cli(capsys, "trace", ckpts["decoder-only"][0], "--input-file", inputs, "-o", read_only_folder)
    assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1, err
    assert not list(read_only_folder.glob("*.npz"))
