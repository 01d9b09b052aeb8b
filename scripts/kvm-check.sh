#!/bin/sh
# What this machine has, whether a guest boots under KVM, and a gate on it, in one command of at
# most 8 minutes (docs/kvm.md):
#   sh scripts/kvm-check.sh [--quick] [--out DIR] [--work-dir DIR]
# (a) CPUs, memory, /dev/kvm, the QEMU; a guest booted under TCG and under KVM, timed, with the
#     exact error where it does not boot;
# (b) where KVM works: a dd and an install sample under KVM beside the same under TCG, an A/A gate
#     of the default spec with guest_pairs_at_once = "auto", the booth-2010 preset at a small scale;
# (c) where it does not: the A/A gate under TCG, as many crossed pairs at once as the CPUs give.
# Writes DIR/kvm-check.json and DIR/kvm-check.txt (DIR: --out, else $OUT, else ./kvm-check).
# --quick: a tiny check (a gate of two small dd cells, 5 rounds), as the tests run it.
# Runs from the bundle (`sh diskbench-bundle.sh kvm-check`) or from a checkout set up with
# scripts/setup.sh. Exit 0: the check ran through, KVM or not; 3: no guest boots, or the gate failed.
set -eu
r=$(cd "${0%/*}/.." && pwd)
out_flag=
if [ -n "${OUT:-}" ]; then out_flag="--out=$OUT"; fi
if [ -f "$r/env.sh" ]; then
  exec sh "$r/bin/diskbench" kvmcheck ${out_flag:+"$out_flag"} "$@"
elif [ -x "$r/.venv/bin/diskbench" ]; then
  exec "$r/.venv/bin/diskbench" kvmcheck ${out_flag:+"$out_flag"} "$@"
fi
echo "kvm-check: run it from the bundle (sh diskbench-bundle.sh kvm-check) or a checkout set up with scripts/setup.sh" >&2
exit 3
