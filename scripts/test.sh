#!/usr/bin/env bash
# Installs what is needed (first time only) and runs the test suite under coverage (pytest-cov,
# .coveragerc). The whole suite (no arguments) also prints the line coverage of sago_engine and fails
# below $COVERAGE_MIN percent (default 90); with arguments (some test files) it only prints it.
# SAGO_NO_COVERAGE=1 runs pytest alone. Tests run in $SAGO_TEST_WORKERS processes (pytest-xdist;
# default: the CPUs this process may use, at most 4), one test file per process at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
workers=${SAGO_TEST_WORKERS:-$(.venv/bin/python -c 'import os; print(min(4, len(os.sched_getaffinity(0))))')}
par=()
[ "$workers" -gt 1 ] && par=(-n "$workers" --dist loadfile)
if [ -n "${SAGO_NO_COVERAGE:-}" ]; then
  exec .venv/bin/python -m pytest -q "${par[@]}" "$@"
fi
min=0
[ $# -eq 0 ] && min=${COVERAGE_MIN:-90}
echo "line coverage of sago_engine is printed at the end (fails below ${min}%)"
exec .venv/bin/python -m pytest -q --durations=30 "${par[@]}" --cov --cov-report=term --cov-fail-under="$min" "$@"
