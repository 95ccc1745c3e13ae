"""The package as a user gets it: the wheel `pip wheel .` builds, installed in a fresh virtual environment and used
from a folder that is not the clone (`atlas --help`, `atlas info`, `import atlas`, `atlas trace`, `atlas app`).

That folder is a researcher's notebook folder: it holds a `model.py`, a `ui/` and a `training/` of its own, first on
the path of everything run there. The wheel installs one name, `atlas` (setup.py moves the rest inside it), so
theirs and ours never meet.

The fresh environment gets the wheel's dependencies from this one, not from an index: a folder of links to exactly
the distributions the wheel declares (its Requires-Dist, transitively, as installed here) goes on its path, and
`pip install --no-index` must find every pin satisfied there. So a module the code imports but the wheel does not
declare is missing over there as it would be for a user, and nothing is downloaded: installing torch and the rest
from an index took 4 min 39 s on the development machine (under load), and CI would fetch torch's CUDA build.
`ATLAS_WHEEL_FROM_INDEX=1` installs the dependencies from the configured index instead.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
# Each extra and the requirements file it copies (pyproject.toml says why `pretrained` leaves the model packages out).
EXTRAS = {"train": "requirements-train.txt", "pretrained": "requirements-pretrained.txt"}
NOT_CODE = {"checkpoints"}  # listed as packages for their data
APP_START_S = 300  # the warm first page (ui/serve.py's WARM_TIMEOUT_S) and the server after it
# A researcher's own modules, named as ours are in the repository: each says whose it is.
USERS_OWN = {"model.py": "WHOSE = 'theirs'\n", "ui/__init__.py": "WHOSE = 'theirs'\n"}
USERS_OWN["training/__init__.py"] = "WHOSE = 'theirs'\n"


def pins(path: Path) -> dict[str, str]:
    """name → `name==version` of a requirements file, its `-r` files included."""
    found: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found |= pins(path.parent / line[3:].strip())
        elif line:
            found[re.split(r"[=<>~!\[; ]", line, maxsplit=1)[0].lower()] = line
    return found


def test_each_extra_pins_what_its_requirements_file_pins() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    for extra, file in EXTRAS.items():
        wanted = pins(ROOT / file)
        assert [pin for pin in extras[extra] if wanted.get(pin.split("==")[0].lower()) != pin] == [], file
    dev = pins(ROOT / "requirements-dev.txt")
    assert [pin for pin in extras["notebook"] if dev.get(pin.split("==")[0].lower()) != pin] == []


def imported_top_levels(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_wheel_lists_every_folder_of_code_the_packages_import() -> None:
    """Every package of this repository that the listed code imports is listed, and so is every folder of modules
    inside a listed package (setuptools installs only the packages it is given)."""
    listed = set(SETUPTOOLS["packages"])
    files = [ROOT / f"{m}.py" for m in SETUPTOOLS["py-modules"]]
    for package in listed - NOT_CODE:
        files += (ROOT / package.replace(".", "/")).glob("*.py")
    local = {p.name for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert sorted(set().union(*map(imported_top_levels, files)) & local - listed) == []
    inside = {d for p in listed - NOT_CODE for d in (ROOT / p.replace(".", "/")).rglob("*") if d.is_dir()}
    folders = {".".join(d.relative_to(ROOT).parts) for d in inside if d.name != "__pycache__" and any(d.glob("*.py"))}
    assert sorted(folders - listed) == []


# --- the installed wheel (slow: builds it, then a fresh environment) -----------------------------------------------


def run(*args: str | Path, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    out = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{args}: exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def source_tree(into: Path) -> Path:
    """The files a clone has (tracked, and new ones git does not ignore), copied: the build writes build/ and
    *.egg-info beside pyproject.toml, which must not land in the working tree others use."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():  # a file deleted but not yet committed is still listed
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    return into


def declared_distributions(wheel: Path) -> list:
    """The installed distributions the wheel's Requires-Dist names, and theirs in turn (markers evaluated)."""
    import importlib.metadata
    import zipfile

    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(meta).decode()
    todo = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]
    found: dict[str, importlib.metadata.Distribution] = {}
    while todo:
        req = Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        dist = importlib.metadata.distribution(req.name)
        if dist.metadata["Name"].lower() not in found:
            found[dist.metadata["Name"].lower()] = dist
            todo += dist.requires or []
    return list(found.values())


def link_dependencies(wheel: Path, into: Path) -> Path:
    """A folder of links to the top-level files and folders of the declared distributions (dist-info included, so
    pip sees them installed)."""
    into.mkdir(parents=True)
    for dist in declared_distributions(wheel):
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops - {"__pycache__"}:
            if not (into / top).exists():
                (into / top).symlink_to(dist.locate_file(top))
    return into


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """{"bin", "site", "env", "elsewhere"}: the fresh environment with the wheel installed, and an empty folder."""
    base = tmp_path_factory.mktemp("wheel")
    source = source_tree(base / "source")
    start = time.perf_counter()
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", base / "dist", source, cwd=base, env=os.environ)
    (wheel,) = (base / "dist").glob("attention_atlas-*.whl")
    print(f"wheel: {wheel.stat().st_size / 1e6:.1f} MB, built in {time.perf_counter() - start:.0f} s")
    # No pip or setuptools of its own (the bundled setuptools would hide the newer one torch needs): this
    # environment's pip installs into it (`pip --python`).
    run(sys.executable, "-m", "venv", "--without-pip", base / "venv", cwd=base, env=os.environ)
    py = base / "venv" / "bin" / "python"
    site = run(py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=base, env=os.environ)
    site = Path(site.stdout.strip())
    pip = [sys.executable, "-m", "pip", "--python", py, "install", "-q"]
    start = time.perf_counter()
    if os.environ.get("ATLAS_WHEEL_FROM_INDEX") == "1":
        run(*pip, wheel, cwd=base, env=os.environ, timeout=1200)
    else:
        # Named site-packages: Streamlit run from a folder not so named takes itself for its own development
        # checkout (global.developmentMode) and refuses --server.port.
        linked = link_dependencies(wheel, base / "dependencies" / "site-packages")
        (site / "dependencies.pth").write_text(f"{linked}\n")
        run(*pip, "--no-index", wheel, cwd=base, env=os.environ)
    print(f"installed in {time.perf_counter() - start:.0f} s")
    elsewhere = base / "elsewhere"
    for name, text in USERS_OWN.items():
        (elsewhere / name).parent.mkdir(parents=True, exist_ok=True)
        (elsewhere / name).write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in {"ATLAS_CHECKPOINTS", "VIRTUAL_ENV"}}
    env["PYTHONPATH"] = str(elsewhere)  # their modules first on the path of every command, the app's server too
    env["PATH"] = f"{base / 'venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return {"bin": base / "venv" / "bin", "site": site, "env": env, "elsewhere": elsewhere}


@pytest.mark.slow
def test_the_wheel_installs_one_name_beside_its_record(installed) -> None:
    """site-packages gains `atlas` and the wheel's dist-info, nothing else (dependencies.pth is this test's)."""
    names = {p.name for p in installed["site"].iterdir()} - {"dependencies.pth"}
    assert names == {"atlas", "attention_atlas-0.1.0.dist-info"}
    assert not (installed["site"] / "atlas" / "_house" / "checkpoints" / "__init__.py").exists()


@pytest.mark.slow
def test_a_notebook_folders_own_model_ui_and_training_stay_theirs_beside_atlas(installed) -> None:
    """A script beside the folder's own model.py, ui/ and training/: theirs imported before atlas stays theirs
    (ours would fail on it), atlas loads and analyzes a shipped model, and theirs imported after is still theirs."""
    script = installed["elsewhere"] / "notebook.py"
    script.write_text(
        "import sys\n"
        "import model\n"
        "import atlas\n"
        "a = atlas.analyze(atlas.load('lm-english'), 'The cat sat on the mat.')\n"
        "print(' '.join(a.target_pieces))\n"
        "print(atlas.__file__)\n"
        "import training, ui\n"
        "for name in ('model', 'ui', 'training'):\n"
        "    print(name, sys.modules[name].WHOSE, sys.modules[name].__file__)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'analysis', 'inference', 'viz', 'views', 'app'}))\n",
        encoding="utf-8",
    )
    lines = run(installed["bin"] / "python", script, cwd=installed["elsewhere"], env=installed["env"]).stdout
    pieces, where, *theirs, bare = lines.splitlines()
    assert "▁cat" in pieces.split()
    assert Path(where).is_relative_to(installed["site"])
    for line, name in zip(theirs, ["model.py", "ui/__init__.py", "training/__init__.py"], strict=True):
        assert line.split(" ", 2)[1:] == ["theirs", str(installed["elsewhere"] / name)]
    assert bare == "[]"  # none of ours under a bare name


@pytest.mark.slow
def test_the_installed_trace_command_writes_a_trace_beside_their_modules(installed) -> None:
    out = installed["elsewhere"] / "trace.json"
    run(
        installed["bin"] / "python",
        "-m",
        "atlas",
        "trace",
        "lm-english",
        "The cat sat.",
        "-o",
        out,
        cwd=installed["elsewhere"],
        env=installed["env"],
    )
    assert "cat" in json.dumps(json.loads(out.read_text(encoding="utf-8")))


@pytest.mark.slow
def test_the_installed_command_answers_help_and_prints_a_shipped_card(installed) -> None:
    atlas = installed["bin"] / "atlas"
    assert "usage:" in run(atlas, "--help", cwd=installed["elsewhere"], env=installed["env"]).stdout
    card = json.loads(run(atlas, "info", "lm-english", cwd=installed["elsewhere"], env=installed["env"]).stdout)
    assert card == json.loads((ROOT / "checkpoints" / "lm-english" / "card.json").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_the_installed_package_analyzes_a_shipped_model_without_the_clone(installed) -> None:
    code = (
        "import atlas; a = atlas.analyze(atlas.load('lm-english'), 'The cat sat on the mat.');"
        "print(atlas.__file__); print(' '.join(a.target_pieces))"
    )
    where, pieces = run(
        installed["bin"] / "python", "-c", code, cwd=installed["elsewhere"], env=installed["env"]
    ).stdout.splitlines()
    assert Path(where).is_relative_to(installed["site"])
    assert "cat" in pieces


@pytest.mark.slow
def test_the_installed_app_serves_with_the_repository_settings(installed) -> None:
    """`atlas app` from another folder: it finds app.py and its pages in site-packages, and Streamlit reads the
    .streamlit/config.toml shipped beside app.py (its hideWelcomeMessage: no "Local URL" line)."""
    shipped = installed["site"] / "atlas" / "_house" / ".streamlit" / "config.toml"
    assert shipped.read_bytes() == (ROOT / ".streamlit" / "config.toml").read_bytes()
    port = free_port()
    log = installed["elsewhere"] / "app.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [installed["bin"] / "atlas", "app", "--server.port", str(port), "--server.address", "127.0.0.1"],
            cwd=installed["elsewhere"],
            env=installed["env"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped whole below
        )
    try:
        deadline = time.monotonic() + APP_START_S
        while True:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
                    assert 'id="root"' in page, page[:3000]  # the app's page, whose script the warm run ran
                    break
            except OSError:
                pass
            assert proc.poll() is None, f"atlas app exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no answer in {APP_START_S} s:\n{log.read_text()[-3000:]}"
            time.sleep(1)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the group is gone when the server exited on its own
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    shown = log.read_text()
    assert "ready in" in shown and "the first page showed" not in shown, shown
    assert "Local URL" not in shown, shown
