"""asv's build and install steps: hand a commit's subject to the history suite.

asv checks out each commit into its build dir, installs it into its own
environment, then imports the suite (``benchmarks/history/``) from the
*current* checkout.  What the suite must measure is the commit's subject,
not the working tree's: this script copies it into the environment, where
the suite reads it back (``ENV_DIR/diskbench-subject/subject.json``)::

    # asv.conf.json (this repository): policy and guest recipe of the commit
    python asv_subject.py install --commit C --source BUILD_DIR --env-dir ENV_DIR

    # benchmarks/qemu/asv.conf.json (a QEMU repository): the commit's binaries,
    # with the diskbench checkout's policy and recipe
    python asv_subject.py collect-qemu --build-dir BUILD_DIR/build --out BUILD_CACHE_DIR
    python asv_subject.py install --commit C --source DISKBENCH --qemu-dir BUILD_CACHE_DIR --env-dir ENV_DIR

``install`` also builds the commit's guest (or finds it in the cache, keyed
by the recipe's hash) with the harness asv has just installed, so a recipe
that cannot be built fails the install step, with its message, before any
benchmark runs.

Only the standard library is used at the top: asv runs this with the
environment's Python, whose ``harness`` is the commit's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

SUBJECT_DIR = "diskbench-subject"
SUBJECT_FILE = "subject.json"
SCHEMA = "diskbench-asv-subject"
VERSION = 1
QEMU_BINARIES = ("qemu-system-x86_64", "qemu-img")
# Where QEMU looks for its firmware next to the binary: pc-bios/ (a build
# tree, QEMU < 7.1) and qemu-bundle/ (QEMU >= 7.1).
QEMU_DATA_DIRS = ("pc-bios", "qemu-bundle")


def log(message: str) -> None:
    print(f"asv_subject: {message}", file=sys.stderr, flush=True)


def copy_tree(src: Path, dest: Path) -> None:
    """Copy with symlinks followed (a build tree's firmware links into the source tree)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, symlinks=False, ignore_dangling_symlinks=True)


def collect_qemu(build_dir: Path, out: Path) -> None:
    """Keep a QEMU build's binaries and firmware in asv's per-commit build cache."""
    out.mkdir(parents=True, exist_ok=True)
    for name in QEMU_BINARIES:
        binary = build_dir / name
        if not binary.is_file():
            raise SystemExit(f"asv_subject: {binary} was not built: check the build step's output above")
        shutil.copy2(binary, out / name)
    for name in QEMU_DATA_DIRS:
        if (build_dir / name).is_dir():
            copy_tree(build_dir / name, out / name)
    log(f"QEMU binaries of {build_dir} kept in {out}")


def install(*, commit: str, source: Path, env_dir: Path, qemu_dir: Path | None, build: bool) -> Path:
    """Copy the subject into ``env_dir`` and write the manifest the suite reads."""
    dest = env_dir / SUBJECT_DIR
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    manifest: dict[str, object] = {
        "schema": SCHEMA,
        "version": VERSION,
        "commit": commit,
        "source": str(source),
        "policy": None,
        "recipe": None,
        "qemu": None,
        "qemu_img": None,
        "guest": None,
    }
    if (source / "policy.toml").is_file():
        shutil.copy2(source / "policy.toml", dest / "policy.toml")
        manifest["policy"] = "policy.toml"
    if (source / "images").is_dir():
        copy_tree(source / "images", dest / "images")
        manifest["recipe"] = "images"
    if qemu_dir is not None:
        copy_tree(qemu_dir, dest / "qemu")
        manifest["qemu"] = str(dest / "qemu" / "qemu-system-x86_64")
        manifest["qemu_img"] = str(dest / "qemu" / "qemu-img")
    if build and manifest["recipe"]:
        manifest["guest"] = build_guest(dest / "images")
    (dest / SUBJECT_FILE).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    log(f"subject of {commit[:12]} in {dest}: policy {manifest['policy']}, recipe {manifest['recipe']}")
    return dest


def build_guest(recipe_dir: Path) -> str:
    """Build (or reuse) the guest of ``recipe_dir`` with the harness of this environment."""
    from harness.guest import build_guest as harness_build_guest

    art = harness_build_guest(recipe_dir=recipe_dir, log=log)
    return str(art.recipe_hash)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    inst = sub.add_parser("install", help="copy a commit's policy, recipe (and QEMU) into the asv env")
    inst.add_argument("--commit", required=True)
    inst.add_argument("--source", type=Path, required=True, help="holds policy.toml and images/")
    inst.add_argument("--env-dir", type=Path, required=True)
    inst.add_argument("--qemu-dir", type=Path, default=None, help="what collect-qemu kept")
    inst.add_argument("--no-guest", action="store_true", help="do not build the guest now")
    coll = sub.add_parser("collect-qemu", help="keep a QEMU build's binaries in asv's build cache")
    coll.add_argument("--build-dir", type=Path, required=True)
    coll.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "collect-qemu":
        collect_qemu(args.build_dir.resolve(), args.out.resolve())
        return 0
    install(
        commit=args.commit,
        source=args.source.resolve(),
        env_dir=args.env_dir.resolve(),
        qemu_dir=args.qemu_dir.resolve() if args.qemu_dir else None,
        build=not args.no_guest,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
