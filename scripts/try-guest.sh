#!/bin/sh
# Boot the built guest by hand, the way the host harness launches it (TCG).
#
#   scripts/try-guest.sh [WORKLOAD] [BUS] [PAYLOAD] [EXTRA_APPEND...]
#
# WORKLOAD: install|dd|probe|sleep (default probe); BUS: virtio-blk, ide,
# ahci, nvme, virtio-scsi (default virtio-blk); PAYLOAD: small|full.
# Writes console.log and report.jsonl in $WORK (default /var/tmp/diskbench-try).
set -eu
workload=${1:-probe}
bus=${2:-virtio-blk}
payload=${3:-small}
[ $# -ge 3 ] && shift 3 || shift $#
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$here" && python3 -c 'from harness.guest import build_guest; print(build_guest(log=lambda s: None).build_dir)')
work=${WORK:-/var/tmp/diskbench-try}
mkdir -p "$work"
rm -f "$work/console.log" "$work/report.jsonl" "$work/t.qcow2"
qemu-img create -q -f qcow2 "$work/t.qcow2" 2G
case "$bus" in
    virtio-blk) disk="-device virtio-blk-pci,drive=disk0,serial=diskbench-disk" ;;
    ide) disk="-device ide-hd,drive=disk0,bus=ide.0" ;;
    ahci) disk="-device ahci,id=ahci0 -device ide-hd,drive=disk0,bus=ahci0.0" ;;
    nvme) disk="-device nvme,drive=disk0,serial=diskbench-disk" ;;
    virtio-scsi) disk="-device virtio-scsi-pci,id=scsi0 -device scsi-hd,drive=disk0,bus=scsi0.0" ;;
    *) echo "unknown bus $bus" >&2; exit 2 ;;
esac
start=$(date +%s.%N)
# shellcheck disable=SC2086
qemu-system-x86_64 -nodefaults -nic none -display none -sandbox on -no-reboot \
    -machine pc -accel tcg -m 256 -smp 1 \
    -kernel "$build/vmlinux" -initrd "$build/initramfs.cpio" \
    -append "console=ttyS0 panic=-1 loglevel=4 diskbench.workload=$workload $*" \
    -serial "file:$work/console.log" \
    -device virtio-serial-pci,id=vser0 \
    -chardev "file,id=report,path=$work/report.jsonl" \
    -device virtserialport,bus=vser0.0,chardev=report,name=org.diskbench.report \
    -drive "if=none,id=payload,file=$build/payload-$payload.img,format=raw,readonly=on" \
    -device virtio-blk-pci,drive=payload,serial=diskbench-payload \
    -drive "if=none,id=disk0,file=$work/t.qcow2,format=qcow2,cache=writeback,aio=threads" \
    $disk
end=$(date +%s.%N)
cat "$work/report.jsonl"
echo "wall: $(echo "$end - $start" | bc) s"
