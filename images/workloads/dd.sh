# dd workload (seed 001), sourced by /init: mkfs.$FS on the whole disk under
# test, then DD_MIB MiB written in DD_CHUNK_MIB MiB chunks into one file and
# flushed; the write phase includes the flush (conv=fsync, then sync).

# its parameters, as the host tells them, with the defaults the host's declaration has
FS=$(param fs ext4)
DD_MIB=$(param dd_mib 256)
DD_CHUNK_MIB=$(param dd_chunk_mib 2)

# nodiscard: after discarding the disk, mke2fs skipped zeroing its journal in about one sample of
# five (the host saw 64 MiB of write-zeroes less, at random); without the discard it zeroes it
# every time (24 of 24 samples, docs/host-disks.md).
dd_mkfs() { /sbin/mke2fs -q -F -E nodiscard -t "$FS" "$DISK"; }
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
