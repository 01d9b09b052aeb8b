"""What the guest reads is what the registry tells it: a workload parameter is declared once, as a
``Param`` in harness/workloads/, and the workload's own script (images/workloads/NAME.sh) reads
exactly the ones the host tells (``diskbench.NAME=VALUE``), with the same default, by the init's
``param``; the init runs any workload that has a script, naming none."""

from __future__ import annotations

import re
import subprocess

from harness.paths import REPO_ROOT
from harness.workloads import registry
from harness.workloads.params import Param

INIT = REPO_ROOT / "images" / "init"
SCRIPTS = REPO_ROOT / "images" / "workloads"
# a script's read of one parameter: DD_MIB=$(param dd_mib 256)
READ = re.compile(r"^([A-Z0-9_]+)=\$\(param ([a-z0-9_]+) (\S+)\)$", re.M)


def script_reads(workload: str) -> dict[str, tuple[str, str]]:
    """Each ``diskbench.NAME`` a workload's script reads: the variable it sets and its default."""
    text = (SCRIPTS / f"{workload}.sh").read_text()
    return {name: (var, default) for var, name, default in READ.findall(text)}


def test_each_script_reads_every_parameter_its_workload_tells_with_the_registrys_default() -> None:
    for kind in registry.kinds():
        if kind.name not in registry.BUILT_IN:
            continue
        reads = script_reads(kind.name)
        told: dict[str, Param] = {p.name: p for p in kind.told}
        assert sorted(reads) == sorted(told), kind.name
        for name, (var, default) in reads.items():
            assert var == name.upper(), (kind.name, name)
            assert default == str(told[name].default), (kind.name, name)


def test_the_init_reads_no_workloads_parameter_and_names_no_workload() -> None:
    text = INIT.read_text()
    assert "DD_MIB" not in text and "FIO_" not in text and "BONNIE_" not in text
    assert not re.search(r"^\s*install\|dd", text, re.M)
    assert '. "/usr/share/diskbench/$WORKLOAD.sh"' in text


def test_param_takes_the_last_word_of_a_name_else_its_default() -> None:
    text = INIT.read_text()
    start = text.index("param() {")
    body = text[start : text.index("\n}\n", start) + 3]
    script = (
        body
        + 'PARAM_WORDS="console=ttyS0 diskbench.dd_mib=16 diskbench.dd_mib_x=9 diskbench.fs=ext2 *"\n'
        + 'PARAM_WORDS="$PARAM_WORDS diskbench.dd_mib=32"\n'
        + 'echo "$(param dd_mib 256) $(param fs ext4) $(param fio_ios 2000) $(param workload probe)"\n'
    )
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["32", "ext2", "2000", "probe"]
