#!/usr/bin/env bash
# Set everything up, then run the default sweep and print its report.
#   Every sample installs a real Debian package set (or writes 256 MiB with dd)
#   from a freshly booted guest onto a freshly created image.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/diskbench run \
  --format raw,qcow2 --preallocation off,falloc,metadata \
  --cache writeback --interface virtio-blk \
  --workload install,dd --payload small --repeat 2 "$@"
