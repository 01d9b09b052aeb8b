"""``diskbench show``: the table of existing records."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.errors import ExitCode


def add_parser(sub: Any) -> None:
    show = sub.add_parser("show", help="print the table of existing records")
    show.add_argument("records", nargs="+", type=Path, help="record files or run directories")


def run(args: argparse.Namespace) -> int:
    from harness.records import load_record
    from harness.report import render

    paths: list[Path] = []
    for path in args.records:
        paths.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    print(render([load_record(p) for p in paths]), end="")
    return ExitCode.OK
