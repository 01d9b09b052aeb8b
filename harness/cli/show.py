"""``diskbench show``: the table of existing records."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.errors import ExitCode
from harness.record import read_record, record_files
from harness.report import render


def add_parser(sub: Any) -> None:
    show = sub.add_parser("show", help="print the table of existing records")
    show.add_argument("records", nargs="+", type=Path, help="record files or run directories")


def run(args: argparse.Namespace) -> int:
    records = [read_record(p) for path in args.records for p in record_files(path)]
    print(render([r.to_json() for r in records]), end="")
    return ExitCode.OK
