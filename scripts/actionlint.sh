#!/usr/bin/env bash
# Lint every GitHub workflow with actionlint (shellcheck checks their scripts when it is installed).
# actionlint is built once from its Go module, at the pinned version, into .venv/bin
# (scripts/go-install.sh). v1.7.12 knows the node24 runtime of the gate-comment action (v1.7.7
# refused it) and needs Go 1.25 or later.
set -euo pipefail
cd "$(dirname "$0")/.."

ACTIONLINT_VERSION=v1.7.12
# the go.sum line of github.com/rhysd/actionlint v1.7.12 (the module zip's h1: hash)
ACTIONLINT_SUM=h1:vQ4GeJN86C0QH+gTUQcs8McmK62OLT3kmakPMtEWYnY=
bin=.venv/bin/actionlint

if [ ! -x "$bin" ] || [ "$("$bin" --version 2>/dev/null | head -1)" != "$ACTIONLINT_VERSION" ]; then
  # shellcheck source=scripts/go-install.sh
  source scripts/go-install.sh
  go_install github.com/rhysd/actionlint/cmd/actionlint "$ACTIONLINT_VERSION" "$ACTIONLINT_SUM"
fi
exec "$bin" -no-color "$@" .github/workflows/*.yml
