# bonnie workload (seed 004's bonnie++ table), sourced by /init: mkfs.$FS on
# the whole disk under test, mount, bonnie++ in /target/bonnie, umount, and
# e2fsck -fn. bonnie++'s CSV line goes to the host as outputs.bonnie_csv; the
# host parses it (harness/workloads/bonnie.py).
#
# Flags, after seeds 000 and 004:
#   -f  skip the per-character tests: under emulation they measure the CPU
#       (one libc call per byte), not the disk. diskbench.bonnie_char=on runs
#       them (seed 004's Per Chr columns, and history's per-char series).
#   -b  no write buffering: bonnie++ fsync()s as it writes, as seeds 000 and
#       004 ran it. The guest then flushes its disk all through the test
#       instead of only at the end (-s 512 -r 256 on qcow2: 1375 device
#       flushes with -b, 39 without, in about the same 25 s under TCG), so
#       the disk's flush path is measured: the cache mode, qcow2's metadata
#       writes and lazy_refcounts, which is what the seeds compare.
#   -r  the RAM bonnie++ assumes: it refuses a test size below twice the RAM,
#       and the host chooses both (diskbench.bonnie_size_mib/_ram_mib).
#   -n  file-creation tests in multiples of 1024 files; 0 skips them.
#   -m  a fixed name: the CSV's name field is then never a hostname with a comma.
#   -u  0:0: run as root by number (the guest has no /etc/passwd).
#   -q  quiet: the CSV line on stdout, the human table on stderr.

# its parameters, as the host tells them, with the defaults the host's declaration has
FS=$(param fs ext4)
BONNIE_SIZE_MIB=$(param bonnie_size_mib 512)
BONNIE_RAM_MIB=$(param bonnie_ram_mib 256)
BONNIE_FILES=$(param bonnie_files 0)
BONNIE_CHAR=$(param bonnie_char off)
BONNIE_DIR=/target/bonnie

bonnie_mkfs() { /sbin/mke2fs -q -F -t "$FS" "$DISK"; }
# noinit_itable: no ext4lazyinit thread zeroing inode tables behind the workload's back. It
# starts after a random delay of up to 5 s and writes ~2 MiB per block group while it runs, so
# a sample wrote 0 to 33 MB more at random (docs/snapshot-start.md).
bonnie_mount() { mount -t "$FS" -o noinit_itable "$DISK" /target; }
bonnie_run() {
    mkdir -p "$BONNIE_DIR" || return
    fast=-f
    [ "$BONNIE_CHAR" = on ] && fast=
    /usr/sbin/bonnie++ -d "$BONNIE_DIR" -s "$BONNIE_SIZE_MIB" -r "$BONNIE_RAM_MIB" \
        -n "$BONNIE_FILES" -m diskbench -u 0:0 -q $fast -b >/tmp/bonnie.out || return
    # The CSV line starts with its format version (1.98 for bonnie++ 2.00a).
    grep '^[0-9][0-9.]*,' /tmp/bonnie.out | tail -n 1 >/tmp/bonnie.csv
    if [ ! -s /tmp/bonnie.csv ]; then
        echo "bonnie++ printed no CSV line; its stdout:"
        cat /tmp/bonnie.out
        return 1
    fi
}

run_workload() {
    case "$FS" in
        ext2|ext3|ext4) ;;
        *) ERROR="setup failed: unsupported diskbench.fs=$FS"; return 1 ;;
    esac
    phase mkfs bonnie_mkfs || return
    phase mount bonnie_mount || return
    phase bonnie bonnie_run || return
    OUTPUTS="{\"bonnie_csv\":$(json_file /tmp/bonnie.csv)}"
    phase umount umount /target || return
    phase fsck /sbin/e2fsck -fn "$DISK"
    FSCK_RC=$PH_rc
}
