"""Every command the harness runs gets the C locale: what it parses stays in the words it expects."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.guest import pin
from harness.host import proc

GERMAN = {"LANGUAGE": "de", "LC_ALL": "C.UTF-8", "LANG": "de_DE.UTF-8"}


def test_commands_run_in_the_c_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GERMAN.items():
        monkeypatch.setenv(key, value)
    result = proc.run(["sh", "-c", 'echo "$LC_ALL"'], timeout_s=30)
    assert result.stdout.strip() == "C"
    # a caller's own environment still wins, and adds to the harness's
    result = proc.run(["sh", "-c", 'echo "$LC_ALL $LANGUAGE"'], timeout_s=30, env={"LC_ALL": "POSIX"})
    assert result.stdout.strip() == "POSIX de"


def test_logged_commands_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    log = tmp_path / "cmd.log"
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    proc.run_logged(["sh", "-c", 'echo "locale=$LC_ALL"'], log, timeout_s=30)
    assert "locale=C\n" in log.read_text()


@pytest.mark.skipif(shutil.which("apt-cache") is None, reason="no apt-cache on this host")
def test_apt_cache_policy_is_parsed_under_a_german_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GERMAN.items():
        monkeypatch.setenv(key, value)
    raw = subprocess.run(
        ["apt-cache", "policy", "bash"], capture_output=True, text=True, check=False, timeout=60
    ).stdout
    if "Candidate:" in raw:
        pytest.skip("apt has no German messages here: the locale cannot change its words")
    assert "Installationskandidat:" in raw  # what the parser would have read without the C locale
    assert pin.parse_apt_policy(raw) == {}
    candidates = pin._candidates(["bash"])
    assert candidates["bash"] and candidates["bash"][0].isdigit()
