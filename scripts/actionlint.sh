#!/usr/bin/env bash
# Lint every GitHub workflow with actionlint (shellcheck checks their scripts when it is installed).
# actionlint is built once from its Go module, at the pinned version, into .venv/bin. v1.7.12 knows
# the node24 runtime of the gate-comment action (v1.7.7 refused it) and needs Go 1.25 or later
# (Debian 12's golang-go is 1.19: put a newer go first on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

ACTIONLINT_VERSION=v1.7.12
bin=.venv/bin/actionlint

if [ ! -x "$bin" ] || [ "$("$bin" --version 2>/dev/null | head -1)" != "$ACTIONLINT_VERSION" ]; then
  command -v go >/dev/null || { echo "actionlint.sh: no go: run scripts/setup.sh (it installs golang-go)" >&2; exit 3; }
  echo "actionlint.sh: building actionlint $ACTIONLINT_VERSION with $(go version)" >&2
  mkdir -p .venv/bin
  GOBIN="$PWD/.venv/bin" GOTOOLCHAIN=local GOFLAGS= \
    go install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
fi
exec "$bin" -no-color "$@" .github/workflows/*.yml
