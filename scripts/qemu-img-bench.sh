#!/usr/bin/env bash
# Host-side qemu-img benchmarks (benchmarks/test_qemu_img.py) with a saved baseline:
#   scripts/qemu-img-bench.sh save [PYTEST ARGS...]      run and save under results/pytest-benchmark/
#   scripts/qemu-img-bench.sh compare [PYTEST ARGS...]   run, compare with the latest saved run, and
#                                                        fail (non-zero) if a median is 10% slower
# $DISKBENCH_BENCH_FAIL changes the gate (default median:10%), $DISKBENCH_BENCH_SIZE the image size,
# $DISKBENCH_BENCH_ROUNDS the rounds, $DISKBENCH_WORK_DIR where the images are created.
set -euo pipefail
cd "$(dirname "$0")/.."
storage="file://results/pytest-benchmark"
action="${1:-}"
shift || true
case "$action" in
save)
    exec .venv/bin/pytest benchmarks/test_qemu_img.py --benchmark-storage="$storage" \
        --benchmark-autosave "$@"
    ;;
compare)
    exec .venv/bin/pytest benchmarks/test_qemu_img.py --benchmark-storage="$storage" \
        --benchmark-compare --benchmark-compare-fail="${DISKBENCH_BENCH_FAIL:-median:10%}" "$@"
    ;;
*)
    echo "usage: scripts/qemu-img-bench.sh save|compare [PYTEST ARGS...]" >&2
    exit 2
    ;;
esac
