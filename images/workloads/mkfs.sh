# mkfs workload (seed 003), sourced by /init: mkfs.$FS of the whole disk under
# test with every inode table and the journal really written, then e2fsck -fn.
# lazy_itable_init=0 and lazy_journal_init=0 alone are not enough: ext4 then
# zeroes through discard and takes 0.2 s on 2 GiB. nodiscard is not enough
# either: mke2fs 1.47 still zeroes inode tables and journal with
# fallocate(ZERO_RANGE), which virtio-blk passes on as WRITE_ZEROES requests
# and qcow2 turns into zero-cluster metadata (1 MB written on the host for
# 48 MiB of tables). UNIX_IO_NOZEROOUT makes libext2fs write zero buffers
# instead, as seed 003's mke2fs 1.41 did: the slow case the seed measures.
# mke2fs's output (its block and inode counts, the number of inode tables it
# wrote) goes to the host as outputs.mke2fs (harness/workloads/mkfs.py).

# its parameters, as the host tells them, with the defaults the host's declaration has
FS=$(param fs ext4)

mkfs_mkfs() {
    UNIX_IO_NOZEROOUT=1 /sbin/mke2fs -F -t "$FS" -E lazy_itable_init=0,lazy_journal_init=0,nodiscard "$DISK"
}

run_workload() {
    case "$FS" in
        ext2|ext3|ext4) ;;
        *) ERROR="setup failed: unsupported diskbench.fs=$FS"; return 1 ;;
    esac
    read -r sectors <"/sys/block/${DISK#/dev/}/size"
    phase mkfs mkfs_mkfs || return
    METRICS="{\"bytes\":$(( sectors * 512 ))}"
    OUTPUTS="{\"mke2fs\":$(json_file /tmp/mkfs.log)}"
    phase fsck /sbin/e2fsck -fn "$DISK"
    FSCK_RC=$PH_rc
}
