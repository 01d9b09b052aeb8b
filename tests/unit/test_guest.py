"""Pure parts of the guest build: recipe, hashes, ELF, modules, cpio, bzImage, pins."""

from __future__ import annotations

import io
import lzma
import shutil
import stat
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness import guest
from harness.errors import GuestBuildError
from harness.paths import IMAGES_DIR

TOML = """
[kernel]
package = "linux-image-x"
version = "1.0-1"
modules = ["ext4"]

[initramfs]
files = ["/bin/busybox"]

[initramfs.packages]
busybox-static = "1:1.35"  # a comment
"libstdc++6" = "12.2"

[payload]
suite = "bookworm"
variant = "minbase"
small = ["dash"]
"""

LOCK = "# header\ndash 0.5 essential\napt 2.6.1 base\n"


# --------------------------------------------------------------------------- recipe


def test_parse_recipe_reads_every_table() -> None:
    r = guest.parse_recipe(TOML, LOCK)
    assert r.kernel_package == "linux-image-x"
    assert r.initramfs_packages == {"busybox-static": "1:1.35", "libstdc++6": "12.2"}
    assert [p.name for p in r.payload_sets()["small"]] == ["dash"]
    assert len(r.payload_sets()["full"]) == 2
    assert r.all_pins()["apt"] == "2.6.1"


def test_the_shipped_recipe_parses() -> None:
    r = guest.load_recipe(IMAGES_DIR)
    assert r.kernel_package.startswith("linux-image-") and "cloud" not in r.kernel_package
    assert {"virtio_pci", "virtio_blk", "ahci", "nvme", "ext4"} <= set(r.modules)
    assert len(r.payload) > 50
    assert all(p.essential for p in r.payload if p.name in ("dpkg", "libc6", "dash"))


def test_small_payload_must_be_in_the_lock() -> None:
    with pytest.raises(GuestBuildError, match=r"not in payload\.lock: dash"):
        guest.parse_recipe(TOML, "apt 2.6.1 base\n")


def test_bad_lock_line_names_the_fix() -> None:
    with pytest.raises(GuestBuildError, match=r"line 1.*diskbench guest pin"):
        guest.parse_payload_lock("dash 0.5\n")


def test_lock_round_trip_puts_essential_first() -> None:
    pkgs = guest.parse_payload_lock(LOCK)
    text = guest.format_payload_lock(pkgs, header="hello")
    assert text.splitlines()[:2] == ["# hello", "dash 0.5 essential"]
    assert guest.parse_payload_lock(text) == pkgs


def test_recipe_hash_is_stable_and_sees_every_file(tmp_path: Path) -> None:
    d = tmp_path / "images"
    shutil.copytree(IMAGES_DIR, d)
    h = guest.recipe_hash(d)
    assert guest.recipe_hash(d) == h == guest.recipe_hash(IMAGES_DIR)
    (d / "init").write_text((d / "init").read_text() + "\n# changed\n")
    h2 = guest.recipe_hash(d)
    assert h2 != h
    (d / "workloads" / "new.sh").write_text("true\n")
    assert guest.recipe_hash(d) not in (h, h2)


def test_hash_files_is_order_independent_and_covers_names() -> None:
    a = guest.hash_files([("a", b"1"), ("b", b"2")])
    assert a == guest.hash_files([("b", b"2"), ("a", b"1")])
    assert a != guest.hash_files([("a", b"2"), ("b", b"1")])


def test_hash_changes_with_build_code_version(monkeypatch: pytest.MonkeyPatch) -> None:
    before = guest.hash_files([("a", b"1")])
    monkeypatch.setattr(guest.recipe, "BUILD_CODE_VERSION", "999")
    assert guest.hash_files([("a", b"1")]) != before


# --------------------------------------------------------------------------- ELF


def make_elf(sections: dict[str, bytes]) -> bytes:
    """A minimal ELF64 LE relocatable with the given sections (like a .ko)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in [*sections, ".shstrtab"])
    body = b""
    offsets = []
    for data in [*sections.values(), names]:
        offsets.append(64 + len(body))
        body += data
    shoff = 64 + len(body)
    nsec = len(sections) + 2
    header = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    header += struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, nsec, nsec - 1)
    shdrs = b"\0" * 64
    name_off = 1
    for (name, data), off in zip([*sections.items(), (".shstrtab", names)], offsets, strict=True):
        typ = 3 if name == ".shstrtab" else 1
        shdrs += struct.pack("<IIQQQQIIQQ", name_off, typ, 0, 0, off, len(data), 0, 0, 1, 0)
        name_off += len(name) + 1
    return header + body + shdrs


def test_elf_section_data_finds_modinfo() -> None:
    elf = make_elf({".text": b"\x90" * 7, ".modinfo": b"license=GPL\0depends=jbd2,mbcache\0"})
    assert guest.elf_section_data(elf, ".modinfo") == b"license=GPL\0depends=jbd2,mbcache\0"
    assert guest.elf_section_data(elf, ".nope") is None


def test_elf_rejects_non_elf() -> None:
    with pytest.raises(guest.ElfError):
        guest.elf_sections(b"#!/bin/sh\n" + b"\0" * 64)


def test_elf_needed_and_interpreter_of_a_real_binary() -> None:
    data = Path("/bin/ls").read_bytes()
    assert "libc.so.6" in guest.elf_needed(data)
    assert guest.elf_interpreter(data) == "/lib64/ld-linux-x86-64.so.2"


def test_elf_needed_of_a_file_without_dynamic_section_is_empty() -> None:
    assert guest.elf_needed(make_elf({".text": b"\x90"})) == []


# --------------------------------------------------------------------------- modules


def test_parse_modinfo_and_depends() -> None:
    info = guest.parse_modinfo(b"alias=a\0alias=b\0depends=crc16,mbcache,jbd2\0\0intree=Y\0")
    assert info["alias"] == ["a", "b"]
    assert guest.module_depends(info) == ["crc16", "mbcache", "jbd2"]
    assert guest.module_depends(guest.parse_modinfo(b"depends=\0")) == []


def test_module_name_normalises_dashes() -> None:
    assert guest.module_name("kernel/arch/x86/crypto/crc32c-intel.ko") == "crc32c_intel"


DEPS = {
    "ext4": ["crc16", "mbcache", "jbd2"],
    "jbd2": [],
    "mbcache": [],
    "crc16": [],
    "ahci": ["libahci", "libata"],
    "libahci": ["libata"],
    "libata": ["scsi_mod"],
    "scsi_mod": ["scsi_common"],
    "scsi_common": [],
}


def test_module_load_order_puts_dependencies_first() -> None:
    order = guest.module_load_order(["ahci", "ext4"], DEPS.__getitem__)
    assert order == [
        "scsi_common", "scsi_mod", "libata", "libahci", "ahci", "crc16", "mbcache", "jbd2", "ext4",
    ]  # fmt: skip
    for mod, deps in DEPS.items():
        if mod in order:
            assert all(order.index(d) < order.index(mod) for d in deps)


def test_module_load_order_skips_builtin_and_duplicates() -> None:
    order = guest.module_load_order(["ext4", "ext4", "jbd2"], DEPS.__getitem__, builtin=["crc16"])
    assert order == ["mbcache", "jbd2", "ext4"]


def test_module_cycle_is_an_error() -> None:
    deps = {"a": ["b"], "b": ["a"]}
    with pytest.raises(GuestBuildError, match="cycle"):
        guest.module_load_order(["a"], deps.__getitem__)


# --------------------------------------------------------------------------- cpio


def test_cpio_entries_are_padded_and_read_back() -> None:
    buf = io.BytesIO()
    w = guest.CpioWriter(buf)
    w.add_file("usr/bin/x", b"abcde", 0o755)
    w.add_symlink("bin/sh", "/bin/busybox")
    w.add_chardev("dev/console", 5, 1)
    w.add_file("usr/bin/x", b"ignored duplicate")
    w.close()
    data = buf.getvalue()
    assert len(data) % 4 == 0
    assert data.endswith(b"TRAILER!!!\0" + b"\0" * (-(110 + 11) % 4))
    entries = {e.name: e for e in guest.read_cpio(data)}
    assert list(entries) == ["usr", "usr/bin", "usr/bin/x", "bin", "bin/sh", "dev", "dev/console"]
    assert entries["usr/bin/x"].data == b"abcde"
    assert stat.S_IMODE(entries["usr/bin/x"].mode) == 0o755
    assert stat.S_ISDIR(entries["usr"].mode)
    assert stat.S_ISLNK(entries["bin/sh"].mode) and entries["bin/sh"].data == b"/bin/busybox"
    assert stat.S_ISCHR(entries["dev/console"].mode) and entries["dev/console"].rdev == (5, 1)


@pytest.mark.parametrize("size", range(9))
def test_cpio_every_header_starts_aligned(size: int) -> None:
    buf = io.BytesIO()
    w = guest.CpioWriter(buf)
    w.add_file("f" * (size + 1), b"x" * size)
    w.add_file("g", b"y")
    w.close()
    data = buf.getvalue()
    starts = [i for i in range(len(data)) if data.startswith(b"070701", i)]
    assert starts and all(i % 4 == 0 for i in starts)
    assert [e.data for e in guest.read_cpio(data)] == [b"x" * size, b"y"]


# --------------------------------------------------------------------------- bzImage


def make_bzimage(payload: bytes, setup_sects: int = 2) -> bytes:
    img = bytearray((setup_sects + 1) * 512)
    img[0x1F1] = setup_sects
    img[0x202:0x206] = b"HdrS"
    struct.pack_into("<II", img, 0x248, 16, len(payload))
    return bytes(img) + b"\0" * 16 + payload + b"\xaa" * 4


def test_vmlinux_from_bzimage_decompresses_the_xz_payload() -> None:
    elf = b"\x7fELF" + bytes(range(256)) * 10
    xz = lzma.compress(elf, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC32)
    assert guest.vmlinux_from_bzimage(make_bzimage(xz)) == elf


def test_vmlinux_from_bzimage_rejects_other_payloads() -> None:
    with pytest.raises(GuestBuildError, match="not XZ"):
        guest.vmlinux_from_bzimage(make_bzimage(b"\x1f\x8b" + b"\0" * 40))
    with pytest.raises(GuestBuildError, match="not an x86 bzImage"):
        guest.vmlinux_from_bzimage(b"\0" * 4096)


# --------------------------------------------------------------------------- pins


def test_deb_filename_escapes_the_epoch() -> None:
    assert guest.deb_filename("zlib1g", "1:1.2.13.dfsg-1", "amd64") == ("zlib1g_1%3a1.2.13.dfsg-1_amd64.deb")


def test_parse_apt_policy() -> None:
    text = (
        "dpkg:\n  Installed: 1.21.22\n  Candidate: 1.21.23\n  Version table:\n"
        "gone:\n  Installed: (none)\n  Candidate: (none)\n"
    )
    assert guest.parse_apt_policy(text) == {"dpkg": "1.21.23", "gone": None}


def test_rewrite_recipe_pins_keeps_comments_and_quoted_keys() -> None:
    out = guest.rewrite_recipe_pins(TOML, "2.0-1", {"busybox-static": "1:1.36", "libstdc++6": "13"})
    assert 'version = "2.0-1"' in out
    assert 'busybox-static = "1:1.36"  # a comment' in out
    assert '"libstdc++6" = "13"' in out
    assert out.count("\n") == TOML.count("\n")
    r = guest.parse_recipe(out, LOCK)
    assert r.kernel_version == "2.0-1"


def test_parse_depends_drops_versions_and_arch() -> None:
    got = guest.parse_depends("libc6 (>= 2.34), awk | mawk:any, libzstd1 (>= 1.5)")
    assert got == [["libc6"], ["awk", "mawk"], ["libzstd1"]]


def test_required_closure_follows_dependencies_of_required_packages() -> None:
    controls = {
        "dpkg": {"Essential": "yes", "Pre-Depends": "libc6 (>= 2.34), libzstd1"},
        "libc6": {"Priority": "optional", "Depends": "libgcc-s1"},
        "libgcc-s1": {},
        "libzstd1": {},
        "mawk": {"Priority": "required"},
        "apt": {"Priority": "important", "Depends": "libapt-pkg6.0, libc6"},
        "libapt-pkg6.0": {},
    }
    assert guest.required_closure(controls) == {"dpkg", "libc6", "libgcc-s1", "libzstd1", "mawk"}


# --------------------------------------------------------------------------- artifacts


def test_artifacts_manifest_round_trip(tmp_path: Path) -> None:
    for name in ("vmlinux", "initramfs.cpio", "payload-small.img", "payload-full.img"):
        (tmp_path / name).write_bytes(b"x")
    art = guest.GuestArtifacts(
        build_dir=tmp_path,
        kernel=tmp_path / "vmlinux",
        initrd=tmp_path / "initramfs.cpio",
        payloads={"small": tmp_path / "payload-small.img", "full": tmp_path / "payload-full.img"},
        recipe_hash="abc",
        kernel_version="6.1.0-50-amd64",
        packages={"dpkg": "1.21.23"},
        payload_packages={"small": 1, "full": 2},
        modules=("virtio", "virtio_pci"),
    )
    (tmp_path / guest.MANIFEST_NAME).write_text(__import__("json").dumps(art.as_dict()))
    assert guest.GuestArtifacts.load(tmp_path) == art


def test_missing_manifest_says_to_rebuild(tmp_path: Path) -> None:
    with pytest.raises(GuestBuildError, match="guest build --force"):
        guest.GuestArtifacts.load(tmp_path)


def test_tree_resolves_symlinks_inside_the_tree(tmp_path: Path) -> None:
    (tmp_path / "usr/lib").mkdir(parents=True)
    (tmp_path / "usr/lib/libx.so.1.2").write_bytes(b"lib")
    (tmp_path / "usr/lib/libx.so.1").symlink_to("libx.so.1.2")
    (tmp_path / "lib").symlink_to("usr/lib")
    tree = guest.Tree(tmp_path)
    assert tree.resolve("/lib/libx.so.1") == "/usr/lib/libx.so.1.2"
    assert tree.resolve("/lib/missing.so") is None
    got = guest.collect_with_libraries(tree, ["/lib/libx.so.1"])
    assert set(got.files) == {"/usr/lib/libx.so.1.2"}
    assert got.symlinks["/lib/libx.so.1"] == "libx.so.1.2"


# --------------------------------------------------------------------------- tools drive

TOOLS = """
[tools]
files = ["/usr/bin/fio"]

[tools.packages]
fio = "3.33-3"
"libstdc++6" = "12.2"  # the same pin as the initramfs's
"""


def test_tools_table_is_optional_and_joins_the_pins() -> None:
    assert guest.parse_recipe(TOML, LOCK).tools_files == ()
    r = guest.parse_recipe(TOML + TOOLS, LOCK)
    assert r.tools_files == ("/usr/bin/fio",)
    twice = TOOLS.replace('"/usr/bin/fio"', '"/usr/bin/fio", "/usr/bin/fio"')
    assert guest.parse_recipe(TOML + twice, LOCK).tools_files == ("/usr/bin/fio",)
    assert r.tools_packages == {"fio": "3.33-3", "libstdc++6": "12.2"}
    assert r.all_pins()["fio"] == "3.33-3"
    out = guest.rewrite_recipe_pins(TOML + TOOLS, "1.0-1", {"fio": "3.34-1", "libstdc++6": "12.2"})
    assert guest.parse_recipe(out, LOCK).tools_packages["fio"] == "3.34-1"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace('"12.2"  # the same', '"13"  # another'), "pin one version"),
        # the kernel's package pinned again: the tools' pin would replace the kernel's
        (
            lambda t: t + '"linux-image-x" = "2.0-1"\n',
            r"linux-image-x is pinned to 1.0-1 in \[kernel\] and 2.0-1 in \[tools.packages\]",
        ),
        (
            lambda t: t.replace('"/usr/bin/fio"', '"/usr/../etc/shadow"'),
            r"toml: \[tools\] files entry '/usr/",
        ),
        (lambda t: t.replace('fio = "3.33-3"', "fio = 3"), "must be a version string"),
        (lambda t: t.replace('fio = "3.33-3"', '"-o=x" = "1"'), "tools.packages"),
        (lambda t: t.split("[tools.packages]")[0], r"missing table \[packages\]"),
    ],
)
def test_bad_tools_table_names_the_key(edit: Any, message: str) -> None:
    with pytest.raises(guest.RecipeError, match=message):
        guest.parse_recipe(edit(TOML + TOOLS), LOCK)


def test_elf_runpath_of_a_real_library(tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    src = tmp_path / "x.c"
    src.write_text("int x(void) { return 1; }\n")
    lib = tmp_path / "libx.so"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", lib, src, "-Wl,-rpath,/opt/a:$ORIGIN/b", "-Wl,--enable-new-dtags"],
        check=True,
        timeout=60,
    )
    assert guest.elf_runpath(lib.read_bytes()) == ["/opt/a", "$ORIGIN/b"]
    assert guest.elf_runpath(Path("/bin/ls").read_bytes()) == []


def test_collect_follows_runpath_and_origin(tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    root = tmp_path / "root"
    (root / "opt/app/priv").mkdir(parents=True)
    (root / "opt/app/bin").mkdir(parents=True)
    src = tmp_path / "x.c"
    src.write_text("int x(void) { return 1; }\n")
    priv = root / "opt/app/priv/libpriv.so"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", priv, src, "-Wl,-soname,libpriv.so"], check=True, timeout=60
    )
    main = root / "opt/app/bin/tool.so"
    subprocess.run(
        [
            "cc", "-shared", "-fPIC", "-o", main, src, "-Wl,--no-as-needed", f"-L{priv.parent}", "-lpriv",
            "-Wl,-rpath,$ORIGIN/../priv", "-Wl,--enable-new-dtags", "-nostdlib",
        ],
        check=True,
        timeout=60,
    )  # fmt: skip
    got = guest.collect_with_libraries(guest.Tree(root), ["/opt/app/bin/tool.so"])
    assert set(got.files) == {"/opt/app/bin/tool.so", "/opt/app/priv/libpriv.so"}


def _corrupt(data: bytes, at: int, value: bytes) -> bytes:
    return data[:at] + value + data[at + len(value) :]


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d[:200],  # truncated inside its program headers
        lambda d: _corrupt(d, 0x20, struct.pack("<Q", 2**63)),  # e_phoff past the end
        lambda d: _corrupt(d, 0x20, struct.pack("<Q", len(d) - 8)),  # headers run past the end
    ],
)
def test_a_malformed_elf_is_an_elf_error(edit: Any) -> None:
    data = edit(Path("/bin/ls").read_bytes())
    for parse in (guest.elf_interpreter, guest.elf_needed, guest.elf_runpath):
        with pytest.raises(guest.ElfError, match=r"malformed ELF|not an ELF"):
            parse(data)


def test_collect_names_a_malformed_elf_as_the_recipes_mistake(tmp_path: Path) -> None:
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/tool").write_bytes(Path("/bin/ls").read_bytes()[:200])
    with pytest.raises(guest.RecipeError, match=r"/usr/bin/tool .* is an ELF file this build cannot read"):
        guest.collect_with_libraries(guest.Tree(tmp_path), ["/usr/bin/tool"])
