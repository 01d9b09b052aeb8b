"""A built guest on disk: its files and ``manifest.json``, what the VM runner boots."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import GuestBuildError

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1


@dataclass(frozen=True)
class GuestArtifacts:
    """A built guest: what the VM runner boots and what a record says it booted."""

    build_dir: Path
    kernel: Path  # ELF vmlinux, booted through PVH
    initrd: Path  # uncompressed cpio newc
    payloads: Mapping[str, Path]  # "small", "full" -> ext2 image
    recipe_hash: str
    kernel_version: str  # uname -r of the guest, e.g. "6.1.0-50-amd64"
    packages: Mapping[str, str]  # every pinned package, name -> version
    payload_packages: Mapping[str, int] = field(default_factory=dict)  # payload -> count
    modules: tuple[str, ...] = ()  # insmod order
    tools: Path | None = None  # ext2 image of the [tools] files, mounted at /tools (fio)

    def as_dict(self) -> dict[str, Any]:
        """The manifest: paths relative to the build directory."""
        return {
            "format": MANIFEST_FORMAT,
            "recipe_hash": self.recipe_hash,
            "kernel_version": self.kernel_version,
            "kernel": self.kernel.name,
            "initrd": self.initrd.name,
            "payloads": {k: v.name for k, v in self.payloads.items()},
            "payload_packages": dict(self.payload_packages),
            "modules": list(self.modules),
            "packages": dict(sorted(self.packages.items())),
            "tools": self.tools.name if self.tools is not None else None,
        }

    @classmethod
    def load(cls, build_dir: Path) -> GuestArtifacts:
        """Read ``manifest.json`` of a finished build; a bad one says to rebuild."""
        path = build_dir / MANIFEST_NAME
        try:
            data = json.loads(path.read_text())
            if data.get("format") != MANIFEST_FORMAT:
                raise ValueError(f"manifest format {data.get('format')!r}")
            art = cls(
                build_dir=build_dir,
                kernel=build_dir / data["kernel"],
                initrd=build_dir / data["initrd"],
                payloads={k: build_dir / v for k, v in data["payloads"].items()},
                recipe_hash=str(data["recipe_hash"]),
                kernel_version=str(data["kernel_version"]),
                packages={str(k): str(v) for k, v in data["packages"].items()},
                payload_packages={str(k): int(v) for k, v in data["payload_packages"].items()},
                modules=tuple(str(m) for m in data["modules"]),
                tools=build_dir / str(data["tools"]) if data.get("tools") else None,
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise GuestBuildError(
                f"guest build {build_dir} is unreadable ({exc}); rebuild it with "
                f"`diskbench guest build --force`"
            ) from exc
        for p in (art.kernel, art.initrd, *art.payloads.values(), *([art.tools] if art.tools else [])):
            if not p.is_file():
                raise GuestBuildError(
                    f"guest build {build_dir} lacks {p.name}; rebuild it with `diskbench guest build --force`"
                )
        return art
