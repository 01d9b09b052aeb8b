"""``diskbench report`` without the ``plots`` extra: text still works, charts name the extra and exit 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_report_html import booth_records

from harness.cli import main
from harness.record import write_record
from harness.report.command import plots_installed


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    directory = tmp_path / "sweeps" / "booth-2010-scale0.25"
    for record in booth_records():
        write_record(directory / f"{record.cell_id}.json", record)
    return directory


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    # as if it were not installed: an import of it fails, and find_spec finds none
    for name in [n for n in sys.modules if n == "matplotlib" or n.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert not plots_installed()


@pytest.mark.usefixtures("no_matplotlib")
def test_charts_without_matplotlib_name_the_extra_and_exit_2(
    sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(sweep), "--html", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "pip install 'diskbench[plots]'" in err and "Traceback" not in err
    assert not out.exists() and not (tmp_path / "report_files").exists()


@pytest.mark.usefixtures("no_matplotlib")
def test_the_text_report_needs_no_matplotlib(sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(sweep)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("diskbench report") and "[chart: " in out


def test_matplotlib_is_an_extra_of_the_package() -> None:
    import tomllib

    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
    assert not any(d.startswith("matplotlib") for d in project["dependencies"])
    assert any(d.startswith("matplotlib>=") for d in project["optional-dependencies"]["plots"])
    assert "diskbench[plots]" in project["optional-dependencies"]["dev"]
    # ranges in the metadata, the tested versions in constraints.txt
    assert not any("==" in d for d in project["dependencies"])
    pins = Path("constraints.txt").read_text()
    for dep in project["dependencies"] + project["optional-dependencies"]["plots"]:
        name = dep.split(">=")[0].split("<")[0]
        assert f"\n{name}==" in pins, name
