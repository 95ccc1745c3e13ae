"""The house's layers, checked on the imports that actually happen: model/ never pulls in streamlit or plotly,
viz/ never pulls in torch, streamlit or model/ (but model/names.py, plain strings: the names of a model's parts), and
analysis/record.py (the record viz reads) stays numpy-only; running a model (inference/) never needs the analyses
(analysis/) that read what it returns."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# Fresh interpreters, one per package (10 s): CI runs them; tests/test_imports.py checks the same direction
# statically in the everyday tier.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def modules_loaded_by(imports: list[str]) -> set[str]:
    """Import `imports` in a fresh interpreter and return the names in sys.modules afterwards."""
    code = "import sys\n" + "".join(f"import {m}\n" for m in imports) + "print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def package_modules(package: str) -> list[str]:
    dotted = package.replace("/", ".")
    return sorted(f"{dotted}.{p.stem}" for p in (ROOT / package).glob("*.py") if p.stem != "__init__")


def top(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


@pytest.mark.parametrize("package", ["viz"])
def test_viz_imports_neither_torch_nor_streamlit_nor_the_model(package: str) -> None:
    loaded = modules_loaded_by(package_modules(package))
    assert {"plotly", "numpy"} <= top(loaded)  # the check would pass vacuously if nothing were imported
    assert not top(loaded) & {"torch", "streamlit", "sentencepiece", "safetensors"}
    assert {n for n in loaded if top({n}) == {"model"}} <= {"model", "model.names"}  # sub-layer names, no model code
    assert not {n for n in loaded if top({n}) == {"inference"}} - {"inference", "inference.prediction"}
    assert not {n for n in loaded if top({n}) == {"analysis"}} - {"analysis", "analysis.record"}


def test_the_model_imports_neither_streamlit_nor_plotly_nor_the_rest_of_the_house() -> None:
    loaded = modules_loaded_by(package_modules("model"))
    assert "torch" in top(loaded)
    assert not top(loaded) & {
        "streamlit",
        "plotly",
        "pandas",
        "inference",
        "analysis",
        "training",
        "viz",
        "ui",
        "atlas",
    }


def test_running_a_checkpoint_needs_no_analysis_no_training_code_and_no_app() -> None:
    loaded = modules_loaded_by(package_modules("inference") + package_modules("inference/pretrained"))
    assert "torch" in top(loaded)
    assert not top(loaded) & {"analysis", "streamlit", "plotly", "training", "viz", "ui", "atlas"}


def test_the_analyses_need_no_training_code_and_no_app() -> None:
    loaded = modules_loaded_by(package_modules("analysis") + package_modules("analysis/imported"))
    assert {"inference", "model"} <= top(loaded)
    assert not top(loaded) & {"streamlit", "plotly", "training", "viz", "ui", "atlas"}


def test_every_page_file_is_in_the_one_list_of_pages_and_every_listed_one_exists() -> None:
    from ui.pages import PAGES

    assert sorted(p.script for p in PAGES) == sorted(f"views/{f.name}" for f in (ROOT / "views").glob("*.py"))
    assert len({p.url_path for p in PAGES}) == len(PAGES) and [p.url_path for p in PAGES].count("") == 1
    app = (ROOT / "app.py").read_text(encoding="utf-8")
    assert "pages.sections()" in app, "app.py builds its navigation from ui/pages.py"
