"""What the summary points a reader to: short cell names, the unchanged cells' figures, history
graph links (only with the pages' URL), the command that reproduces it, what inconclusive means."""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_compare import MACHINE, SETTINGS, cell_dict, cell_info, gauss, regressed_sides, samples, write_side

from harness.cli import main
from harness.cli.gate import reproduce_argv
from harness.compare import Settings, build_comparison, compare_cell, flatten_cell, render_markdown
from harness.compare.document import Context
from harness.compare.model import Budget, Comparison, FlatCell, SensitivityRow, Side
from harness.compare.pointers import (
    Pointers,
    benchmark_method,
    check_pages_url,
    graph_url,
    history_graph,
    inconclusive_sentence,
    short_name,
    workload_class,
)
from harness.compare.verdict import Verdict
from harness.errors import UsageError
from harness.gate import GATE_SPEC
from harness.record import CellInfo, MachineInfo
from harness.spec import make_cell
from harness.workloads import registry

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
from history import layout  # noqa: E402

PAGES = "https://acme.github.io/diskbench/"


def flat(**axes: Any) -> tuple[FlatCell, str]:
    cell = make_cell(**axes).as_dict()
    return flatten_cell(CellInfo(cell)), str(cell["id"])


@pytest.mark.parametrize(
    ("axes", "name"),
    [
        (
            {"format": "qcow2", "cache": "writeback", "interface": "ide", "workload": "dd", "dd_mib": 64},
            "qcow2 writeback ide · dd 64M",
        ),
        (
            {"format": "raw", "preallocation": "falloc", "cache": "none", "aio": "native", "workload": "fio"},
            "raw falloc none virtio-blk aio=native · fio both",
        ),
        (
            {
                "format": "qcow2",
                "preallocation": "metadata",
                "cluster_size": "1M",
                "lazy_refcounts": True,
                "encrypt": "luks",
                "workload": "install",
            },
            "qcow2 metadata cluster 1M lazy refcounts luks writeback virtio-blk · install full",
        ),
        (
            {"format": "raw", "workload": "dd", "cache_state": "warm"},
            "raw writeback virtio-blk · dd 256M · warm",
        ),
        (
            {"format": "qcow2", "cache": "writethrough", "workload": "dd", "dd_mib": 64, "measure": "replay"},
            "qcow2 writethrough virtio-blk · dd 64M · replay",
        ),
        (
            {"cache": "none", "workload": "fio", "fio_target": "raw", "backing": "depth=1,fill=32M"},
            "qcow2 over d1 32M none virtio-blk · fio raw",
        ),
        (
            {"extended_l2": True, "workload": "dd", "backing": "depth=2,fill=50%,pattern=scattered"},
            "qcow2 extended_l2 over d2 50% scattered writeback virtio-blk · dd 256M",
        ),
    ],
)
def test_a_short_name_says_the_cells_parts_and_leaves_out_the_defaults(
    axes: dict[str, Any], name: str
) -> None:
    cell, cell_id = flat(**axes)
    assert short_name(cell, cell_id) == name


def test_a_cell_without_its_parts_is_named_by_its_id() -> None:
    assert short_name(FlatCell(workload="dd-64m"), "some-id") == "some-id"


def test_the_history_graph_is_asvs_benchmark_and_parameters() -> None:
    cell, _ = flat(format="qcow2", cache="writeback", interface="ide", workload="dd", dd_mib=64)
    assert history_graph(cell, "total_s") == (
        "matrix.Dd.track_total_s?p-format=%27qcow2%27&p-cache=%27writeback%27&p-interface=%27ide%27"
    )
    # a rate is kept as its inverse, so that up is worse in every graph
    assert history_graph(cell, "mib_per_s") is not None
    assert history_graph(cell, "mib_per_s").startswith("matrix.Dd.track_s_per_gib?")  # type: ignore[union-attr]
    # the history measures fresh guest cells only
    assert history_graph(flat(workload="dd", measure="replay")[0], "total_s") is None
    assert history_graph(flat(workload="dd", cache_state="cold")[0], "total_s") is None
    # an overlay is not the matrix's cell of its format, cache mode and bus
    overlay, overlay_id = flat(workload="dd", backing="depth=1")
    assert (
        history_graph(overlay, "total_s") is not None
        and history_graph(overlay, "total_s", overlay_id) is None
    )
    assert graph_url(PAGES, "matrix.Dd.track_total_s") == PAGES + "#matrix.Dd.track_total_s"
    assert graph_url(PAGES + "index.html", "x") == PAGES + "index.html#x"


@pytest.mark.parametrize("workload", registry.names())
def test_graph_names_are_the_history_suites_own(workload: str) -> None:
    """The history suite (benchmarks/history/layout.py) names its classes and methods; the links
    must name the same, figure by figure (a rate inverted there is inverted here)."""
    assert workload_class(f"{workload}-x") == layout.Group(workload, (), ()).class_name
    for figure in layout.workload_figures(workload):
        assert benchmark_method(figure.metric) == figure.method, figure.metric
    assert layout.matrix_groups(layout_spec())[0].param_names == ("format", "cache", "interface")


def layout_spec() -> Any:
    from harness import sweep

    return sweep.load_spec(layout.DEFAULT_SPEC)


def steady_and_regressed() -> list[Any]:
    return [
        compare_cell(
            cell_info(interface="ide"),
            samples(gauss(20, 8, 100.0, 0.01)),
            samples(gauss(21, 8, 120.0, 0.01)),
            settings=SETTINGS,
        ),
        compare_cell(
            cell_info(cache="none"),
            samples(gauss(30, 8, 100.0, 0.005)),
            samples(gauss(31, 8, 100.0, 0.005)),
            settings=SETTINGS,
        ),
    ]


def document(pointers: Pointers | None = None, cells: list[Any] | None = None) -> Comparison:
    return build_comparison(
        cells or steady_and_regressed(),
        settings=SETTINGS,
        base=Side.from_json({"label": "base", "rev": "abc123", "subject": {}}),
        head=Side.from_json({"label": "head", "rev": "def456", "subject": {}}),
        machine=MachineInfo(MACHINE),
        created_at="2025-01-01T00:00:00+00:00",
        context=Context(pointers=pointers),
    )


def test_the_unchanged_cells_are_collapsed_with_their_figures() -> None:
    value = document()
    doc = value.to_json()
    steady = doc["cells"][1]
    assert steady["verdict"] == "unchanged"
    text = render_markdown(value)
    block = text.split("<details><summary>1 cell unchanged (their figures)</summary>")[1].split("</details>")[
        0
    ]
    metric = steady["metrics"][0]
    row = next(line for line in block.splitlines() if line.startswith("| qcow2 none virtio-blk · dd 64M |"))
    assert (
        f" {metric['median_base']:.2f}&nbsp;s | {metric['median_head']:.2f}&nbsp;s | {metric['change_pct']:+.1f}%<br><sub>"
        in row
    )
    assert row.endswith("| unchanged |")
    # its full id and every figure in its own fold, inside the block
    assert f"\n<code>{steady['cell_id']}</code>\n" in block
    assert (
        "<details><summary>qcow2 none virtio-blk · dd 64M: 1 figure, 8 rounds, id and reason</summary>"
        in block
    )
    # the regressed cell is in the table above it, not in the block
    assert "qcow2 writeback ide · dd 64M" not in block


def test_graph_links_only_with_the_pages_url() -> None:
    without = render_markdown(document())
    assert "](http" not in without
    value = document(Pointers(pages_url=PAGES))
    assert value.to_json()["pages_url"] == PAGES
    text = render_markdown(value)
    link = (
        f"[total_s]({PAGES}#matrix.Dd.track_total_s?p-format=%27qcow2%27&p-cache=%27writeback%27"
        "&p-interface=%27ide%27)"
    )
    # the metric's name is the link to its graph (no column of its own: the table fits a comment)
    row = next(line for line in text.splitlines() if line.startswith("| qcow2 writeback ide · dd 64M |"))
    assert row.startswith(f"| qcow2 writeback ide · dd 64M | {link} | ")
    assert row.endswith("| regression |")
    # the collapsed table links its cells too
    assert f"[total_s]({PAGES}#matrix.Dd.track_total_s?p-format=%27qcow2%27&p-cache=%27none%27" in text
    assert text.count("| cell | metric | base | head | change (95% CI) | verdict |") == 2


def test_a_bad_pages_url_names_the_flag() -> None:
    with pytest.raises(UsageError, match=r"--pages-url 'javascript:alert\(1\)': give the http\(s\) URL"):
        check_pages_url("javascript:alert(1)")
    assert check_pages_url(" https://x.test/pages/ ") == "https://x.test/pages/"


def test_compare_writes_the_pages_url_and_the_command_that_reproduces_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = regressed_sides(tmp_path)
    out = tmp_path / "out"
    argv = ["compare", str(base), str(head), "--out", str(out), "--min-effect", "10%", "--seed", "7"]
    assert main([*argv, "--pages-url", PAGES, "--output-format", "markdown"]) == 1
    printed = capsys.readouterr().out
    doc = json.loads((out / "comparison.json").read_text())
    assert doc["pages_url"] == PAGES
    assert doc["reproduce"] == [
        "diskbench",
        "compare",
        str(base),
        str(head),
        "--min-effect",
        "10%",
        "--seed",
        "7",
    ]
    assert (
        f"Reproduce it locally:\n\n```sh\ndiskbench compare {base} {head} --min-effect 10% --seed 7\n```"
        in printed
    )
    assert "[total_s](https://acme.github.io/diskbench/#matrix.Dd.track_total_s?" in printed


def test_compare_refuses_a_bad_pages_url_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write_side(tmp_path / "base", 1.0, seed=1)
    assert main(["compare", str(base), str(base), "--pages-url", "file:///etc/passwd"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--pages-url 'file:///etc/passwd'" in err[0]


def gate_args(**given: Any) -> argparse.Namespace:
    values: dict[str, Any] = {
        "spec": GATE_SPEC,
        "build_command": None,
        "rounds": None,
        "max_rounds": None,
        "budget_min": None,
        "no_canary": False,
        "metric": None,
        "min_effect": None,
        "rule": [],
        "alpha": Settings.alpha,
        "changed_passes": None,
        "mix_starts": None,
    }
    return argparse.Namespace(**(values | given))


def test_the_gates_command_names_the_commits_and_only_the_flags_given(tmp_path: Path) -> None:
    commits = ["a" * 40, "b" * 40]
    assert reproduce_argv(gate_args(), commits, tmp_path) == [
        "diskbench",
        "gate",
        "--base",
        "a" * 40,
        "--head",
        "b" * 40,
    ]
    spec = tmp_path / "specs" / "gate.toml"
    spec.parent.mkdir()
    spec.write_text("")
    args = gate_args(spec=spec, build_command="make -j4", max_rounds=16, min_effect="3%", metric=["total_s"])
    assert reproduce_argv(args, commits, tmp_path)[6:] == [
        "--spec",
        "specs/gate.toml",
        "--max-rounds",
        "16",
        "--build-command",
        "make -j4",
        "--metric",
        "total_s",
        "--min-effect",
        "3%",
    ]


def noisy_cell() -> Any:
    return compare_cell(
        cell_info(format="raw"),
        samples([100.0, 60.0, 140.0, 90.0, 120.0, 70.0]),
        samples([110.0, 75.0, 150.0, 95.0, 130.0, 80.0]),
        settings=SETTINGS,
    )


def test_inconclusive_says_what_it_means_and_how_many_rounds_would_decide() -> None:
    value = document(cells=[noisy_cell()])
    doc = value.to_json()
    row = doc["summary"]["sensitivity"][0]
    assert doc["cells"][0]["verdict"] == "inconclusive" and row["rounds_to_decide"] > 6
    text = render_markdown(value)
    assert (
        "Inconclusive means these rounds cannot yet tell a change of the minimum effect (5%) from none; "
        f"a regression of about {row['could_see_pct']:.1f}% or more would have been caught 4 times in 5. "
        f"To decide, run more rounds: about {row['rounds_to_decide']} per side "
        f"(raw writeback virtio-blk · dd 64M, has 6), record them (`--repeat {row['rounds_to_decide']}`) "
        "and compare again."
    ) in text
    # a gate's comparison (it has a budget) asks for the gate's rounds
    gate = render_markdown(replace(value, budget=Budget.from_json({"rounds": 6})))
    assert (
        f"e.g. the command below with `--max-rounds {row['rounds_to_decide']}` and the budget for them."
        in gate
    )
    assert "Inconclusive means" not in render_markdown(document())


def test_inconclusive_on_the_edge_says_more_rounds_would_not_decide() -> None:
    rows = [
        SensitivityRow(
            cell_id="c",
            name="c",
            metric="total_s",
            verdict=Verdict.INCONCLUSIVE,
            could_see_pct=7.5,
            rounds_to_decide=None,
        )
    ]
    sentence = inconclusive_sentence(rows, min_effect=0.05)
    assert sentence.startswith(
        "Inconclusive means these rounds cannot yet tell a change of the minimum effect (5%)"
    )
    assert "about 7.5% or more" in sentence
    assert "More rounds would not decide it (its change sits on the minimum effect)" in sentence


def test_names_and_links_are_inert() -> None:
    odd = cell_dict() | {"id": "x"}
    odd["workload"] = {"name": "dd", "dd_mib": 64}
    cell = compare_cell(CellInfo(odd), samples([1.0] * 4), samples([1.0] * 4), settings=SETTINGS)
    doc = document(cells=[cell])
    doc = replace(doc, cells=(replace(doc.cells[0], title="[click](https://evil.test) @octocat"),))
    # outside code spans (where nothing is a link or a mention) it is escaped
    text = re.sub(r"`[^`]*`", "", render_markdown(doc))
    assert "[click](https" not in text and "@octocat" not in text
    assert "| \\[click\\](https:&#8203;//evil.test) @&#8203;octocat | " in text


def test_the_gate_adds_its_seed_to_the_command_unless_it_was_given() -> None:
    from harness.gate.run import _with_seed

    drawn = _with_seed(Pointers(reproduce=("diskbench", "gate", "--base", "a", "--head", "b")), 1234)
    assert drawn is not None and drawn.reproduce[-2:] == ("--seed", "1234")
    given = Pointers(reproduce=("diskbench", "gate", "--seed", "7"))
    assert _with_seed(given, 1234) == given
    assert _with_seed(None, 1) is None
