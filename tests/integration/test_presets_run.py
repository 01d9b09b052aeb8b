"""The five seed presets run under TCG at a tiny scale, and their report renders in headless Chromium.

Each preset runs a few of its cells (``--only``) at ``--scale 0.01`` (every size at its floor),
one sample each, into one results dir shared by the module; the report test renders all five.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.host.hostinfo import filesystem_type
from harness.record import load_record
from harness.sample.images import MEMORY_FILESYSTEMS

pytestmark = [pytest.mark.integration, pytest.mark.guest]

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
TINY = "0.01"
# the cells each preset runs here, and how many
ONLY = {
    "booth-2010": ("raw-off-*,qcow2-off-*", 2),
    "cluster-size": ("*-cs64k-*,*-cs2m-*", 2),
    "mkfs-sparse": ("raw-off-*.warm,raw-off-*.cold", 2),
    # seed 004 compares QEMU versions: its cell under the runner's QEMU and under 10.0
    "kvm-wiki-install": ("raw-full-*-ide.bonnie-*", 2),
    "preallocation": ("qcow2-off-*", 2),
}


class Runs:
    """Runs each preset once, on first request, into one results dir."""

    def __init__(self, results: Path, work: Path) -> None:
        self.results = results
        self.work = work
        self.done: dict[str, tuple[int, str, str]] = {}

    def run(self, name: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
        if name not in self.done:
            only, _count = ONLY[name]
            argv = [
                "sweep",
                "--preset",
                name,
                "--scale",
                TINY,
                "--repeat",
                "1",
                "--only",
                only,
                "--accel",
                "tcg",
            ]
            rc = main([*argv, "--results-dir", str(self.results), "--work-dir", str(self.work)])
            out, err = capsys.readouterr()
            self.done[name] = (rc, out, err)
        return self.done[name]

    def records(self, name: str) -> list[dict[str, Any]]:
        # a preset of several QEMU builds keeps each build's records in a folder of its own
        found = [*self.sweep_dir(name).glob("*.json"), *self.sweep_dir(name).glob("qemu-*/*.json")]
        return [load_record(p).to_json() for p in sorted(found)]

    def sweep_dir(self, name: str) -> Path:
        return self.results / "sweeps" / f"{name}-scale{TINY}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    base = tmp_path_factory.mktemp("presets")
    if filesystem_type(base) not in MEMORY_FILESYSTEMS:
        yield Runs(base / "results", base / "work")
        return
    with tempfile.TemporaryDirectory(prefix="diskbench-presets-", dir="/var/tmp") as tmp:
        yield Runs(base / "results", Path(tmp))


def run_ok(runs: Runs, name: str, capsys: pytest.CaptureFixture[str], guest: Any) -> list[dict[str, Any]]:
    rc, out, err = runs.run(name, capsys)
    assert rc == 0, err[-3000:]
    assert f"sweep {name}-scale{TINY} (" in out
    records = runs.records(name)
    assert len(records) == ONLY[name][1], [r["cell"]["id"] for r in records]
    for record in records:
        (sample,) = record["samples"]
        assert sample["status"] == "ok", (record["cell"]["id"], sample.get("reason"))
        assert record["vm"]["accel"] == "tcg"
        assert record["run_id"] == f"sweep-{name}-scale{TINY}"
    assert not list(runs.work.glob("*.raw")) and not list(runs.work.glob("*.qcow2"))
    return records


def by_id(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["cell"]["id"]: r for r in records}


def test_booth_2010_writes_into_sparse_raw_and_sparse_qcow2(
    runs: Runs, capsys: pytest.CaptureFixture[str], guest: Any
) -> None:
    records = by_id(run_ok(runs, "booth-2010", capsys, guest))
    qcow2 = records["qcow2-off-cs64k-64m.none-threads-virtio-blk.dd-2m-2m-ext2"]["samples"][0]
    raw = records["raw-off-64m.none-threads-virtio-blk.dd-2m-2m-ext2"]["samples"][0]
    assert qcow2["metrics"]["phase.write_s"] > 0 and raw["metrics"]["bytes"] == 2 * 1024**2
    # a new qcow2 holds its header and tables (seed 001: 136k); a sparse raw file holds nothing
    assert 64 * 1024 < qcow2["host"]["allocated_before"] < 1024**2
    assert raw["host"]["allocated_before"] < 64 * 1024


def test_cluster_size_creates_fully_preallocated_images(
    runs: Runs, capsys: pytest.CaptureFixture[str], guest: Any
) -> None:
    records = run_ok(runs, "cluster-size", capsys, guest)
    for record in records:
        sample = record["samples"][0]
        assert record["cell"]["image"]["preallocation"] == "full"
        assert sample["host"]["allocated_before"] >= 512 * 1024**2
        assert sample["metrics"]["bytes"] == 128 * 1024**2


def test_mkfs_sparse_measures_warm_and_cold_runs_after_a_first_one(
    runs: Runs, capsys: pytest.CaptureFixture[str], guest: Any
) -> None:
    records = run_ok(runs, "mkfs-sparse", capsys, guest)
    states = {r["cell"]["cache_state"]: r["samples"][0] for r in records}
    assert set(states) == {"warm", "cold"}
    for sample in states.values():
        assert sample["host"]["priming"]["status"] == "ok"
        assert sample["metrics"]["mkfs.block_groups"] == 8  # 1 GiB: eight 128 MiB groups
    assert "posix_fadvise" in states["cold"]["host"]["cache_drop"]
    assert "cache_drop" not in states["warm"]["host"]


def test_kvm_wiki_install_runs_bonnie_on_an_allocated_image(
    runs: Runs, capsys: pytest.CaptureFixture[str], guest: Any
) -> None:
    records = run_ok(runs, "kvm-wiki-install", capsys, guest)
    assert len({r["cell"]["id"] for r in records}) == 1  # one cell, under each build
    assert "10.0.2" in {r["machine"]["qemu_version"] for r in records}
    for record in records:
        sample = record["samples"][0]
        assert record["cell"]["workload"]["fs"] == "ext2" and record["cell"]["drive"]["cache"] == "none"
        assert sample["metrics"]["bonnie.seq_output_block_kib_per_s"] > 0
        assert sample["bonnie_params"]["num_files"] == "1"


def test_preallocation_runs_a_luks_row_and_probes_compression(
    runs: Runs, capsys: pytest.CaptureFixture[str], guest: Any
) -> None:
    records = by_id(run_ok(runs, "preallocation", capsys, guest))
    luks = records["qcow2-off-cs64k-luks-128m.none-threads-virtio-blk.dd-16m-2m-ext4"]["samples"][0]
    plain = records["qcow2-off-cs64k-128m.none-threads-virtio-blk.dd-16m-2m-ext4"]["samples"][0]
    assert "encrypt.key-secret=diskbench-secret" in " ".join(luks["argv"])
    assert luks["host"]["check"]["verdict"] == "clean"
    # the LUKS header (keyslots) is allocated at creation: megabytes, not a plain qcow2's kilobytes
    assert luks["host"]["allocated_before"] > 1024**2 > plain["host"]["allocated_before"]
    probe = json.loads((runs.sweep_dir("preallocation") / "probes" / "compressed-writes.json").read_text())
    assert probe["supported"] is False and "compress" in probe["reason"]


def test_the_report_of_all_five_renders_in_headless_chromium(
    runs: Runs, capsys: pytest.CaptureFixture[str], guest: Any, tmp_path: Path
) -> None:
    dirs = []
    for name in ONLY:
        run_ok(runs, name, capsys, guest)
        dirs.append(str(runs.sweep_dir(name)))
    out = tmp_path / "report.html"
    assert main(["report", *dirs, "--html", str(out), "--markdown", str(tmp_path / "report.md")]) == 0
    text = capsys.readouterr().out
    assert "!! ACCELERATOR: TCG." in text
    for seed in ("001", "002", "003", "004", "000"):
        assert f"seed {seed})" in text
    pngs = sorted((tmp_path / "report_files").glob("*.png"))
    assert len(pngs) >= 12
    for png in pngs:
        assert colours(png) > 10, f"{png.name} is blank"
    loaded, severe = render_in_chromium(out, ARTIFACTS / "presets-report.png")
    assert len(loaded) == len(pngs)
    assert all(width > 0 for _src, width in loaded), loaded
    assert not severe, severe


def render_in_chromium(page: Path, screenshot: Path) -> tuple[list[tuple[str, int]], list[dict[str, Any]]]:
    """Open ``page`` in headless Chromium: every image's natural width, SEVERE log entries; a screenshot."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--window-size=1400,2000"):
        options.add_argument(arg)
    if Path("/usr/bin/chromium").exists():
        options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(page.as_uri())
        loaded = driver.execute_script(
            "return Array.from(document.images).map(i => [i.getAttribute('src'), i.complete ? i.naturalWidth : 0])"
        )
        severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1400, min(int(height) + 100, 16000))
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(screenshot))
    finally:
        driver.quit()
    return [(str(src), int(width)) for src, width in loaded], severe


def colours(png: Path) -> int:
    """Distinct colours among a sample of the image's pixels (a blank chart has one or two)."""
    import matplotlib.image

    flat = matplotlib.image.imread(str(png)).reshape(-1, 4)
    return len({tuple(px) for px in flat[:: max(1, len(flat) // 20000)]})
