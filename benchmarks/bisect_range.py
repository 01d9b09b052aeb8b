"""A throwaway range to bisect: a clone of this repository with N commits on top, one of which
slows the policy's IO path down.

    .venv/bin/python benchmarks/bisect_range.py DIR [--commits 16] [--bad-at 11] \\
        [--option throttling.bps-write=33554432]

Clones this repository's HEAD into DIR, tags it ``good``, then adds ``--commits`` commits that
each append a line to ``NOTES.txt``; commit number ``--bad-at`` (1-based) also adds ``--option``
to ``[drive.options]`` of ``policy.toml`` (default: a write throttle of 32 MiB/s, binding for the
replay of a dd of 64 MiB, which takes about 0.3 s unthrottled).  The last commit is tagged
``bad``.  Prints the bisect command to run on it and the commit it must name.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def make_range(path: Path, *, commits: int, bad_at: int, option: str, source: Path = REPO_ROOT) -> str:
    """Build the range in ``path``; returns the commit that injects the slowdown."""
    if not 1 <= bad_at <= commits:
        raise SystemExit(f"--bad-at {bad_at}: use 1 to {commits}")
    key, _, value = option.partition("=")
    subprocess.run(["git", "clone", "-q", str(source), str(path)], check=True)
    git(path, "config", "user.email", "bisect@diskbench.invalid")
    git(path, "config", "user.name", "diskbench bisect range")
    git(path, "tag", "good")
    injected = ""
    for number in range(1, commits + 1):
        with (path / "NOTES.txt").open("a") as notes:
            notes.write(f"note {number}\n")
        message = f"notes: line {number}"
        if number == bad_at:
            policy = path / "policy.toml"
            text = policy.read_text()
            table = "\n[drive.options]\n"
            assert table in text, "policy.toml has no [drive.options] table"
            policy.write_text(text.replace(table, f'{table}"{key}" = {value}\n', 1))
            message = f"policy: {key} = {value}"
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", message)
        if number == bad_at:
            injected = git(path, "rev-parse", "HEAD")
    git(path, "tag", "bad")
    return injected


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dir", type=Path)
    parser.add_argument("--commits", type=int, default=16)
    parser.add_argument("--bad-at", type=int, default=11)
    parser.add_argument("--option", default="throttling.bps-write=33554432")
    args = parser.parse_args()
    injected = make_range(args.dir, commits=args.commits, bad_at=args.bad_at, option=args.option)
    print(f"diskbench bisect --repo {args.dir} --good good --bad bad --accel tcg")
    print(f"first bad commit to find: {injected}")


if __name__ == "__main__":
    main()
