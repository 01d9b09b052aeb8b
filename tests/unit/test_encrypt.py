"""LUKS-encrypted qcow2 cells: spelled, created, opened and checked with the secret object."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.sample.images import image_args
from harness.sample.vm import Drive, VMConfig
from harness.spec import SECRET_ID, Cell, Format, make_cell, secret_object
from harness.sweep import expand_spec, parse_spec


def test_an_encrypted_cell_has_its_own_id_and_qemu_img_options() -> None:
    cell = make_cell(format="qcow2", encrypt="luks", size="1G")
    assert cell.id == "qcow2-off-cs64k-luks-1g.writeback-threads-virtio-blk.install-full"
    assert cell.image.create_options()[-2:] == ["encrypt.format=luks", f"encrypt.key-secret={SECRET_ID}"]
    assert Cell.from_dict(cell.as_dict()) == cell
    assert make_cell(format="qcow2").id == "qcow2-off-cs64k-2g.writeback-threads-virtio-blk.install-full"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"format": "raw", "encrypt": "luks"},
            "encrypt 'luks' applies to qcow2 only: drop it for format raw",
        ),
        ({"encrypt": "aes"}, "unknown encrypt 'aes': use one of none, luks"),
    ],
)
def test_bad_encryption_is_refused_with_what_is_allowed(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        make_cell(**kwargs)  # type: ignore[arg-type]


def test_a_sweep_leaves_out_raw_with_luks_with_the_reason() -> None:
    plan = expand_spec(parse_spec('[axes]\nformat = ["raw", "qcow2"]\nencrypt = ["none", "luks"]\n'))
    assert len(plan.cells) == 3
    (excluded,) = plan.excluded
    assert excluded.values == {"format": "raw", "encrypt": "luks"} and "qcow2 only" in excluded.reason


def test_qemu_img_opens_an_encrypted_image_with_its_secret() -> None:
    assert image_args(Path("/w/a.qcow2"), Format.QCOW2) == ["-f", "qcow2", "/w/a.qcow2"]
    args = image_args(Path("/w/a,b.qcow2"), Format.QCOW2, encrypted=True)
    assert args == [
        "--object",
        secret_object(),
        "--image-opts",
        f"driver=qcow2,file.filename=/w/a,,b.qcow2,encrypt.key-secret={SECRET_ID}",
    ]


def test_qemu_gets_the_secret_object_once_and_the_drive_its_key() -> None:
    drives = [
        Drive(node="payload", path=Path("p.raw"), format="raw", readonly=True),
        Drive(node="disk0", path=Path("d.qcow2"), format="qcow2", key_secret=True),
    ]
    config = VMConfig(kernel=Path("k"), initrd=Path("i"), append=[], drives=drives, qemu="qemu")
    argv = config.argv(qmp_path=Path("q"), console=Path("c"), report=Path("r"))
    assert argv.count("-object") == 1 and argv[argv.index("-object") + 1] == secret_object()
    (disk,) = [a for a in argv if a.startswith("if=none,id=disk0,")]
    assert disk.endswith(f",encrypt.key-secret={SECRET_ID}")
    (payload,) = [a for a in argv if a.startswith("if=none,id=payload,")]
    assert "encrypt" not in payload
