#!/usr/bin/env bash
# Build act (github.com/nektos/act), the workflow engine the workflow tests (tests/workflows) run
# the GitHub workflows with, once, at the pinned version whose module checksum is pinned too,
# into .venv/bin (scripts/go-install.sh). Then run it with the arguments given, if any.
set -euo pipefail
cd "$(dirname "$0")/.."

ACT_VERSION=v0.2.89
# the go.sum line of github.com/nektos/act v0.2.89 (the module zip's h1: hash)
ACT_SUM=h1:d9oFeJ6jUkaVExuG+XzAaMPDqoDrNHaGeiRb8IU+N5w=
bin=.venv/bin/act
stamp=.venv/bin/.act-version

if [ ! -x "$bin" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$ACT_VERSION $ACT_SUM" ]; then
  # shellcheck source=scripts/go-install.sh
  source scripts/go-install.sh
  go_install github.com/nektos/act "$ACT_VERSION" "$ACT_SUM"
  echo "$ACT_VERSION $ACT_SUM" > "$stamp"
fi
if [ "$#" -gt 0 ]; then exec "$bin" "$@"; fi
