"""A pull request's ``images/`` is untrusted: the build reads only regular files inside it.

Every hostile recipe here reached a host file before the checks (a ``..``
entry copied it into the guest, a symlink in ``images/workloads/`` was
followed, a FIFO or ``/dev/zero`` hung the build), or put an option into an
argv (a package named ``-o...``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness import guest
from harness.errors import ExitCode
from harness.guest import RecipeError
from harness.paths import IMAGES_DIR

TOML = """
[kernel]
package = "linux-image-x"
version = "1.0-1"
modules = ["ext4"]

[initramfs]
files = ["/bin/busybox"]

[initramfs.packages]
busybox-static = "1:1.35"

[payload]
suite = "bookworm"
variant = "minbase"
small = ["dash"]
"""
LOCK = "dash 0.5 essential\napt 2.6.1 base\n"


@pytest.fixture
def images(tmp_path: Path) -> Path:
    """A copy of the shipped recipe, to be made hostile."""
    d = tmp_path / "images"
    shutil.copytree(IMAGES_DIR, d)
    return d


@pytest.fixture
def host_secret(tmp_path: Path) -> Path:
    """A host file outside images/ (stands for /etc/shadow, which a test need not read)."""
    path = tmp_path / "host" / "shadow"
    path.parent.mkdir()
    path.write_text("root:$6$secret:19000:0:99999:7:::\n")
    return path


def refused(call: object, *args: object) -> str:
    with pytest.raises(RecipeError) as caught:
        call(*args)  # type: ignore[operator]
    assert caught.value.exit_code == ExitCode.USAGE
    assert "\n" not in caught.value.message
    return caught.value.message


@pytest.mark.parametrize(
    "entry",
    [
        "../../etc/shadow",
        "/../../../etc/shadow",
        "/bin/../../../etc/shadow",
        "/bin/./busybox",
        "etc/shadow",
        "//etc/shadow",
        "/bin/busybox\n/etc/shadow",
        "/bin/busy box",
        "",
    ],
)
def test_initramfs_files_entries_are_plain_guest_paths(entry: str) -> None:
    text = TOML.replace('files = ["/bin/busybox"]', f"files = [{entry!r}]".replace("'", '"'))
    text = text.replace("\n/etc", "\\n/etc")
    message = refused(guest.parse_recipe, text, LOCK)
    assert "[initramfs] files entry" in message
    assert "use an absolute path inside the packages without '..'" in message


@pytest.mark.parametrize(
    ("old", "new", "what"),
    [
        ('busybox-static = "1:1.35"', '"-oDir::Etc::sourcelist=/etc/shadow" = "1"', "package name"),
        ('busybox-static = "1:1.35"', 'busybox-static = "1.0/../../x"', "version"),
        ('busybox-static = "1:1.35"', 'busybox-static = "-1"', "version"),
        ('package = "linux-image-x"', 'package = "../linux"', "package name"),
        ('modules = ["ext4"]', 'modules = ["../../../etc/shadow"]', "kernel module"),
        ('suite = "bookworm"', 'suite = "--keyring=/etc/shadow"', "suite"),
        ('variant = "minbase"', 'variant = "minbase --foreign"', "variant"),
        ('small = ["dash"]', 'small = ["-dash"]', "package name"),
    ],
)
def test_names_that_reach_an_argv_or_a_path_are_checked(old: str, new: str, what: str) -> None:
    assert old in TOML
    message = refused(guest.parse_recipe, TOML.replace(old, new), LOCK)
    assert f"{what} " in message and "is not valid" in message


def test_payload_lock_names_are_checked() -> None:
    message = refused(guest.parse_recipe, TOML, "dash 0.5 essential\n-oAPT::X=1 2 base\n")
    assert message.startswith("images/payload.lock line 2: package name '-oAPT::X=1'")


def test_a_dotdot_path_stays_inside_the_package_tree(tmp_path: Path, host_secret: Path) -> None:
    root = tmp_path / "rootfs"
    (root / "bin").mkdir(parents=True)
    tree = guest.Tree(root)
    escape = "/.." * 8 + str(host_secret)
    assert tree.host(escape) == root / str(host_secret).lstrip("/")
    with pytest.raises(RecipeError, match="is in no pinned initramfs package") as caught:
        guest.collect_with_libraries(tree, [escape])
    assert caught.value.exit_code == ExitCode.USAGE


@pytest.mark.parametrize("target", ["secret", "/proc/self/environ", "/dev/zero", "/etc/hostname"])
def test_a_symlink_in_workloads_pointing_outside_is_refused(
    images: Path, host_secret: Path, target: str
) -> None:
    link = images / "workloads" / "evil.sh"
    link.symlink_to(host_secret if target == "secret" else target)
    for call in (guest.recipe_hash, guest.recipe_files):
        message = refused(call, images)
        assert message.startswith("images/workloads/evil.sh is a symlink to ")
        assert "outside images/: replace the symlink with the file itself" in message


def test_a_symlink_to_etc_shadow_never_reaches_the_build(images: Path, tmp_path: Path) -> None:
    (images / "workloads" / "shadow.sh").symlink_to("/etc/shadow")
    cache = tmp_path / "cache"
    message = refused(lambda: guest.build_guest(recipe_dir=images, cache=cache, log=lambda _m: None))
    assert "images/workloads/shadow.sh is a symlink to /etc/shadow" in message
    assert not cache.exists(), "refused before any download or build"


def test_a_symlinked_directory_outside_is_refused(images: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.sh").write_text("cat /etc/shadow\n")
    (images / "more").symlink_to(outside)
    assert "images/more is a symlink to" in refused(guest.recipe_hash, images)


def test_the_recipe_itself_cannot_be_a_symlink(images: Path, host_secret: Path) -> None:
    (images / "recipe.toml").unlink()
    (images / "recipe.toml").symlink_to(host_secret)
    assert "images/recipe.toml is a symlink to" in refused(guest.load_recipe, images)
    images_link = images.parent / "images-link"
    images_link.symlink_to(images)
    assert "is a symlink to" in refused(guest.recipe_hash, images_link)


def test_a_symlink_inside_images_is_followed(images: Path) -> None:
    (images / "workloads" / "alias.sh").symlink_to("dd.sh")
    assert "workloads/alias.sh" in guest.recipe_files(images)
    assert (
        guest.read_recipe_file(images, "workloads/alias.sh") == (images / "workloads" / "dd.sh").read_bytes()
    )


def test_a_hard_link_to_a_file_outside_is_refused(images: Path, host_secret: Path) -> None:
    os.link(host_secret, images / "workloads" / "linked.sh")
    message = refused(guest.recipe_hash, images)
    assert message == (
        "images/workloads/linked.sh has 2 hard links: a file under images/ must be its own copy (cp it)"
    )


def test_a_fifo_is_refused_not_read(images: Path) -> None:
    os.mkfifo(images / "workloads" / "wait.sh")
    message = refused(guest.recipe_hash, images)
    assert message.startswith("images/workloads/wait.sh is not a regular file")


def test_the_shipped_recipe_passes_every_check() -> None:
    names = guest.recipe_files(IMAGES_DIR)
    assert {"recipe.toml", "payload.lock", "init", "workloads/dd.sh"} <= set(names)
    assert guest.load_recipe(IMAGES_DIR).initramfs_files[0] == "/bin/busybox"


# --------------------------------------------------------------------------- tools drive
# The [tools] files come with whatever their ELF headers and their packages' symlinks say:
# RUNPATHs, PT_INTERP and link targets are untrusted text too.


def _cc(out: Path, source: str, *args: str | Path) -> Path:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.parent / f"{out.name}.c"
    src.write_text(source)
    subprocess.run(["cc", "-fPIC", "-nostdlib", "-o", out, src, *args], check=True, timeout=60)
    return out


def _tool(
    root: Path, path: str, *, interp: str = "/lib/ld.so", needs: Path | None = None, rpath: str = ""
) -> None:
    """An executable at ``path`` in ``root`` whose PT_INTERP is ``interp`` (a stand-in file)."""
    args: list[str | Path] = [f"-Wl,--dynamic-linker={interp}", "-Wl,-e,_start"]
    if needs is not None:
        args += ["-Wl,--no-as-needed", f"-L{needs.parent}", f"-l:{needs.name}"]
    if rpath:
        args += [f"-Wl,-rpath,{rpath}", "-Wl,--enable-new-dtags"]
    _cc(root / path.lstrip("/"), "void _start(void) {}\n", *args)
    loader = root / interp.lstrip("/")
    loader.parent.mkdir(parents=True, exist_ok=True)
    loader.write_bytes(b"the loader")


def _lib(path: Path, soname: str = "") -> Path:
    return _cc(path, "int x(void) { return 1; }\n", "-shared", f"-Wl,-soname,{soname or path.name}")


def _tools_image(tmp_path: Path, root: Path, tools: list[str]) -> Path:
    from harness.guest.drives import write_tools_image

    got = guest.collect_with_libraries(guest.Tree(root), tools, packages_table="tools.packages")
    tree = tmp_path / "out" / "tools-tree"
    write_tools_image(tmp_path / "out" / "tools.img", tree, got, tools, guest.Tree(root))
    return tree


def test_a_runpath_with_dotdot_never_writes_outside_the_drive(tmp_path: Path) -> None:
    root = tmp_path / "root"
    lib = _lib(root / "escaped" / "libpriv.so")
    # from the drive's /opt/app/bin, five '..' climb out of tools-tree to tmp_path
    _tool(root, "/opt/app/bin/tool", needs=lib, rpath="$ORIGIN/../../../../../escaped")
    got = guest.collect_with_libraries(guest.Tree(root), ["/opt/app/bin/tool"])
    assert not any(".." in p for p in (*got.files, *got.symlinks)), got
    tree = _tools_image(tmp_path, root, ["/opt/app/bin/tool"])
    assert not (tmp_path / "escaped").exists(), "the build wrote outside its tree"
    assert (tree / "escaped" / "libpriv.so").is_file()


def test_a_directory_link_to_the_host_is_not_followed(tmp_path: Path) -> None:
    """/usr/lib/d -> /HOST (absolute) and /usr/bin/tool -> ../lib/d/f: the host's own link
    HOST/f must never be read, even when it leads back into the tree."""
    root = tmp_path / "root"
    _tool(root, "/usr/bin/real")
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "f").symlink_to("/usr/bin/real")
    (root / "usr/lib").mkdir(parents=True)
    (root / "usr/lib/d").symlink_to(outside)
    (root / "usr/bin/tool").symlink_to("../lib/d/f")
    with pytest.raises(RecipeError, match=r"/usr/bin/tool .* is in no pinned tools package"):
        guest.collect_with_libraries(guest.Tree(root), ["/usr/bin/tool"], packages_table="tools.packages")


def test_every_link_of_the_drive_stays_inside_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    lib = _lib(root / "lib" / "libx.so.1.0", "libx.so.1")
    (root / "usr/lib").mkdir(parents=True)
    # inside the packages '..' stops at their top; on the drive it would climb out of /tools
    (root / "usr/lib/libx.so.1").symlink_to("../../../../../../lib/libx.so.1.0")
    (root / "lib/libx.so.1").symlink_to("/usr/lib/libx.so.1")
    _tool(root, "/usr/bin/tool", needs=lib)
    tree = _tools_image(tmp_path, root, ["/usr/bin/tool"])
    top = os.path.realpath(tree)
    for link in (tree / "usr/lib/libx.so.1", tree / "lib/libx.so.1"):
        assert link.is_symlink()
        assert os.path.realpath(link) == os.path.join(top, "lib/libx.so.1.0"), os.readlink(link)


@pytest.mark.parametrize(
    ("interp", "rpath"),
    [("/lib/ld$(reboot).so", ""), ("/lib/ld.so", "/opt/`reboot`"), ("/lib/ld.so", "/opt/a b")],
)
def test_a_launcher_holds_no_shell_words(tmp_path: Path, interp: str, rpath: str) -> None:
    root = tmp_path / "root"
    lib = _lib((root / rpath.lstrip("/") if rpath else root / "lib") / "libq.so")
    _tool(root, "/usr/bin/tool", interp=interp, needs=lib, rpath=rpath)
    with pytest.raises(RecipeError, match="has characters a launcher cannot hold"):
        _tools_image(tmp_path, root, ["/usr/bin/tool"])


def test_runpath_tokens_other_than_origin_are_not_searched(tmp_path: Path) -> None:
    root = tmp_path / "root"
    lib = _lib(root / "opt" / "$LIB" / "libq.so")
    _tool(root, "/usr/bin/tool", needs=lib, rpath="/opt/$LIB")
    with pytest.raises(RecipeError, match=r"libq.so .* add the library's package to \[tools.packages\]"):
        guest.collect_with_libraries(guest.Tree(root), ["/usr/bin/tool"], packages_table="tools.packages")


def test_a_tools_entry_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _tool(root, "/usr/bin/tool")
    with pytest.raises(RecipeError, match=r"/usr/bin .* is not a regular file") as caught:
        guest.collect_with_libraries(guest.Tree(root), ["/usr/bin"])
    assert caught.value.exit_code == ExitCode.USAGE, "the recipe's mistake is bad input"


@pytest.mark.parametrize("tools", [["/bin/tool"], ["/usr/bin/tool", "/usr/sbin/tool"]])
def test_a_launcher_never_replaces_a_file(tmp_path: Path, tools: list[str]) -> None:
    root = tmp_path / "root"
    for path in tools:
        _tool(root, path)
    with pytest.raises(RecipeError, match="launcher /bin/tool of the tools drive would replace"):
        _tools_image(tmp_path, root, tools)
