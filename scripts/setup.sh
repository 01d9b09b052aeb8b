#!/usr/bin/env bash
# Install everything diskbench needs on Debian 12, idempotently, then build the guest.
#   apt packages (QEMU, qemu-img, tools the guest build uses), a virtual
#   environment in .venv with the package and its pinned dev tools, and the
#   guest from the pinned recipe in images/ (cached by the recipe's hash).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  qemu-system-x86 qemu-utils        # the subject under test
  debootstrap                       # diskbench guest pin: resolves the minbase payload set
  e2fsprogs                         # mke2fs -d: the payload drive image
  util-linux-extra                  # fincore: how much of an image is in the host page cache
  fio strace                        # host disk models (--host-disk): strace sets their flush cost, fio checks them
  python3-venv ca-certificates
  git                               # asv checks out each commit; the gate makes worktrees
  chromium chromium-driver          # the tests open the published pages in headless Chromium
  npm                               # the history pages' scripts (npm pack), served with the pages
  nodejs                            # the gate-comment action's tests and bundle (Debian 12: node 18; the toolkit needs 20 or later)
  golang-go shellcheck              # scripts/actionlint.sh builds the pinned actionlint (Go >= 1.25); it runs shellcheck
  gh                                # the workflows call the GitHub API with gh; the workflow tests run them (tests/workflows)
)

log() { printf 'setup: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  [[ "$pkg" == \#* ]] && continue
  # the same tool from another source will do (NodeSource's nodejs bundles npm and conflicts with Debian's)
  case "$pkg" in nodejs) tool=node ;; npm) tool=npm ;; golang-go) tool=go ;; *) tool= ;; esac
  if [ -n "$tool" ] && command -v "$tool" >/dev/null 2>&1; then continue; fi
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  # a third-party source that cannot be reached must not stop the Debian ones
  $SUDO apt-get update -q >/dev/null || log "apt-get update reported errors; continuing with what it fetched"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
else
  log "apt packages present"
fi

PY=${PYTHON:-python3}
stamp=.venv/.diskbench-installed
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ]; then
  log "creating .venv with $($PY --version 2>&1)"
  "$PY" -m venv .venv
fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  # the tested versions (constraints.txt) within pyproject.toml's ranges; .[dev] includes .[plots]
  log "pip install -c constraints.txt -e .[dev]"
  .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev]'
  echo "$want" > "$stamp"
else
  log "python environment up to date"
fi

# Run as root, the harness starts QEMU and qemu-img as this unprivileged system account
# (harness/host/confine.py), a member of kvm for /dev/kvm. Run as anyone else, they run as that user.
QEMU_ACCOUNT=diskbench
if [ "$(id -u)" -eq 0 ]; then
  getent group kvm >/dev/null || groupadd --system kvm
  if ! id "$QEMU_ACCOUNT" >/dev/null 2>&1; then
    log "creating the system account $QEMU_ACCOUNT for QEMU"
    useradd --system --user-group --groups kvm --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$QEMU_ACCOUNT"
  fi
  id -nG "$QEMU_ACCOUNT" | grep -qw kvm || usermod -a -G kvm "$QEMU_ACCOUNT"
  # udev gives /dev/kvm to group kvm; a host without udev (a container) leaves it root's only
  if [ -c /dev/kvm ] && [ "$(stat -c %G /dev/kvm)" = root ]; then
    chgrp kvm /dev/kvm && chmod g+rw /dev/kvm
  fi
fi

# a workflow's job (GITHUB_ACTIONS=true) runs no workflow tests: only the test command needs act
if [ "${GITHUB_ACTIONS:-}" != true ]; then
  log "building act, the workflow tests' engine (once, at its pinned version)"
  bash scripts/act.sh
fi

log "building the guest (cached by the recipe's hash)"
.venv/bin/diskbench guest build >/dev/null
