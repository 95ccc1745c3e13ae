#!/usr/bin/env bash
# Refresh the screenshots of the README and docs/: the browser tests save PNGs into screenshots/ (git-ignored); this
# copies the ones they show (every NAME.png that README.md names as docs/screenshots/NAME.png and docs/*.md as
# screenshots/NAME.png) into docs/screenshots/.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest -q -m browser tests/test_browser*.py
mkdir -p docs/screenshots
for name in $(grep -oh 'screenshots/[A-Za-z0-9_.-]*\.png' README.md docs/*.md | xargs -n1 basename | sort -u); do
  cp "screenshots/$name" "docs/screenshots/$name"
done
ls -l docs/screenshots
