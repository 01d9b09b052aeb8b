#!/usr/bin/env bash
# Set everything up, then run the linter, the type checker and the whole test suite.
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
echo "== pytest" >&2
exec .venv/bin/pytest "$@"
