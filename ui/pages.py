"""The app's pages, in the order the menu at the top of every page lists them: one list, which app.py builds its
navigation from and the tests and benches that visit every page read. Plain data (no streamlit): a test imports it
without an app.

The menu shows the first section's pages as links and each other section as one drop-down, so that every page is
one or two clicks away in the first view at 1024 × 768, sidebar open (tests/test_browser_first_visit.py); below
768 px the sidebar lists them all under their sections' headings (ui/phone_menu.py)."""

from __future__ import annotations

from typing import NamedTuple


class Page(NamedTuple):
    script: str  # the page's file, from the repository root
    title: str  # what the sidebar and the browser's tab say
    url_path: str  # the page's address after the server's; "" for the default page (Explore)
    section: str  # its drop-down in the menu; "" for the links shown directly (Explore, Lesson, Generate)


PAPER, HEADS, RUNS = "The paper", "Heads", "Runs"


PAGES = (
    Page("views/explore.py", "Explore", "", ""),
    Page("views/lesson.py", "Lesson", "lesson", ""),
    Page("views/generate.py", "Generate", "generate", ""),
    Page("views/paper.py", "Paper view", "paper", PAPER),
    Page("views/attention_math.py", "Attention math", "math", PAPER),
    Page("views/positional.py", "Positional encoding", "positional", PAPER),
    Page("views/masks.py", "Masks", "masks", PAPER),
    Page("views/rollout.py", "Attention rollout", "rollout", HEADS),
    Page("views/head_stats.py", "Head statistics", "heads", HEADS),
    Page("views/ablation.py", "Head ablation", "ablation", HEADS),
    Page("views/attribution.py", "Logit attribution", "attribution", HEADS),
    Page("views/compare.py", "Compare two inputs", "compare", HEADS),
    Page("views/corpus.py", "Corpus", "corpus", HEADS),
    Page("views/training.py", "Training steps", "training", RUNS),
    Page("views/experiment.py", "Experiment: heads pruned", "experiment", RUNS),
    Page("views/trace.py", "Open a trace file", "trace", RUNS),
)


def sections() -> dict[str, list[Page]]:
    """The pages by menu section, in PAGES' order: what st.navigation draws as the top menu."""
    grouped: dict[str, list[Page]] = {}
    for page in PAGES:
        grouped.setdefault(page.section, []).append(page)
    return grouped
