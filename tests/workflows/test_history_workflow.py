"""history.yml run by act on a push of one commit: measured, results pushed, pages deployed.

The push brings one commit (``before`` is its parent), so the measure job runs the asv suite on
that commit alone, with the small history spec (sweeps/history-small.toml: the policy's dd cell,
one sample, under TCG); it keeps asv's results on the ``asv-results`` branch of the repository
and uploads the pages; the deploy job "deploys" them to the stand-in's directory, whose
index.html then opens in headless Chromium, served from loopback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import served_chromium
from actkit import World, git

pytestmark = [pytest.mark.integration, pytest.mark.guest]

RUN_ID = 9001
CHROMIUM = served_chromium.CHROMIUM
CHROMEDRIVER = served_chromium.CHROMEDRIVER


def open_in_chromium(site: Path) -> tuple[int, list[dict[str, Any]]]:
    """(links in asv's summary grid, SEVERE browser log entries) of ``site``'s index.html."""
    from selenium.webdriver.support.ui import WebDriverWait

    with served_chromium.served(site) as (driver, base):
        driver.get(base + "index.html")
        WebDriverWait(driver, 60).until(
            lambda d: d.execute_script(
                "return typeof $ !== 'undefined' && $('#summarygrid-display a').length > 0"
            )
        )
        links = int(driver.execute_script("return $('#summarygrid-display a').length"))
        return links, [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_a_pushed_commit_is_measured_and_its_pages_deployed_and_open(act: Path, tmp_path: Path) -> None:
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        pytest.fail(f"{CHROMIUM} or {CHROMEDRIVER} is absent: scripts/setup.sh installs them")
    world = World(root=tmp_path, act_bin=act, api_url="http://127.0.0.1:9")
    tree = tmp_path / "tree"
    sha = world.create_repository(tree)
    before = git(tree, "rev-parse", "HEAD~1")
    workdir = world.working_copy(tmp_path / "workdir", sha)
    event = {
        "ref": "refs/heads/main",
        "before": before,
        "after": sha,
        "repository": {"full_name": "acme/diskbench", "default_branch": "main"},
        "head_commit": {"id": sha},
    }
    spec = tree / "sweeps" / "history-small.toml"

    run = world.act(
        workdir, "history.yml", "push", event, RUN_ID, extra_env={"DISKBENCH_HISTORY_SPEC": str(spec)}
    )

    assert run.rc == 0, run.tail()
    assert run.job_results() == {"measure": ["success"], "deploy": ["success"]}, run.tail()
    # one commit measured (the push's), its results kept on the results branch of the repository
    remote = world.remote()
    files = git(remote, "ls-tree", "-r", "--name-only", "asv-results").splitlines()
    results = [f for f in files if f.endswith(".json") and f.startswith("results/") and "-virtualenv-" in f]
    assert len(results) == 1, files
    measured = json.loads(git(remote, "show", f"asv-results:{results[0]}"))
    assert measured["commit_hash"] == sha
    assert f"deployed to {world.pages.as_uri()}/" in run.output("deploy"), run.tail()
    # the deployed site is the measure job's pages, and it opens
    index = world.pages / "index.html"
    assert index.is_file(), (
        sorted(p.name for p in world.pages.iterdir()) if world.pages.exists() else "no pages"
    )
    graph = json.loads((world.pages / "index.json").read_text())
    assert sha in graph["revision_to_hash"].values()
    links, severe = open_in_chromium(world.pages)
    assert links > 0
    assert not severe, severe
