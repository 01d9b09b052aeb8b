# fio workload, sourced by /init: fio's job file (fio.fio) on the raw disk under test, then on a
# file of the ext4 made on it (FIO_TARGET: raw, file or both).  fio comes from the tools drive
# (serial diskbench-tools, mounted read-only at /tools), started through its own loader.
# Its JSON goes to the host as outputs.fio_raw_json / outputs.fio_file_json.

# its parameters, as the host tells them, with the defaults the host's declaration has
FIO_TARGET=$(param fio_target both)
FIO_SIZE_MIB=$(param fio_size_mib 64)
FIO_IOS=$(param fio_ios 2000)
FIO_FSYNC_IOS=$(param fio_fsync_ios 200)
FIO_JOBS=$(param fio_jobs all)

FIO=/tools/bin/fio

fio_tools() {
    [ -n "$TOOLS_DEV" ] || { echo "no tools drive (serial diskbench-tools)"; return 1; }
    mkdir -p /tools && mount -t ext2 -o ro "$TOOLS_DEV" /tools || return
    [ -x "$FIO" ] || { echo "no $FIO on it: list /usr/bin/fio in [tools] files of images/recipe.toml"; return 1; }
}

# fio_jobs TARGET PREFIX OUT: the job file for TARGET, run, JSON in OUT
fio_jobs() {
    sed -e "s|\${TARGET}|$1|g" -e "s|\${PREFIX}|$2|g" -e "s|\${SIZE}|${FIO_SIZE_MIB}M|g" \
        -e "s|\${IOS}|$FIO_IOS|g" -e "s|\${FSYNC_IOS}|$FIO_FSYNC_IOS|g" \
        /usr/share/diskbench/fio.fio >"/tmp/$2jobs.fio" || return
    # random: the 4 KiB random jobs only (fio runs the sections named, in the file's order)
    set -- "$3" "/tmp/$2jobs.fio" "$2"
    if [ "$FIO_JOBS" = random ]; then
        set -- "$@" --section="$3rand-write-qd1" --section="$3rand-write-qd32" \
            --section="$3rand-read-qd1" --section="$3rand-read-qd32"
    fi
    FJ_out=$1 FJ_jobs=$2
    shift 3
    "$FIO" --output-format=json --eta=never --output="$FJ_out" "$@" "$FJ_jobs"
}
fio_raw() { fio_jobs "$DISK" raw- /tmp/fio-raw.json; }
fio_mkfs() { /sbin/mke2fs -q -F -t ext4 "$DISK"; }
# noinit_itable: no ext4lazyinit thread zeroing inode tables behind the workload's back. It
# starts after a random delay of up to 5 s and writes ~2 MiB per block group while it runs, so
# a sample wrote 0 to 33 MB more at random (docs/snapshot-start.md).
fio_mount() { mount -t ext4 -o noinit_itable "$DISK" /target; }
fio_file() { fio_jobs /target/fio.bin file- /tmp/fio-file.json; }

run_workload() {
    case "$FIO_TARGET" in
        raw|file|both) ;;
        *) ERROR="setup failed: unsupported diskbench.fio_target=$FIO_TARGET"; return 1 ;;
    esac
    case "$FIO_JOBS" in
        all|random) ;;
        *) ERROR="setup failed: unsupported diskbench.fio_jobs=$FIO_JOBS"; return 1 ;;
    esac
    # the message goes into the report's JSON as it is: no quote, backslash or control character
    fio_tools >/tmp/tools.log 2>&1 || {
        ERROR="setup failed: tools drive: $(tail -n 1 /tmp/tools.log | tr -d '"\\\000-\037')"
        console "diskbench: $ERROR"
        return 1
    }
    # OUTPUTS holds each target's JSON as soon as fio wrote it, also when fio or a later phase
    # failed: the host then names the failed job and its error.
    out=
    if [ "$FIO_TARGET" != file ]; then
        phase fio_raw fio_raw
        rc=$PH_rc
        if [ -s /tmp/fio-raw.json ]; then out="\"fio_raw_json\":$(json_file /tmp/fio-raw.json)"; fi
        OUTPUTS="{$out}"
        [ $rc -eq 0 ] || return $rc
    fi
    if [ "$FIO_TARGET" != raw ]; then
        phase mkfs fio_mkfs || return
        phase mount fio_mount || return
        phase fio_file fio_file
        rc=$PH_rc
        if [ -s /tmp/fio-file.json ]; then
            out="$out${out:+,}\"fio_file_json\":$(json_file /tmp/fio-file.json)"
        fi
        OUTPUTS="{$out}"
        [ $rc -eq 0 ] || return $rc
        phase umount umount /target || return
        phase fsck /sbin/e2fsck -fn "$DISK"
        FSCK_RC=$PH_rc
    fi
}
