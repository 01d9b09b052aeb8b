# dd workload (seed 001), sourced by /init: mkfs.$FS on the whole disk under
# test, then DD_MIB MiB written in DD_CHUNK_MIB MiB chunks into one file and
# flushed; the write phase includes the flush (conv=fsync, then sync).

# its parameters, as the host tells them, with the defaults the host's declaration has
FS=$(param fs ext4)
DD_MIB=$(param dd_mib 256)
DD_CHUNK_MIB=$(param dd_chunk_mib 2)

# lazy_journal_init=1: mke2fs never zeroes the journal. It used to zero it in some samples and
# not others, at random (the host saw 64 MiB of write-zeroes more or less: on the native disk one
# sample in five without it, on the period disk two in three); with it, 30 of 30 samples wrote
# the same (docs/host-disks.md). nodiscard: no discard of the whole disk first either.
dd_mkfs() { /sbin/mke2fs -q -F -E nodiscard,lazy_journal_init=1 -t "$FS" "$DISK"; }
# noinit_itable: no ext4lazyinit thread zeroing inode tables behind the workload's back. It
# starts after a random delay of up to 5 s and writes ~2 MiB per block group while it runs, so
# a sample wrote 0 to 33 MB more at random (docs/snapshot-start.md).
dd_mount() { mount -t "$FS" -o noinit_itable "$DISK" /target; }
dd_write() {
    dd if=/dev/zero of=/target/dd.bin bs="${DD_CHUNK_MIB}M" \
        count=$(( DD_MIB / DD_CHUNK_MIB )) conv=fsync && sync
}

run_workload() {
    case "$FS" in
        ext2|ext3|ext4) ;;
        *) ERROR="setup failed: unsupported diskbench.fs=$FS"; return 1 ;;
    esac
    phase mkfs dd_mkfs || return
    phase mount dd_mount || return
    phase write dd_write || return
    write_ns=$PH_d
    mib=$(( DD_MIB / DD_CHUNK_MIB * DD_CHUNK_MIB ))
    # MiB/s with 3 decimals in integer arithmetic: MiB * 1e12 / ns = MiB/s * 1000.
    rate=$(( mib * 1000000000000 / write_ns ))
    frac=$(( rate % 1000 + 1000 ))
    METRICS="{\"bytes\":$(( mib * 1048576 )),\"mib_per_s\":$(( rate / 1000 )).${frac#1}}"
    phase umount umount /target || return
    phase fsck /sbin/e2fsck -fn "$DISK"
    FSCK_RC=$PH_rc
}
