"""The Python packages the harness imports at run time, carried as files any CPython >= 3.11 imports:
the pure ones once (``site/``), each compiled one per CPython (``site-cpXY/``), from the running
interpreter's own or from PyPI's manylinux wheels."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

from harness.errors import InfraError
from harness.host import proc

#: the distributions the harness imports at run time (their own requirements follow)
RUNTIME_DISTRIBUTIONS = ("qemu.qmp", "jsonschema")
_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def own_tag() -> str:
    """The running CPython's tag: ``cp311``."""
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def runtime_distributions() -> list[importlib.metadata.Distribution]:
    """The installed distributions the harness needs at run time: :data:`RUNTIME_DISTRIBUTIONS` and
    what they require for this Python and the bundle's newer ones (no extras)."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = list(RUNTIME_DISTRIBUTIONS)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-").replace(".", "-")
        if key in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise InfraError(f"bundle: the harness needs {name}, which is not installed here") from None
        seen[key] = dist
        for text in dist.requires or []:
            marker = text.partition(";")[2]
            if "extra" in marker:
                continue
            # a requirement for older Pythons only (typing-extensions below 3.13) is carried too:
            # the bundle runs on any CPython from 3.11
            name_match = _REQUIREMENT_NAME.match(text)
            if name_match:
                todo.append(name_match.group(0))
    return [seen[k] for k in sorted(seen)]


def _top_level(dist: importlib.metadata.Distribution) -> list[str]:
    tops = set()
    for f in dist.files or []:
        first = f.parts[0]
        if first.endswith((".dist-info", ".data")) or first in ("..", "__pycache__"):
            continue
        tops.add(first)
    return sorted(tops)


def _compiled(dist: importlib.metadata.Distribution) -> bool:
    return any(str(f).endswith(".so") for f in dist.files or [])


def install_packages(
    root: Path, tags: tuple[str, ...], wheel_cache: Path, progress: Callable[[str], None]
) -> tuple[str, ...]:
    """The pure packages into ``site/``; each compiled one into ``site-TAG/`` for every tag, the
    running Python's copied, the others' from wheels; returns the compiled distributions."""
    site = root / "site"
    site.mkdir()
    for tag in tags:
        (root / f"site-{tag}").mkdir()
    compiled = []
    for dist in runtime_distributions():
        where = Path(str(dist.locate_file("")))
        if not _compiled(dist):
            for top in _top_level(dist):
                source = where / top
                if source.is_dir():
                    shutil.copytree(source, site / top, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                else:
                    shutil.copyfile(source, site / top)
            continue
        name = dist.metadata["Name"]
        compiled.append(name)
        for tag in tags:
            into = root / f"site-{tag}"
            if tag == own_tag():
                for top in _top_level(dist):
                    shutil.copytree(where / top, into / top, ignore=shutil.ignore_patterns("__pycache__"))
                continue
            wheel = _wheel(name, dist.version, tag, wheel_cache, progress)
            with zipfile.ZipFile(wheel) as zf:
                for member in zf.namelist():
                    if member.split("/")[0].endswith((".dist-info", ".data")):
                        continue
                    zf.extract(member, into)
    return tuple(compiled)


def _wheel(name: str, version: str, tag: str, cache: Path, progress: Callable[[str], None]) -> Path:
    """The manylinux x86-64 wheel of ``name==version`` for CPython ``tag`` (``cp312``), from
    ``cache`` or downloaded there with pip."""
    stem = name.replace("-", "_").replace(".", "_").lower()
    cache.mkdir(parents=True, exist_ok=True)

    def found() -> Path | None:
        for wheel in sorted(cache.glob("*.whl")):
            parts = wheel.name.lower().split("-")
            if parts[0] == stem and parts[1] == version and parts[2] == tag and "x86_64" in parts[-1]:
                return wheel
        return None

    wheel = found()
    if wheel is not None:
        return wheel
    python_version = f"{tag[2]}.{tag[3:]}"
    progress(f"bundle: pip download {name}=={version} for CPython {python_version}")
    result = proc.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--only-binary", ":all:", "--python-version", python_version,
            "--implementation", "cp", "--abi", tag, "--platform", "manylinux2014_x86_64",
            "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux_2_28_x86_64",
            "--dest", str(cache), f"{name}=={version}",
        ],
        timeout_s=300,
        check=False,
    )  # fmt: skip
    wheel = found()
    if result.returncode != 0 or wheel is None:
        tail = (result.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise InfraError(
            f"bundle: no wheel of {name}=={version} for CPython {python_version} (pip download: {tail}); "
            f"put one in {cache}"
        )
    return wheel
