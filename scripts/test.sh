#!/usr/bin/env bash
# Set everything up, then run the linter, the type checker and the whole test suite (or, with
# arguments, pytest with those arguments instead of the whole suite).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== ruff" >&2
.venv/bin/ruff check harness tests benchmarks
.venv/bin/ruff format --check harness tests benchmarks
echo "== mypy" >&2
.venv/bin/mypy
echo "== gate-comment action: npm ci, tsc, vitest, dist check" >&2
bash scripts/test-action.sh
echo "== actionlint" >&2
bash scripts/actionlint.sh
if [ "$#" -gt 0 ]; then
  # the tests asked for, as asked
  echo "== pytest $*" >&2
  exec .venv/bin/pytest "$@"
fi
# every test, in two tiers (pyproject's markers, set in tests/conftest.py): what times nothing of
# the host, guests included, over one worker more than the host has CPUs (a file to a worker: its
# module's fixtures run once; the extra worker fills what the others leave idle while they wait on
# a deadline or a throttled guest), then the timed tests one at a time (they hold the host's speed
# to figures, a gate's verdict or a deadline); both tiers run, and the first that failed sets the
# exit code
status=0
workers=$(( $(nproc) + 1 ))
echo "== pytest -m 'not timed' -n $workers --dist loadfile --no-loadscope-reorder" >&2
.venv/bin/pytest -m "not timed" -n "$workers" --dist loadfile --no-loadscope-reorder || status=$?
echo "== pytest -m timed" >&2
.venv/bin/pytest -m timed || { rc=$?; [ "$status" -ne 0 ] || status=$rc; }
exit "$status"
