"""bench/pages.py end to end: every page of a real `streamlit run app.py` over its websocket, a tiny checkpoint."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ui.pages import PAGES as APP_PAGES

pytestmark = [pytest.mark.browser, pytest.mark.slow]
BENCH = Path(__file__).resolve().parent.parent / "bench"
PAGES = [p.title for p in APP_PAGES]  # every page, in order: the app's own list


def rows(text: str, heading: str) -> list[list[str]]:
    """The data rows of the table under `heading`."""
    section = text.split(heading, 1)[1].split("####", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")][1:]  # without the header
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines]


def test_every_page_draws_and_every_figure_is_reported(tmp_path: Path) -> None:
    pytest.importorskip("websockets")
    pytest.importorskip("psutil")
    sys.path.insert(0, str(BENCH))
    try:
        import pages
    finally:
        sys.path.remove(str(BENCH))
    out = tmp_path / "pages.md"
    assert pages.main(["--tiny", "--quick", "--model", "tiny-lm", "--out", str(out)]) == 0  # 1: a page failed
    text = out.read_text()
    assert "Every page drew (no failure)." in text
    assert "load average before → after" in text

    (cold,) = rows(text, "#### 1. Cold start")
    assert cold[0] == "tiny-lm" and cold[-1] in ("yes", "**no**")

    (switch,) = rows(text, "#### 2. Head switch")
    assert 120 <= int(switch[1]) <= 128  # tokens: about 128, counted with the checkpoint's tokenizer
    assert switch[2].startswith("5 ") and switch[3] == "fragment rerun"
    assert switch[7] == "5/5"  # every switch's heatmap names the head picked

    drawn = rows(text, "#### 3. Every page")
    assert [r[1].split(" (`")[0] for r in drawn] == list(PAGES)
    for row in drawn:
        assert row[2].startswith("5"), row  # about 512 tokens (the tiny checkpoint's max_len is 600)
        for visit in row[5].split(" · "):  # charts / tables of the first and the second visit
            if row[1].startswith("Training steps"):  # the tiny checkpoints have no snapshots: the page says so
                assert visit == "nothing to draw (no snapshots)", row
                continue
            if row[1].startswith("Experiment"):  # no 5-gram model beside the tiny ones: the page says how to train
                assert visit == "nothing to draw (no 5-gram models in the folder)", row
                continue
            if row[1].startswith("Open a trace file"):  # a first visit has chosen no file: the page says so
                assert visit == "nothing to draw (no trace file chosen)", row
                continue
            charts, tables = (int(n) for n in visit.split(" / "))
            assert charts + tables >= 1, row
        assert "page failed" not in row[-1]

    (soak,) = rows(text, "#### 4. Soak")
    assert soak[1] == "2 × (Explore + math + masks)"
    start, peak, end = (int(n) for n in soak[6].removesuffix(" MiB").split(" / "))
    assert 0 < start <= peak and end <= peak


def test_texts_come_close_to_the_token_count_without_passing_max_len() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import common
        import pages
    finally:
        sys.path.remove(str(BENCH))
    for directory in common.tiny_checkpoints():
        ckpt = common.load_checkpoint(directory)
        for tokens in (128, 512, 10_000):
            text, n = pages.text_of_about(ckpt, directory, tokens, seed=0)
            want = min(tokens, ckpt.config.max_len)
            assert want - 8 <= n <= want and n == common.sequence_length(ckpt, text)
