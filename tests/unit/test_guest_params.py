"""What the guest reads is what the registry tells it: a workload parameter is declared once, as a
``Param`` in harness/workloads/, and images/init reads exactly the ones the host tells
(``diskbench.NAME=VALUE``), with the same default, into the variable its workload's script uses."""

from __future__ import annotations

import re

from harness.paths import REPO_ROOT
from harness.workloads import registry
from harness.workloads.params import Param

INIT = REPO_ROOT / "images" / "init"
SCRIPTS = REPO_ROOT / "images" / "workloads"
# a case arm of set_params: diskbench.dd_mib=*) DD_MIB=${word#*=} ;;
READ = re.compile(r"^\s*diskbench\.([a-z0-9_]+)=\*\)\s*([A-Z0-9_]+)=\$\{word#\*=\}\s*;;\s*$", re.M)


def _parameters_block() -> str:
    """The init's parameters: its defaults and ``set_params``, up to where it reads the kernel's words."""
    text = INIT.read_text()
    start = text.index("-- parameters\n")
    return text[start : text.index("set_params $(cat /proc/cmdline)", start)]


def guest_reads() -> dict[str, str]:
    """Each ``diskbench.NAME`` the guest's init reads, and the shell variable it sets."""
    return dict(READ.findall(_parameters_block()))


def guest_defaults() -> dict[str, str]:
    """The shell variables the guest's init sets before it reads its words, with their values."""
    head = _parameters_block().split("set_params() {")[0]
    return dict(re.findall(r"^([A-Z0-9_]+)=(\S*)$", head, re.M))


def told() -> dict[str, Param]:
    """The parameters the built-in workloads tell the guest, by name."""
    return {p.name: p for k in registry.kinds() if k.name in registry.BUILT_IN for p in k.told}


def test_the_guest_reads_every_parameter_the_registry_tells_it_and_no_other() -> None:
    reads = guest_reads()
    # every arm that reads a diskbench.* word is one READ sees
    assert len(reads) == _parameters_block().count("=*)") > 1
    assert reads.pop("workload") == "WORKLOAD"
    assert sorted(reads) == sorted(told())
    # each into the variable of its name, upper case
    assert {name: var for name, var in reads.items() if var != name.upper()} == {}


def test_the_guests_defaults_are_the_registrys() -> None:
    defaults = guest_defaults()
    assert defaults.pop("WORKLOAD") == "probe"
    assert defaults == {name.upper(): str(param.default) for name, param in told().items()}


def test_each_workloads_script_uses_what_it_is_told_and_the_guest_runs_the_built_in_workloads() -> None:
    unused = [
        f"{kind.name}: {param.name.upper()}"
        for kind in registry.kinds()
        if kind.name in registry.BUILT_IN
        for param in kind.told
        if not re.search(rf"\b{param.name.upper()}\b", (SCRIPTS / f"{kind.name}.sh").read_text())
    ]
    assert unused == []
    (arm,) = re.findall(r"^\s*([a-z|]+)\)\n\s*find_disks ", INIT.read_text(), re.M)
    assert sorted(arm.split("|")) == sorted(registry.BUILT_IN)
