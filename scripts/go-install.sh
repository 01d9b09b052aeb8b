#!/usr/bin/env bash
# go_install MODULE/PKG VERSION [H1SUM]: build a Go tool from its module, at a pinned version, into
# .venv/bin (sourced by scripts/actionlint.sh and scripts/act.sh). The newest Go on the machine
# builds it; one older than 1.25 but at least 1.21 fetches go1.25.0 from the Go module proxy
# (Debian 12's golang-go is 1.19: put a newer go first on PATH). With H1SUM the module's zip must
# hash to it (the go.sum line of the module; checked before anything of it is built), so a
# proxy that serves other bytes for the version stops the build.
# Exit 3 (infrastructure) when no usable Go is found or the checksum differs.

go_install() {
  local pkg=$1 version=$2 want_sum=${3:-} module
  module=${pkg%%/cmd/*}
  # the newest go there is: the one on PATH, /usr/local/go's, Debian's go-1.NN packages
  local go_bin="" best=0 candidate minor
  for candidate in "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go-1.*/bin/go; do
    [ -x "$candidate" ] || continue
    minor=$("$candidate" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
    if [ -n "$minor" ] && [ "$minor" -gt "$best" ]; then best=$minor; go_bin=$candidate; fi
  done
  [ -n "$go_bin" ] || { echo "go-install: no go: run scripts/setup.sh (it installs golang-go)" >&2; return 3; }
  local toolchain=local
  if [ "$best" -lt 25 ]; then
    # go 1.21 and later fetch a newer toolchain from the Go module proxy; 1.19 and 1.20 cannot
    [ "$best" -ge 21 ] || {
      echo "go-install: $module $version needs go 1.25 or later, found go1.$best ($go_bin):" \
        "install a newer Go (https://go.dev/dl/) and put it first on PATH" >&2
      return 3
    }
    toolchain=go1.25.0
  fi
  if [ -n "$want_sum" ]; then
    local got_sum
    got_sum=$(GOTOOLCHAIN=$toolchain GOFLAGS='' "$go_bin" mod download -json "$module@$version" |
      sed -n 's/^[[:space:]]*"Sum": "\(.*\)",*$/\1/p')
    if [ "$got_sum" != "$want_sum" ]; then
      echo "go-install: $module@$version hashes to '${got_sum:-nothing}', pinned $want_sum: not built" >&2
      return 3
    fi
  fi
  echo "go-install: building $pkg@$version with $("$go_bin" version) (toolchain $toolchain)" >&2
  mkdir -p .venv/bin
  GOBIN="$PWD/.venv/bin" GOTOOLCHAIN=$toolchain GOFLAGS='' "$go_bin" install "$pkg@$version"
}
