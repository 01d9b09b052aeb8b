# install workload, sourced by /init: what a Debian installer does to a disk.
# partition (sfdisk), mkfs.ext4, mount, extract the essential packages with
# dpkg-deb | tar (debootstrap's first stage), then the target's own dpkg
# unpacks every payload package in a chroot (keeping dpkg's per-file fsync
# pattern), sync, umount, and e2fsck -fn.

PART=/dev/$(part1 "${DISK#/dev/}")
PAYLOAD=/payload
MANIFEST=$PAYLOAD/manifest.txt

install_partition() {
    printf 'label: dos\n,,L\n' | /sbin/sfdisk -q --wipe always "$DISK" || return
    wait_dev "$PART"
}

install_mkfs() { /sbin/mkfs.ext4 -q -F "$PART"; }

# noinit_itable: no ext4lazyinit thread zeroing inode tables behind the workload's back. It
# starts after a random delay of up to 5 s and writes ~2 MiB per block group while it runs, so
# a sample wrote 0 to 33 MB more at random (docs/snapshot-start.md).
install_mount() { mount -t ext4 -o noinit_itable "$PART" /target; }

install_extract() {
    cd /target || return
    # bookworm's debootstrap makes a merged-/usr target before extracting.
    mkdir -p usr/bin usr/sbin usr/lib usr/lib64 || return
    for d in bin sbin lib lib64; do ln -s "usr/$d" "$d" || return; done
    while read -r class file; do
        [ "$class" = essential ] || continue
        /usr/bin/dpkg-deb --fsys-tarfile "$PAYLOAD/debs/$file" |
            /bin/tar -x --keep-directory-symlink -f - -C /target || return
    done <"$MANIFEST"
    cd /
}

install_unpack() {
    cd /target || return
    mkdir -p var/lib/dpkg/info var/lib/dpkg/updates var/lib/dpkg/triggers \
        proc dev sys run payload tmp || return
    chmod 1777 tmp
    : >var/lib/dpkg/available
    # As debootstrap does: pretend dpkg is installed so that its own unpack
    # does not trip over a missing status entry.
    ver=$(/usr/bin/dpkg-deb -f "$PAYLOAD/debs/$(grep -m1 ' dpkg_' "$MANIFEST" | cut -d' ' -f2)" Version)
    printf 'Package: dpkg\nVersion: %s\nMaintainer: unknown\nStatus: install ok installed\n\n' \
        "$ver" >var/lib/dpkg/status
    : >var/lib/dpkg/info/dpkg.list
    cd /
    mount -t proc proc /target/proc || return
    mount -t devtmpfs devtmpfs /target/dev || return
    mount -o bind,ro "$PAYLOAD" /target/payload || return
    set --
    while read -r class file; do set -- "$@" "/payload/debs/$file"; done <"$MANIFEST"
    DEBIAN_FRONTEND=noninteractive chroot /target /usr/bin/dpkg \
        --force-depends --force-overwrite --force-confold --unpack "$@"
    rc=$?
    umount /target/payload /target/dev /target/proc
    rmdir /target/payload
    return $rc
}

install_metrics() {
    files=$(find /target -xdev -type f | wc -l)
    if [ -x /target/usr/bin/du ]; then
        bytes=$(chroot /target /usr/bin/du -sxb / | cut -f1)
    else
        bytes=$(( $(du -sxk /target | cut -f1) * 1024 ))
    fi
    packages=$(wc -l <"$MANIFEST")
    METRICS="{\"files\":$files,\"bytes\":$bytes,\"packages\":$packages}"
}

run_workload() {
    mkdir -p /payload
    mount -t ext2 -o ro "$PAYLOAD_DEV" /payload || {
        ERROR="setup failed: cannot mount payload ${PAYLOAD_DEV:-(none)}"
        return 1
    }
    phase partition install_partition || return
    phase mkfs install_mkfs || return
    phase mount install_mount || return
    phase extract install_extract || return
    phase unpack install_unpack || return
    phase sync sync || return
    install_metrics
    phase umount umount /target || return
    phase fsck /sbin/e2fsck -fn "$PART"
    FSCK_RC=$PH_rc
}
