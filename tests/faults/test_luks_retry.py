"""qemu-img's LUKS create that fails on "Unable to get accurate CPU usage" is tried again, a bounded number of times."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.errors import ImageError
from harness.sample import images
from harness.spec import make_cell
from harness.subject.binaries import QEMU_IMG
from harness.sweep import measure_image
from harness.sweep.planning import LUKS_HEADER_BYTES

pytestmark = [pytest.mark.integration]


def flaky_qemu_img(wrapper_dir: Path, failures: int, command: str = "create") -> str:
    """Real qemu-img behind a wrapper whose first ``failures`` runs of ``command`` fail as QEMU's
    does under load.

    ``wrapper_dir`` is reachable by QEMU's account (harness.host.confine), which runs the wrapper and
    keeps its count there, so the directory is writable for it too: it is the test's own.
    """
    real = shutil.which("qemu-img")
    assert real
    wrapper_dir.chmod(0o777)
    count = wrapper_dir / "count"
    script = wrapper_dir / "qemu-img"
    script.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}\n"
        f'if [ "$1" = {command} ] && [ "$n" -lt {failures} ]; then\n'
        "  echo 'qemu-img: x.qcow2: Unable to get accurate CPU usage' >&2; exit 1\n"
        "fi\n"
        f'exec {real} "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


def test_a_luks_create_failing_under_load_is_tried_again_and_says_so(
    tmp_path: Path, qemu_reachable_dir: Path
) -> None:
    cell = make_cell(format="qcow2", encrypt="luks", size="64M", workload="dd", dd_mib=16)
    # one failure of the wrapper's own; on a busy host the real qemu-img may add one of its own
    # (the very fault being retried), so the wrapper's is counted by its file name
    created = images.create(tmp_path / "x.qcow2", cell.image, qemu_img=flaky_qemu_img(qemu_reachable_dir, 1))
    assert created.path.exists()
    assert created.retries[0].startswith("try 1: ")
    assert "x.qcow2: Unable to get accurate CPU usage" in created.retries[0]
    assert all("Unable to get accurate CPU usage" in r for r in created.retries)
    assert len(created.retries) < images.LUKS_CREATE_TRIES


def test_the_tries_are_bounded(tmp_path: Path, qemu_reachable_dir: Path) -> None:
    cell = make_cell(format="qcow2", encrypt="luks", size="64M", workload="dd", dd_mib=16)
    with pytest.raises(ImageError, match="Unable to get accurate CPU usage"):
        images.create(tmp_path / "x.qcow2", cell.image, qemu_img=flaky_qemu_img(qemu_reachable_dir, 99))
    assert (qemu_reachable_dir / "count").read_text().strip() == str(images.LUKS_CREATE_TRIES)


def test_other_failures_are_not_retried(tmp_path: Path, qemu_reachable_dir: Path) -> None:
    cell = make_cell(format="qcow2", size="64M", workload="dd", dd_mib=16)
    with pytest.raises(ImageError):
        images.create(tmp_path / "x.qcow2", cell.image, qemu_img=flaky_qemu_img(qemu_reachable_dir, 1))
    assert (qemu_reachable_dir / "count").read_text().strip() == "1"


def test_measuring_a_luks_image_derives_no_key(tmp_path: Path, qemu_reachable_dir: Path) -> None:
    # qemu-img measure of a LUKS qcow2 would time its key derivation, which fails on a busy host:
    # checking a spec's sizes measures the image without encryption plus the header's room
    wrapper = qemu_reachable_dir / "qemu-img"
    real = shutil.which("qemu-img")
    wrapper.write_text(
        "#!/bin/sh\n"
        'case "$*" in *encrypt*) echo "qemu-img: Unable to get accurate CPU usage" >&2; exit 1;; esac\n'
        f'exec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    luks = measure_image(
        make_cell(format="qcow2", encrypt="luks", size="128M", workload="dd", dd_mib=16),
        qemu_img=str(wrapper),
    )
    plain = measure_image(
        make_cell(format="qcow2", size="128M", workload="dd", dd_mib=16), qemu_img=str(wrapper)
    )
    assert luks.required == plain.required + LUKS_HEADER_BYTES
    assert luks.fully_allocated == plain.fully_allocated + LUKS_HEADER_BYTES
    # the allowance covers what qemu-img itself says the header takes (when its timing works)
    for _ in range(images.LUKS_CREATE_TRIES * 2):
        try:
            real_luks = measure_image(
                make_cell(format="qcow2", encrypt="luks", size="128M", workload="dd", dd_mib=16),
                qemu_img=QEMU_IMG,
            )
        except ImageError:
            continue
        assert plain.fully_allocated < real_luks.fully_allocated <= luks.fully_allocated
        break
