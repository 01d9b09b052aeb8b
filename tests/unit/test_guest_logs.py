"""The guest build's progress: logged per module, shown by the CLI on stderr, or handed to a
caller's callback instead (a sweep's progress bar), once either way."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import cli, guest
from harness.cli.common import configure_logging
from harness.debian.debs import progress_step as _progress_step
from harness.errors import ExitCode
from harness.paths import IMAGES_DIR


@pytest.fixture(autouse=True)
def fresh_logging() -> Iterator[None]:
    """Each test configures the ``harness`` logger itself; it is left as it was found."""
    top = logging.getLogger("harness")
    saved = top.level, top.propagate, list(top.handlers)
    yield
    top.setLevel(saved[0])
    top.propagate = saved[1]
    top.handlers[:] = saved[2]


def cached_build(cache: Path) -> Path:
    """A build of the shipped recipe in ``cache``, as build_guest leaves one (files empty)."""
    out = cache / "guest" / guest.recipe_hash(IMAGES_DIR)
    out.mkdir(parents=True)
    art = guest.GuestArtifacts(
        build_dir=out,
        kernel=out / "vmlinux",
        initrd=out / "initramfs.cpio",
        payloads={"small": out / "payload-small.img"},
        recipe_hash=out.name,
        kernel_version="6.1.0-1-amd64",
        packages={"busybox-static": "1"},
    )
    for path in (art.kernel, art.initrd, *art.payloads.values()):
        path.write_bytes(b"")
    (out / guest.MANIFEST_NAME).write_text(json.dumps(art.as_dict()))
    return out


def test_guest_build_shows_its_progress_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = cached_build(tmp_path / "cache")
    real = guest.build_guest
    monkeypatch.setattr(guest, "build_guest", lambda **kw: real(cache=tmp_path / "cache", **kw))
    for _ in range(2):  # configured again by the second run: still one line
        assert cli.main(["guest", "build"]) == ExitCode.OK
        captured = capsys.readouterr()
        assert captured.err == f"guest: using cached build {out}\n"
        assert captured.out.startswith(f"guest {out.name}: kernel {out / 'vmlinux'}, initrd ")


def test_the_logged_lines_go_through_the_inert_stream_of_main(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache path with a newline and a workflow command is logged inert, as err() prints it."""
    cache = tmp_path / "x\n::add-mask::secret"
    out = cached_build(cache)
    real = guest.build_guest
    monkeypatch.setattr(guest, "build_guest", lambda **kw: real(cache=cache, **kw))
    assert cli.main(["guest", "build"]) == ExitCode.OK
    err = capsys.readouterr().err
    assert err == f"guest: using cached build {str(out).replace('::add-mask', ': :add-mask')}\n"


def test_a_callback_takes_the_lines_instead_of_the_configured_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging()
    out = cached_build(tmp_path)
    lines: list[str] = []
    guest.build_guest(cache=tmp_path, log=lines.append)
    assert lines == [f"guest: using cached build {out}"]
    assert capsys.readouterr().err == ""
    top = logging.getLogger("harness.guest")
    assert (top.level, top.propagate, top.handlers) == (logging.NOTSET, True, [])
    # without a callback the same line reaches logging's handlers again
    guest.build_guest(cache=tmp_path)
    assert capsys.readouterr().err == f"guest: using cached build {out}\n"


def test_an_incomplete_build_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = cached_build(tmp_path)
    (out / "vmlinux").unlink()

    def stop(*_args: object, **_kw: object) -> None:
        raise KeyboardInterrupt("the rebuild stops here")

    monkeypatch.setattr("harness.guest.build.load_recipe", stop)
    with caplog.at_level(logging.INFO, logger="harness"), pytest.raises(KeyboardInterrupt):
        guest.build_guest(cache=tmp_path)
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("harness.guest.build", logging.WARNING, f"guest: {out} is incomplete, rebuilding")
    ]


@pytest.mark.parametrize(("count", "step"), [(0, 1), (5, 1), (20, 2), (95, 10), (129, 10), (1000, 10)])
def test_download_progress_comes_every_tenth_at_most_every_ten(count: int, step: int) -> None:
    assert _progress_step(count) == step
