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
  # the newest go there is: the one on PATH, /usr/local/go's, Debian's go-1.NN packages
  go_bin=""
  best=0
  for candidate in "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go-1.*/bin/go; do
    [ -x "$candidate" ] || continue
    minor=$("$candidate" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
    if [ -n "$minor" ] && [ "$minor" -gt "$best" ]; then best=$minor; go_bin=$candidate; fi
  done
  [ -n "$go_bin" ] || { echo "actionlint.sh: no go: run scripts/setup.sh (it installs golang-go)" >&2; exit 3; }
  toolchain=local
  if [ "$best" -lt 25 ]; then
    # go 1.21 and later fetch a newer toolchain from the Go module proxy; 1.19 and 1.20 cannot
    [ "$best" -ge 21 ] || {
      echo "actionlint.sh: actionlint $ACTIONLINT_VERSION needs go 1.25 or later, found go1.$best ($go_bin):" \
        "install a newer Go (https://go.dev/dl/) and put it first on PATH" >&2
      exit 3
    }
    toolchain=go1.25.0
  fi
  echo "actionlint.sh: building actionlint $ACTIONLINT_VERSION with $("$go_bin" version) (toolchain $toolchain)" >&2
  mkdir -p .venv/bin
  GOBIN="$PWD/.venv/bin" GOTOOLCHAIN=$toolchain GOFLAGS='' \
    "$go_bin" install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
fi
exec "$bin" -no-color "$@" .github/workflows/*.yml
