"""Real qemu-img and qemu-io: a backing chain built once per key, never trusted half-built, opened
through descriptors by QEMU's account, and an overlay's copy-on-write as qcow2 does it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.host import confine, proc
from harness.sample import chain, images
from harness.sample.vm.config import option_value
from harness.spec import Cell, make_cell
from harness.subject.binaries import Binaries

pytestmark = pytest.mark.integration
MIB = 1024**2
BINARIES = Binaries.on_path()


def _cell(backing: str, **axes: object) -> Cell:
    return make_cell(workload="dd", dd_mib=16, size="64M", backing=backing, **axes)  # type: ignore[arg-type]


def test_a_chain_is_built_once_per_key_and_checked(tmp_path: Path) -> None:
    cell = _cell("depth=3,fill=50%,pattern=scattered")
    host: dict[str, object] = {}
    builds = []
    for n in range(3):
        chain.create_disk(tmp_path / f"ov{n}.qcow2", cell, work_dir=tmp_path, binaries=BINARIES, host=host)
        builds.append(host["chain"]["built"])  # type: ignore[index]
    assert builds == [True, False, False]
    # another fill is another key: built once more
    chain.create_disk(
        tmp_path / "other.qcow2", _cell("fill=25%"), work_dir=tmp_path, binaries=BINARIES, host=host
    )
    assert host["chain"]["built"] is True  # type: ignore[index]
    assert len(list(chain.bases_root(tmp_path).iterdir())) == 2
    built = chain.ensure(cell.backing, cell.image.size, work_dir=tmp_path, binaries=BINARIES)  # type: ignore[arg-type]
    assert [layer["check"] for layer in built.meta["layers"]] == ["clean", "clean", "clean"]
    assert built.meta["fill_bytes"] == 32 * MIB
    base = built.layers[0][0]
    # the base holds its fill and nothing else: data where the pattern wrote, the rest unallocated
    mapped = images.mapped_bytes(base, cell.image.format, qemu_img=BINARIES.qemu_img, backed=True)
    assert mapped["data_bytes"] == 32 * MIB
    # no side's QEMU may write what both read
    assert all(
        path.stat().st_uid == os.geteuid() and path.stat().st_mode & 0o222 == 0 for path, _ in built.layers
    )


def test_a_killed_build_leaves_nothing_a_later_run_trusts(tmp_path: Path) -> None:
    cell = _cell("fill=100%")
    script = (
        "import sys; from pathlib import Path; from harness.sample import chain; from harness.spec import make_cell;"
        "from harness.subject.binaries import Binaries;"
        "cell = make_cell(workload='dd', dd_mib=16, size='1G', backing='fill=100%');"
        "chain.ensure(cell.backing, cell.image.size, work_dir=Path(sys.argv[1]), binaries=Binaries.on_path())"
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=Path(__file__).parents[2])
    root = chain.bases_root(tmp_path)
    deadline = time.monotonic() + 120
    while not (root.is_dir() and any(root.glob(".*/layer0.fill.raw"))):
        assert child.poll() is None and time.monotonic() < deadline, (
            "the build ended before it could be killed"
        )
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    # what the dead build left has no key's name: no load finds it
    left = list(root.iterdir())
    assert left and all(entry.name.startswith(".") for entry in left)
    big = make_cell(workload="dd", dd_mib=16, size="1G", backing="fill=100%")
    material = chain.key_material(
        big.backing, big.image.size, proc.run([BINARIES.qemu_img, "--version"]).stdout.splitlines()[0]
    )  # type: ignore[arg-type]
    assert chain.load(chain.chain_key(material), root) is None
    # a finished name without its meta.json (never written so, but on disk all the same) is not trusted either
    (root / chain.chain_key(material)).mkdir()
    assert chain.load(chain.chain_key(material), root) is None
    # the next build removes the dead one's leftovers and builds from nothing
    built = chain.ensure(cell.backing, cell.image.size, work_dir=tmp_path, binaries=BINARIES)  # type: ignore[arg-type]
    assert built.built
    assert not [entry for entry in root.iterdir() if entry.name.startswith(".")]


def _qemu_io(
    overlay: Path, cell: Cell, commands: list[str], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """qemu-io on the overlay as QEMU's account, the chain given as the drive's descriptors."""
    layers = chain.drive_backing(cell, work_dir=tmp_path, binaries=BINARIES)
    with confine.Handoff(confine.account()) as handoff:
        opts = [f"driver=qcow2,file.filename={option_value(handoff.write(overlay))}"]
        for depth, (layer, fmt) in enumerate(layers, 1):
            node = "backing." * depth
            opts += [f"{node}driver={fmt}", f"{node}file.filename={option_value(handoff.read(layer))}"]
        argv = [BINARIES.qemu_io, "--image-opts", ",".join(opts)]
        for command in commands:
            argv += ["-c", command]
        return subprocess.run(argv, capture_output=True, text=True, check=False, **handoff.popen_kwargs())


@pytest.mark.parametrize(("extended_l2", "low", "high"), [(False, 64 * 1024, 64 * 1024), (True, 2048, 4096)])
def test_qemu_reads_the_chain_through_descriptors_and_copies_on_write(
    tmp_path: Path, extended_l2: bool, low: int, high: int
) -> None:
    cell = _cell("depth=2,fill=100%", extended_l2=extended_l2)
    overlay = tmp_path / "ov.qcow2"
    chain.create_disk(overlay, cell, work_dir=tmp_path, binaries=BINARIES)
    # the base's bytes read through the layer between; a 4 KiB write lands in the overlay alone
    result = _qemu_io(
        overlay, cell, ["read -P 0xa5 0 64k", "write -P 0x11 8k 4k", "read -P 0xa5 12k 52k"], tmp_path
    )
    assert result.returncode == 0 and "Pattern verification failed" not in result.stdout, (
        result.stdout + result.stderr
    )
    check = images.check(overlay, cell.image.format, qemu_img=BINARIES.qemu_img, backed=True)
    assert check.verdict == "clean"
    # copy-on-write: without subclusters the whole 64K cluster is written, with them 2K subclusters
    mapped = images.mapped_bytes(overlay, cell.image.format, qemu_img=BINARIES.qemu_img, backed=True)
    assert low <= mapped["data_bytes"] <= high
    info = json.loads(
        subprocess.run(
            [BINARIES.qemu_img, "info", "--output=json", "-U", str(overlay)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert info["backing-filename"].startswith("bases/") and info["backing-filename-format"] == "qcow2"
