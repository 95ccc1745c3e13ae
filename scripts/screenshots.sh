#!/usr/bin/env bash
# Refresh the README's screenshots: the browser tests save one PNG per page into screenshots/ (git-ignored);
# this copies them into docs/screenshots/, which the README shows.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest -q -m browser tests/test_browser.py tests/test_browser_paper.py tests/test_browser_rollout.py
mkdir -p docs/screenshots
cp screenshots/*.png docs/screenshots/
ls -l docs/screenshots
