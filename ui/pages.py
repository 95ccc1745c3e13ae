"""The app's pages, in the order the sidebar lists them: one list, which app.py builds its navigation from and the
tests and benches that visit every page read. Plain data (no streamlit): a test imports it without an app."""

from __future__ import annotations

from typing import NamedTuple


class Page(NamedTuple):
    script: str  # the page's file, from the repository root
    title: str  # what the sidebar and the browser's tab say
    url_path: str  # the page's address after the server's; "" for the default page (Explore)


PAGES = (
    Page("views/explore.py", "Explore", ""),
    Page("views/lesson.py", "Lesson", "lesson"),
    Page("views/generate.py", "Generate", "generate"),
    Page("views/paper.py", "Paper view", "paper"),
    Page("views/attention_math.py", "Attention math", "math"),
    Page("views/positional.py", "Positional encoding", "positional"),
    Page("views/masks.py", "Masks", "masks"),
    Page("views/rollout.py", "Attention rollout", "rollout"),
    Page("views/head_stats.py", "Head statistics", "heads"),
    Page("views/ablation.py", "Head ablation", "ablation"),
    Page("views/attribution.py", "Logit attribution", "attribution"),
    Page("views/compare.py", "Compare two inputs", "compare"),
    Page("views/training.py", "Training steps", "training"),
    Page("views/experiment.py", "Experiment: heads pruned", "experiment"),
    Page("views/trace.py", "Open a trace file", "trace"),
)
