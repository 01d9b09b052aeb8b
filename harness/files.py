"""Files the harness writes and reads: atomic writes (never half a file) and input files read
with an error that names them."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from harness.errors import HarnessError, SpecError


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` through a temp file in the same directory, fsync, rename: never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=False) + "\n")


Loaded = TypeVar("Loaded")


def publish_dir(tmp: Path, final: Path, load: Callable[[], Loaded | None], vanished: Exception) -> Loaded:
    """Rename the finished directory ``tmp`` to ``final`` (atomic: where another process's finished
    copy is there first, that one wins) and give what ``load()`` finds there. Raises the rename's
    OSError where ``final`` holds no finished copy, and ``vanished`` where it is gone afterwards."""
    try:
        tmp.rename(final)
    except OSError:
        if load() is None:
            raise
    found = load()
    if found is None:
        raise vanished
    return found


def read_input_text(path: Path, *, what: str, hint: str) -> str:
    """The text of an input file (a spec, a policy); a missing or unreadable one is a usage error.

    ``what`` names the input ("sweep spec"), ``hint`` says what to pass instead.
    """
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{what} {path} does not exist: {hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{what} {path} cannot be read: {exc}") from None


def parse_json(text: str, *, what: str, fix: str, error: type[HarnessError]) -> Any:
    """``text`` as JSON; text that is not JSON raises ``error``: "``what`` is not valid JSON
    (truncated?, line N): ``fix``"."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{what} is not valid JSON (truncated?, line {exc.lineno}): {fix}") from None


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    """The hex digest of a file's bytes."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
