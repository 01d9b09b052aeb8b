#!/usr/bin/env bash
# The gate-comment action (.github/actions/gate-comment): install its pinned dependencies
# (npm ci, again only when package-lock.json or node's major version changed), type-check and
# test it (tsc, vitest), and check that the committed dist/index.js is what src/ builds.
set -euo pipefail
cd "$(dirname "$0")/../.github/actions/gate-comment"

stamp=node_modules/.diskbench-installed
want="$(sha256sum package-lock.json | cut -d' ' -f1) node-$(node -p 'process.versions.node.split(".")[0]')"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "test-action: npm ci ($(node --version))" >&2
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi
npm test --silent
npm run --silent check-dist
