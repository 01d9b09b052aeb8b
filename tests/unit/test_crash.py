"""An unexpected error reaches the user as one line and a log path, exit 3; never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.host.crash import report_crash


def test_an_unexpected_error_is_one_line_and_the_traceback_goes_to_a_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DISKBENCH_CACHE", str(tmp_path))
    try:
        {}["missing"]  # a real exception with a real traceback
    except KeyError as exc:
        rc = report_crash(exc, ["show", "x.json"])
    err = capsys.readouterr().err
    assert rc == 3
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("diskbench: internal error: KeyError: 'missing'; the traceback is in ")
    log = Path(err.strip().rsplit(" ", 1)[1])
    assert log.parent == tmp_path / "crash"
    text = log.read_text()
    assert text.startswith("diskbench show x.json\n") and "Traceback" in text and "KeyError" in text
