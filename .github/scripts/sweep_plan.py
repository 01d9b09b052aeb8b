"""Check the sweep workflow's inputs and plan its shards: the workflow's first, cheap job.

The inputs come from the environment (``SPEC``, ``ONLY``, ``REPEAT``, ``SHARDS``), where the
workflow put them, never from a shell line that interpolates them. Writes to ``$GITHUB_OUTPUT``:

- ``args``: the JSON list of arguments of ``diskbench sweep`` (the spec or ``--preset NAME``,
  ``--only``, ``--repeat``) that every shard runs, with ``--shard K/N`` added;
- ``name``: the sweep's name (records go to ``RESULTS/sweeps/NAME/``);
- ``shards``: the JSON list ``[1, ..., N]`` of the matrix, and ``count``: N.

Bad input is one line naming the input and exit 2, before any runner is taken.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRESETS = Path("harness") / "data" / "presets"
MAX_SHARDS = 16
MAX_REPEAT = 100
_PRESET = re.compile(r"[a-z0-9][a-z0-9._-]*")
_SPEC_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*\.toml")
_ONLY = re.compile(r"[A-Za-z0-9*?.,_\[\]!-]+")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class InputError(Exception):
    """A workflow input that cannot be run; the message names the input."""


def plan(env: Mapping[str, str], root: Path = ROOT) -> dict[str, str]:
    """The outputs for ``env``'s inputs, or :class:`InputError`."""
    spec = env.get("SPEC", "").strip()
    args, spec_file = _spec_args(spec, root)
    only = env.get("ONLY", "").strip()
    if only:
        if len(only) > 500 or not _ONLY.fullmatch(only):
            raise InputError(f"only: {only!r}: comma-separated globs over cell ids, e.g. 'qcow2-*,*.dd-*'")
        args += ["--only", only]
    repeat = env.get("REPEAT", "").strip()
    if repeat:
        if not repeat.isdigit() or not 1 <= int(repeat) <= MAX_REPEAT:
            raise InputError(
                f"repeat: {repeat!r}: a whole number from 1 to {MAX_REPEAT}, or empty for the spec's"
            )
        args += ["--repeat", str(int(repeat))]
    shards = env.get("SHARDS", "").strip() or "1"
    if not shards.isdigit() or not 1 <= int(shards) <= MAX_SHARDS:
        raise InputError(f"shards: {shards!r}: a whole number of runners from 1 to {MAX_SHARDS}")
    count = int(shards)
    return {
        "args": json.dumps(args),
        "name": _sweep_name(spec_file),
        "shards": json.dumps(list(range(1, count + 1))),
        "count": str(count),
    }


def _spec_args(spec: str, root: Path) -> tuple[list[str], Path]:
    if not spec:
        raise InputError(
            "spec: empty: give a preset name (e.g. preallocation) or a spec path (sweeps/matrix.toml)"
        )
    if _PRESET.fullmatch(spec) and not spec.endswith(".toml"):
        path = root / PRESETS / f"{spec}.toml"
        if not path.is_file():
            known = sorted(p.stem for p in (root / PRESETS).glob("*.toml") if not p.stem.endswith(".seed"))
            raise InputError(f"spec: no preset {spec!r}: use one of {', '.join(known)}, or a spec path")
        return ["--preset", spec], path
    parts = Path(spec).parts
    if not _SPEC_PATH.fullmatch(spec) or ".." in parts:
        raise InputError(
            f"spec: {spec!r}: a path of a .toml spec in this repository, e.g. sweeps/matrix.toml"
        )
    path = root / spec
    if not path.is_file():
        raise InputError(f"spec: {spec}: no such file in this repository")
    return [spec], path


def _sweep_name(path: Path) -> str:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"spec: {path.name}: not a readable TOML spec: {exc}") from exc
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InputError(f"spec: {path.name}: its name {name!r} cannot name a directory")
    return name


def main() -> int:
    try:
        outputs = plan(os.environ)
    except InputError as exc:
        print(f"::error::{exc}", file=sys.stderr)
        return 2
    lines = [f"{key}={value}" for key, value in outputs.items()]
    print("\n".join(lines))
    out = os.environ.get("GITHUB_OUTPUT")
    if out:
        with open(out, "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
