# toy workload (tests only), sourced by /init: mkfs.$FS of the disk under test, TOY_BLOCKS MiB
# written into one file and flushed, e2fsck -fn.

# its parameters, as the host tells them, with the defaults the host's declaration has
FS=$(param fs ext4)
TOY_BLOCKS=$(param toy_blocks 8)

toy_mkfs() { /sbin/mke2fs -q -F -t "$FS" "$DISK"; }
toy_write() {
    mount -t "$FS" -o noinit_itable "$DISK" /target || return
    dd if=/dev/zero of=/target/toy.bin bs=1M count="$TOY_BLOCKS" conv=fsync && sync || return
    umount /target
}

run_workload() {
    phase mkfs toy_mkfs || return
    phase toy toy_write || return
    rate=$(( TOY_BLOCKS * 1000000000000 / PH_d ))
    frac=$(( rate % 1000 + 1000 ))
    METRICS="{\"bytes\":$(( TOY_BLOCKS * 1048576 )),\"mib_per_s\":$(( rate / 1000 )).${frac#1}}"
    phase fsck /sbin/e2fsck -fn "$DISK"
    FSCK_RC=$PH_rc
}
