"""The bundle's shell scripts: the self-extracting entry, the environment its programs run in, and
``bin/diskbench`` (pure text; :mod:`harness.bundle.build` writes them).

The entry is one file: a ``sh`` script followed by a plain ``tar`` of the tree's parts, each a
``tar.xz`` (:func:`harness.bundle.build.make_bundle`).  It needs
``sh`` and a CPython >= 3.11 (which unpacks the tree with its own ``tarfile`` and ``lzma``), and
nothing else of the machine: no ``tar``, ``xz``, QEMU, git or package manager.
"""

from __future__ import annotations

#: where the entry unpacks to, unless ``$DISKBENCH_BUNDLE_DIR`` says otherwise
UNPACK_DIR = "/tmp/diskbench-bundle-{id}"
#: the entry's name in the bundle's output directory
ENTRY_NAME = "diskbench-bundle.sh"
#: the oldest CPython the harness runs on
PYTHON_MIN = (3, 11)
#: digits of the payload's offset in the entry (the header is padded to its final length)
_OFFSET_DIGITS = 12

# Finds a CPython >= 3.11: $DISKBENCH_PYTHON, $PYTHON, then python3, python3.N on PATH.
_FIND_PYTHON = """\
if [ -z "${DISKBENCH_PYTHON:-}" ]; then
  for p in ${PYTHON:-} python3 python3.14 python3.13 python3.12 python3.11; do
    if command -v "$p" >/dev/null 2>&1 &&
      "$p" -c 'import sys; sys.exit(sys.version_info < (@MAJOR@, @MINOR@))' 2>/dev/null; then
      DISKBENCH_PYTHON=$(command -v "$p")
      break
    fi
  done
fi
if [ -z "${DISKBENCH_PYTHON:-}" ]; then
  echo "diskbench bundle: no CPython @MAJOR@.@MINOR@ or later here (python3): install one, or name it in \\$PYTHON" >&2
  exit 3
fi
export DISKBENCH_PYTHON
""".replace("@MAJOR@", str(PYTHON_MIN[0])).replace("@MINOR@", str(PYTHON_MIN[1]))

_UNPACK_PY = """\
import os, shutil, sys, tarfile, tempfile
me, offset, dest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    import lzma  # noqa: F401
except ImportError:
    sys.exit("diskbench bundle: this Python has no lzma module: use another (PYTHON=...)")
parent = os.path.dirname(os.path.abspath(dest))
os.makedirs(parent, exist_ok=True)
tmp = tempfile.mkdtemp(prefix=".diskbench-bundle-", dir=parent)
try:
    with open(me, "rb") as f:
        f.seek(offset)
        with tarfile.open(fileobj=f, mode="r|") as outer:
            for part in outer:
                with tarfile.open(fileobj=outer.extractfile(part), mode="r|xz") as tar:
                    if hasattr(tarfile, "tar_filter"):
                        tar.extractall(tmp, filter="tar")
                    else:
                        tar.extractall(tmp)
    os.chmod(tmp, 0o755)
    open(os.path.join(tmp, ".unpacked"), "w").close()
    try:
        os.rename(tmp, dest)
    except OSError:
        if not os.path.isfile(os.path.join(dest, ".unpacked")):
            raise
        shutil.rmtree(tmp)
except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
"""

_ENTRY = """\
#!/bin/sh
# diskbench bundle @ID@ (@WHAT@): QEMU with its libraries and loader,
# the built guest and the harness, for a bare x86-64 Linux machine. Needs sh and CPython >= 3.11.
#
#   sh @NAME@                             the KVM check (kvm-check --help)
#   sh @NAME@ kvm-check [--quick] [--out DIR]
#   sh @NAME@ diskbench ARGS...           any diskbench command (diskbench --help)
#   sh @NAME@ unpack                      unpack only; print where
#
# Unpacks once to /tmp/diskbench-bundle-@ID@ ($DISKBENCH_BUNDLE_DIR elsewhere).
set -eu
offset=@OFFSET@
me=$0
case $me in /*) ;; *) me="$(pwd)/$me" ;; esac
@FIND_PYTHON@
dest=${DISKBENCH_BUNDLE_DIR:-@UNPACK_DIR@}
if [ ! -f "$dest/.unpacked" ]; then
  echo "diskbench bundle: unpacking to $dest" >&2
  "$DISKBENCH_PYTHON" -c '@UNPACK_PY@' "$me" "$offset" "$dest"
fi
cmd=${1:-kvm-check}
[ $# -gt 0 ] && shift
case $cmd in
  kvm-check) exec sh "$dest/scripts/kvm-check.sh" "$@" ;;
  diskbench) exec sh "$dest/bin/diskbench" "$@" ;;
  unpack) echo "$dest"; exit 0 ;;
  -h|--help|help) sed -n '2,11p' "$me" | sed 's/^# \\{0,1\\}//'; exit 0 ;;
  *) echo "diskbench bundle: unknown command '$cmd': use kvm-check, diskbench or unpack" >&2; exit 2 ;;
esac
exit 0
"""

#: sourced by ``bin/diskbench`` and ``scripts/kvm-check.sh`` with ``r`` set to the bundle's root
ENV_SCRIPT = (
    """\
# diskbench bundle: the environment its programs run in (sourced with $r set to the bundle's root)
"""
    + _FIND_PYTHON
    + """\
tag=$("$DISKBENCH_PYTHON" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
if [ ! -d "$r/site-$tag" ]; then
  echo "diskbench bundle: $DISKBENCH_PYTHON is $tag; this bundle's compiled modules are for: $(cd "$r" && echo site-cp*)" >&2
  exit 3
fi
export DISKBENCH_BUNDLE="$r"
export PYTHONPATH="$r:$r/site:$r/site-$tag"
export PYTHONNOUSERSITE=1
export PATH="$r/bin:$PATH"
export GIT_EXEC_PATH="$r/bin"
export GIT_TEMPLATE_DIR="$r/share/git-templates"
export DISKBENCH_CACHE="${DISKBENCH_CACHE:-$r/cache}"
"""
)

DISKBENCH_SCRIPT = """\
#!/bin/sh
# diskbench bundle: the diskbench command, with the bundle's harness, QEMU (--qemu, --qemu-img:
# a later --qemu of the caller's wins) and guest
set -eu
r=$(cd "${0%/*}/.." && pwd)
. "$r/env.sh"
exec "$DISKBENCH_PYTHON" -m harness --qemu "$r/bin/qemu-system-x86_64" --qemu-img "$r/bin/qemu-img" "$@"
"""


def entry_header(*, bundle_id: str, what: str) -> bytes:
    """The entry script, its ``offset`` the length of the script itself: the payload follows it
    (pure)."""
    unpack_py = _UNPACK_PY.replace("'", "'\"'\"'")
    text = (
        _ENTRY.replace("@FIND_PYTHON@", _FIND_PYTHON.rstrip("\n"))
        .replace("@UNPACK_PY@", unpack_py)
        .replace("@UNPACK_DIR@", UNPACK_DIR.format(id=bundle_id))
        .replace("@NAME@", ENTRY_NAME)
        .replace("@ID@", bundle_id)
        .replace("@WHAT@", what)
    )
    placeholder = "0" * _OFFSET_DIGITS
    sized = text.replace("@OFFSET@", placeholder).encode()
    return text.replace("@OFFSET@", str(len(sized)).rjust(_OFFSET_DIGITS, "0")).encode()
