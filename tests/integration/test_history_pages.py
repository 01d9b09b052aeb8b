"""The history pages in headless Chromium: fio's, bonnie++'s and the device's latency series, and the
change points.

No guest runs here: asv result files of 8 commits are written in asv's own format (the
benchmarks the history suite makes for a dd and a fio cell, from ``benchmarks/history``'s
layout), ``asv publish`` (the real one) makes the pages, :func:`harness.history.pages.localize` makes
them work offline and :func:`harness.history.changes.page.publish_changes` adds the change points.
The fio, bonnie++ and ``dev.*`` graphs must show 8 points, and the change-point page must list the
step injected at commit 5, reached from the index's navigation.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import served_chromium
from gitrepo import git, new_repo

from harness.history.changes.page import publish_changes
from harness.history.pages import localize
from harness.sweep import parse_spec

pytestmark = [pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
from history import layout  # noqa: E402

CHROMIUM = served_chromium.CHROMIUM
CHROMEDRIVER = served_chromium.CHROMEDRIVER
ARTIFACTS = REPO / "tests" / "artifacts"
SPEC = """\
[axes]
workload = ["dd", "fio", "bonnie"]
format = ["raw", "qcow2"]
[params]
fio_target = "raw"
bonnie_files = 1
bonnie_char = "on"
"""
STEP_AT = 4  # commit 5 of 8 (0-based 4)
FIO_GRAPH = "matrix.Fio.track_fio_raw_rand_write_qd1_clat_p99_ms"
DEV_GRAPH = "matrix.Dd.track_dev_write_p99_ms"
# the linked images' class: one series, its chain the parameter
LINKED_GRAPHS = (
    "linked.Fio.track_host_write_amplification",
    "linked.Fio.track_fio_raw_rand_write_qd1_clat_p99_ms",
)
# bonnie++'s block, rewrite and per-character rates (seconds per GiB) and its create/delete rates
BONNIE_GRAPHS = tuple(
    f"matrix.Bonnie.track_bonnie_{name}"
    for name in (
        "seq_output_block_s_per_gib",
        "rewrite_s_per_gib",
        "seq_output_char_s_per_gib",
        "seq_input_char_s_per_gib",
        "seq_create_s_per_op",
        "random_delete_s_per_op",
    )
)


def value(name: str, commit: int, combo: int) -> float:
    """A figure: steady with a small wobble; the write latencies step up 4x from commit 5."""
    base = 2.0 + combo + 0.05 * ((commit * 7 + combo * 3) % 5)
    stepped = ("write" in name and "clat" in name) or "dev_write" in name
    return base * (4.0 if stepped and commit >= STEP_AT else 1.0)


def make_history(root: Path) -> Path:
    """A git repository of 8 commits, its asv config, results and benchmarks.json; returns the config."""
    repo = new_repo(root / "repo")
    hashes = []
    for i in range(8):
        (repo / "f.txt").write_text(f"{i}\n")
        git(repo, "add", "f.txt")
        git(repo, "commit", "-q", "-m", f"commit {i + 1}")
        hashes.append(git(repo, "rev-parse", "HEAD").strip())
    conf = {
        "version": 1,
        "project": "diskbench",
        "repo": str(repo),
        "branches": ["main"],
        "dvcs": "git",
        "results_dir": "results/asv",
        "html_dir": "html",
        "regressions_thresholds": {".*": 0.2},
    }
    config = root / "asv.conf.json"
    config.write_text(json.dumps(conf))
    spec = parse_spec(SPEC)
    benchmarks: dict[str, Any] = {"version": 2}
    rows: dict[str, tuple[list[list[str]], list[str]]] = {}
    groups = [("matrix", g) for g in layout.matrix_groups(spec)]
    groups += [("linked", g) for g in layout.linked_groups(spec)]
    for kind, group in groups:
        cls = layout.benchmark_class(group, kind, f"history.{kind}", spec.params)
        for figure in layout.workload_figures(group.workload, spec.params):
            name = f"{kind}.{group.class_name}.{figure.method}"
            params = [[repr(v) for v in axis] for axis in group.params]
            track = getattr(cls, figure.method)
            benchmarks[name] = {
                "code": "",
                "name": name,
                "param_names": list(group.param_names),
                "params": params,
                "pretty_name": track.pretty_name,
                "type": "track",
                "unit": track.unit,
                "version": layout.SUITE_VERSION,
            }
            rows[name] = (params, [figure.method])
    machine = root / "results" / "asv" / "vm-tcg"
    machine.mkdir(parents=True)
    (machine / "machine.json").write_text(json.dumps({"machine": "vm-tcg", "version": 1}))
    (root / "results" / "asv" / "benchmarks.json").write_text(json.dumps(benchmarks))
    for i, commit in enumerate(hashes):
        date = int(git(repo, "show", "-s", "--format=%ct", commit).strip()) * 1000
        results = {
            name: [
                [value(name, i, c) for c in range(len(params[0]))],
                params,
                layout.SUITE_VERSION,
                date,
                0.1,
            ]
            for name, (params, _method) in rows.items()
        }
        data = {
            "commit_hash": commit,
            "env_name": "virtualenv-py3.11",
            "date": date,
            "params": {"machine": "vm-tcg", "python": "3.11"},
            "python": "3.11",
            "requirements": {},
            "env_vars": {},
            "result_columns": ["result", "params", "version", "started_at", "duration"],
            "results": results,
            "durations": {},
            "version": 2,
        }
        (machine / f"{commit[:8]}-virtualenv-py3.11.json").write_text(json.dumps(data))
    return config


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("history-pages")
    config = make_history(root)
    html = root / "html"
    subprocess.run(
        [sys.executable, "-m", "asv", "publish", "--config", str(config), "--html-dir", str(html)],
        check=True,
        capture_output=True,
        cwd=root,
    )
    localize(html, log=lambda _m: None)
    order = git(root / "repo", "rev-list", "--reverse", "main").split()
    publish_changes(
        html,
        results_dir=root / "results" / "asv",
        records_root=root / "results" / "history",
        thresholds={".*": 0.2},
        order=order,
    )
    return html


@pytest.fixture(scope="module")
def browser(pages: Path) -> Iterator[tuple[Any, str]]:
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        pytest.skip(f"{CHROMIUM} or {CHROMEDRIVER} is absent: scripts/setup.sh installs them")
    with served_chromium.served(pages, window="1280,900") as opened:
        yield opened


def graph_points(driver: Any, base: str, graph: str) -> list[int]:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(base + "index.html")
    driver.get(base + f"index.html#{graph}")
    WebDriverWait(driver, 60).until(
        lambda d: d.execute_script(
            "var p = $('#main-graph').data('plot'); return !!p && p.getData().length > 0"
        )
    )
    # one line per series label: asv may draw a graph's series twice while its data loads
    by_label: dict[str, int] = driver.execute_script(
        "var out = {}; $('#main-graph').data('plot').getData().forEach(function (s, i) {"
        " out[String(s.label === undefined ? i : s.label)] ="
        " s.data.filter(function (p) { return p[1] !== null; }).length; }); return out;"
    )
    return sorted(by_label.values())


@pytest.mark.parametrize("graph", [FIO_GRAPH, DEV_GRAPH, "matrix.Fio.track_total_s", *BONNIE_GRAPHS])
def test_fio_bonnie_and_device_latency_series_render_with_every_commit(
    browser: tuple[Any, str], graph: str
) -> None:
    driver, base = browser
    points = graph_points(driver, base, graph)
    assert points == [8, 8], (graph, points)  # raw and qcow2, 8 commits each
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe
    if graph in (FIO_GRAPH, BONNIE_GRAPHS[2]):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        name = "history-fio-latency.png" if graph == FIO_GRAPH else "history-bonnie-per-char.png"
        driver.save_screenshot(str(ARTIFACTS / name))


@pytest.mark.parametrize("graph", LINKED_GRAPHS)
def test_the_linked_images_series_render_with_every_commit(browser: tuple[Any, str], graph: str) -> None:
    driver, base = browser
    assert graph_points(driver, base, graph) == [8], graph  # one chain, 8 commits
    # asv's parameter panel names the axis and the chain
    assert "backing" in driver.page_source and "depth=1,fill=32M" in driver.page_source


def test_the_change_points_page_is_linked_and_lists_the_injected_step(
    browser: tuple[Any, str], pages: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver, base = browser
    driver.get(base + "index.html")
    WebDriverWait(driver, 60).until(lambda d: d.execute_script("return typeof $ !== 'undefined'"))
    driver.find_element(By.CSS_SELECTOR, "#nav-li-changes a").click()
    WebDriverWait(driver, 30).until(lambda d: d.current_url.endswith("changes.html"))
    rows = driver.find_elements(By.CSS_SELECTOR, "#changes tbody tr")
    metrics = {r.find_elements(By.TAG_NAME, "td")[2].text for r in rows}
    commits = {r.find_elements(By.TAG_NAME, "td")[3].text for r in rows}
    order = json.loads((pages / "index.json").read_text())["revision_to_hash"]
    stepped = sorted(order.items(), key=lambda kv: int(kv[0]))[STEP_AT][1]
    assert commits == {stepped[:12]}, commits
    assert "fio.raw-rand-write-qd1.clat_p99_ms" in metrics and "dev.write_p99_ms" in metrics
    assert not any("read" in m for m in metrics), "read latencies did not step"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / "history-changes.png"))
    # a row's graph link opens asv's graph of that series
    link = rows[0].find_element(By.LINK_TEXT, "graph")
    link.click()
    WebDriverWait(driver, 60).until(
        lambda d: d.execute_script(
            "var p = $('#main-graph').data('plot'); return !!p && p.getData().length > 0"
        )
    )
