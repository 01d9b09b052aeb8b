"""The policy's rule of which cells take which drive values, held against QEMU itself.

For every option a policy may set, and ``aio=native``, on every format, bus and a direct and a
cached mode: QEMU opens the drive the harness builds exactly where the rule says the cell takes
the value, and refuses it exactly where the rule says the cell keeps its fallback.  No guest runs
(``-S``, then ``quit`` over QMP): about 600 QEMU starts, a minute on a two-core host.
"""

from __future__ import annotations

import itertools
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.host.hostinfo import filesystem_type
from harness.sample.images import MEMORY_FILESYSTEMS
from harness.sample.vm import Drive
from harness.spec import Aio, Cache, Format, Interface, make_cell
from harness.subject.binaries import QEMU, QEMU_IMG
from harness.subject.policy import DRIVE_OPTIONS, drive_refusal, option_refusal

pytestmark = pytest.mark.integration

QUIT = '{"execute":"qmp_capabilities"}\n{"execute":"quit"}\n'
CACHES = (Cache.NONE, Cache.WRITEBACK)


def option_value(name: str) -> tuple[tuple[str, str], ...]:
    """One value of the option, with what QEMU's throttle rules need beside it."""
    rule = DRIVE_OPTIONS[name]
    if rule.choices:
        return ((name, rule.choices[-1]),)
    if not name.startswith("throttling."):
        return ((name, "1048576"),)
    if name == "throttling.iops-size":
        return (("throttling.iops-total", "1000"), (name, "4096"))
    base = name.removesuffix("-length").removesuffix("-max")
    extra = [] if base == name else [(base, "1000")]
    if name.endswith("-max-length"):
        extra.append((f"{base}-max", "2000"))
    return (*extra, (name, "4" if name.endswith("-length") else "2000" if name.endswith("-max") else "1000"))


def opens(
    image: Path,
    fmt: Format,
    interface: Interface,
    cache: Cache,
    aio: Aio,
    options: tuple[tuple[str, str], ...],
) -> str | None:
    """None when QEMU opens the drive as the harness attaches it; else QEMU's last line."""
    drive = Drive(
        node="disk", path=image, format=fmt.value, interface=interface, cache=cache, aio=aio, options=options
    )
    argv = [QEMU, "-machine", "pc", "-accel", "tcg", "-nodefaults", "-display", "none", "-S",
            "-qmp", "stdio", *drive.argv()]  # fmt: skip
    result = subprocess.run(argv, input=QUIT, capture_output=True, text=True, timeout=60, check=False)
    lines = result.stderr.strip().splitlines()
    return None if result.returncode == 0 else (lines[-1] if lines else f"exit {result.returncode}")


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Format, Path]]:
    # a disk filesystem, not tmpfs: cache=none opens with O_DIRECT
    directory = tmp_path_factory.mktemp("policy-qemu")
    with tempfile.TemporaryDirectory(prefix="diskbench-test-", dir="/var/tmp") as spare:
        if filesystem_type(directory) in MEMORY_FILESYSTEMS:
            directory = Path(spare)
        found = {}
        for fmt in Format:
            path = directory / f"disk.{fmt.value}"
            subprocess.run([QEMU_IMG, "create", "-q", "-f", fmt.value, str(path), "64M"], check=True)
            found[fmt] = path
        yield found


@pytest.mark.parametrize("name", sorted(DRIVE_OPTIONS))
def test_qemu_takes_each_option_exactly_where_the_rule_says(name: str, images: dict[Format, Path]) -> None:
    wrong = []
    for fmt, interface, cache in itertools.product(Format, Interface, CACHES):
        cell = make_cell(format=fmt, interface=interface, cache=cache, workload="dd")
        takes = option_refusal(name, cell) is None
        problem = opens(images[fmt], fmt, interface, cache, Aio.THREADS, option_value(name))
        if takes != (problem is None):
            wrong.append(f"{fmt.value}/{interface.value}/{cache.value}: rule says {takes}, QEMU: {problem}")
    assert wrong == []


def test_qemu_takes_native_aio_exactly_where_the_rule_says(images: dict[Format, Path]) -> None:
    wrong = []
    for fmt, interface, cache in itertools.product(Format, Interface, Cache):
        cell = make_cell(format=fmt, interface=interface, cache=cache, workload="dd")
        takes = drive_refusal("aio", Aio.NATIVE.value, cell) is None
        problem = opens(images[fmt], fmt, interface, cache, Aio.NATIVE, ())
        if takes != (problem is None):
            wrong.append(f"{fmt.value}/{interface.value}/{cache.value}: rule says {takes}, QEMU: {problem}")
        # the fallback a cell keeps opens wherever native does not
        if not takes:
            assert opens(images[fmt], fmt, interface, cache, Aio.THREADS, ()) is None
    assert wrong == []
