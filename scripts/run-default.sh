#!/usr/bin/env bash
# Set everything up, then run the default sweep and print its report.
#   Every sample installs a real Debian package set (or writes 256 MiB with dd)
#   from a guest restored at its ready line (--start auto: booted once per
#   configuration and saved) onto a freshly created image.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/diskbench run \
  --format raw,qcow2 --preallocation off,falloc,metadata \
  --cache writeback --interface virtio-blk \
  --workload install,dd --payload small --repeat 2 "$@"
