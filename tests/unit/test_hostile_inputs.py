"""Hostile inputs that crashed the harness (exit 3) or filled its disk, refused or bounded now.

- a TOML file nested 3000 deep (policy, spec, recipe) was a RecursionError: an "internal error",
  exit 3; it is bad input, exit 2 in one line;
- a symlink loop in ``images/`` was a RuntimeError out of ``Path.resolve``: exit 3, now exit 2;
- QEMU's console, report and stderr logs had no size: a guest printing without end filled the
  results disk; past :data:`harness.untrusted.LOG_BYTES` its sample fails and the file is cut.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness import cli, guest
from harness.errors import ExitCode, HarnessError, ProtocolError
from harness.guest import RecipeError
from harness.paths import IMAGES_DIR, REPO_ROOT
from harness.sample.vm import Machine, VMConfig
from harness.subject.binaries import QEMU

DEEP = {
    "array": "a = " + "[" * 3000 + "]" * 3000,
    "inline table": "a = " + "{b = " * 3000 + "1" + "}" * 3000,
    "dotted key": "a" + ".a" * 3000 + " = 1",
    "table header": "[" + "a." * 3000 + "a]\nx = 1",
}


def one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    assert err.count("\n") == 1, err
    assert "internal error" not in err
    return err


@pytest.mark.parametrize("kind", DEEP)
def test_a_deep_policy_is_bad_input(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("[drive.options]\n" + DEEP[kind] + "\n")
    err = one_line_exit_2(["sweep", "sweeps/matrix.toml", "--policy", str(policy), "--dry-run"], capsys)
    assert f"{policy}: not valid TOML (it nests tables and arrays deeper than 32 levels)" in err


@pytest.mark.parametrize("kind", DEEP)
def test_a_deep_spec_is_bad_input(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text((REPO_ROOT / "sweeps" / "matrix.toml").read_text() + "\n[deep]\n" + DEEP[kind] + "\n")
    err = one_line_exit_2(["sweep", str(spec), "--dry-run"], capsys)
    assert f"{spec}: it nests tables and arrays deeper than 32 levels: not valid TOML" in err


@pytest.mark.parametrize("kind", DEEP)
def test_a_deep_recipe_is_bad_input(kind: str) -> None:
    toml = (IMAGES_DIR / "recipe.toml").read_text() + "\n[deep]\n" + DEEP[kind] + "\n"
    with pytest.raises(RecipeError, match="deeper than 32 levels") as caught:
        guest.parse_recipe(toml, (IMAGES_DIR / "payload.lock").read_text())
    assert caught.value.exit_code == ExitCode.USAGE


@pytest.mark.parametrize("kind", DEEP)
def test_a_deep_gate_spec_preset_or_seed_file_is_bad_input(kind: str, tmp_path: Path) -> None:
    from harness.gate import GATE_SPEC, load_gate_spec
    from harness.presets import PRESETS_DIR, load_reference, parse_preset

    gate = tmp_path / "gate.toml"
    gate.write_text(GATE_SPEC.read_text() + "\n[deep]\n" + DEEP[kind] + "\n")
    preset = tmp_path / "booth-2010.toml"
    preset.write_text((PRESETS_DIR / "booth-2010.toml").read_text() + "\n[preset.deep]\n" + DEEP[kind] + "\n")
    seed = tmp_path / "booth-2010.seed.toml"
    seed.write_text((PRESETS_DIR / "booth-2010.seed.toml").read_text() + "\n[deep]\n" + DEEP[kind] + "\n")
    for read in (
        lambda: load_gate_spec(gate),
        lambda: parse_preset(preset.read_text(), path=preset),
        lambda: load_reference(seed),
    ):
        with pytest.raises(HarnessError, match="deeper than 32 levels") as caught:
            read()
        assert caught.value.exit_code == ExitCode.USAGE


def test_nesting_within_the_limit_is_read() -> None:
    from harness.untrusted import toml_loads

    assert toml_loads("a = " + "[" * 31 + "1" + "]" * 31)["a"] != []


@pytest.fixture
def images(tmp_path: Path) -> Path:
    d = tmp_path / "images"
    shutil.copytree(IMAGES_DIR, d)
    return d


@pytest.mark.parametrize("layout", ["two links", "self", "in a directory"])
def test_a_symlink_loop_in_images_is_bad_input(images: Path, layout: str) -> None:
    if layout == "two links":
        (images / "a").symlink_to("b")
        (images / "b").symlink_to("a")
    elif layout == "self":
        (images / "workloads" / "loop.sh").symlink_to("loop.sh")
    else:
        (images / "workloads" / "sub").mkdir()
        (images / "workloads" / "sub" / "x").symlink_to("../sub/x")
    for call in (guest.recipe_hash, guest.recipe_files):
        with pytest.raises(RecipeError, match="is a symlink loop: replace the symlink") as caught:
            call(images)
        assert caught.value.exit_code == ExitCode.USAGE


def test_a_symlink_loop_through_the_cli_is_exit_2(
    images: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (images / "workloads" / "loop.sh").symlink_to("loop.sh")
    real = guest.build_guest
    monkeypatch.setattr(guest, "build_guest", lambda **kw: real(recipe_dir=images, **kw))
    err = one_line_exit_2(["guest", "build"], capsys)
    assert "images/workloads/loop.sh is a symlink loop" in err


def test_a_symlink_target_is_shown_on_one_line(images: Path) -> None:
    (images / "workloads" / "evil.sh").symlink_to("/etc/shadow\n::warning::x")
    with pytest.raises(RecipeError) as caught:
        guest.recipe_hash(images)
    assert "is a symlink to /etc/shadow ::warning::x, outside images/" in caught.value.message


def machine(tmp_path: Path) -> Machine:
    config = VMConfig(
        qemu=QEMU, kernel=Path("/k"), initrd=Path("/i"), append=["diskbench.workload=dd"], drives=[]
    )
    tmp_path.mkdir(parents=True, exist_ok=True)
    return Machine(config, tmp_path)


@pytest.mark.parametrize("log", ["console_log", "report_log", "stderr_log"])
def test_a_flooded_log_fails_the_wait_and_is_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log: str
) -> None:
    monkeypatch.setattr("harness.untrusted.LOG_BYTES", 64 * 1024)
    vm = machine(tmp_path)
    path: Path = getattr(vm, log)
    path.write_bytes(b"A" * (200 * 1024))
    with pytest.raises(
        ProtocolError, match=rf"{path.name} grew to 0 MiB, past the cap of .* the guest floods it"
    ):
        vm.wait_event("report", timeout_s=2.0, what="the workload report")
    vm.shutdown()
    data = path.read_bytes()
    assert len(data) < 64 * 1024 + 100
    assert data.endswith(f"[diskbench: cut at {64 * 1024} bytes of {200 * 1024}]\n".encode())


def test_a_log_under_the_cap_is_kept_whole(tmp_path: Path) -> None:
    vm = machine(tmp_path)
    vm.console_log.write_bytes(b"boot\n" * 1000)
    vm.shutdown()
    assert vm.console_log.read_bytes() == b"boot\n" * 1000
