#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine, then run all of it.
#   ./scripts/test.sh                 # the whole suite (arguments go to pytest)
#   A0R_FAST=1 ./scripts/test.sh      # skip the slow tiers (real Infinity server, headless browser)
# Python packages go into .venv (or the active virtualenv; A0R_NO_VENV=1 uses the current Python).
# The real-server tier gets its own .venv-infinity (Infinity pins numpy<2 and needs CPU torch).
# Chromium for the browser tests comes from Debian (apt-get, when run as root and it is missing).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if [[ -z "${VIRTUAL_ENV:-}" && "${A0R_NO_VENV:-0}" != "1" ]]; then
  [[ -x .venv/bin/python ]] || "$python" -m venv .venv
  python=.venv/bin/python
fi
"$python" -m pip install -q -e ".[test,bench]"
# One worker per core, at most 4 (pytest-xdist); "-n 0" runs in one process.
parallel=(-n auto --maxprocesses 4)

if [[ "${A0R_FAST:-0}" == "1" ]]; then
  exec "$python" -m pytest "${parallel[@]}" -m "not integration and not browser" "$@"
fi

if ! command -v chromium >/dev/null 2>&1 && [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
fi

if [[ -z "${A0R_INFINITY_PYTHON:-}" ]]; then
  [[ -x .venv-infinity/bin/python ]] || "${PYTHON:-python3}" -m venv .venv-infinity
  .venv-infinity/bin/python -m pip install -q -r tests/integration/requirements.txt
  export A0R_INFINITY_PYTHON="$PWD/.venv-infinity/bin/python"
fi

exec "$python" -m pytest "${parallel[@]}" "$@"
