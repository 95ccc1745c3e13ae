#!/usr/bin/env bash
# Refresh the README's screenshots: the browser tests save PNGs into screenshots/ (git-ignored); this copies the
# ones the README shows (every docs/screenshots/NAME.png it names) into docs/screenshots/.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest -q -m browser tests/test_browser*.py
mkdir -p docs/screenshots
for name in $(grep -o 'docs/screenshots/[A-Za-z0-9_.-]*\.png' README.md | sort -u | xargs -n1 basename); do
  cp "screenshots/$name" "docs/screenshots/$name"
done
ls -l docs/screenshots
