"""A repository's QEMU pin (``[qemu]`` in policy.toml): parsed as untrusted input, read by the gate
for each side, named in "What differs"."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.compare.model import Side
from harness.compare.subject import subject_diff
from harness.errors import ExitCode, SpecError
from harness.gate.subjects import Subject, side_binaries
from harness.subject.binaries import Binaries
from harness.subject.policy import parse_policy
from harness.subject.qemu_pin import RUNNER, QemuPin

POLICY = '[image]\nformat = "qcow2"\n[drive]\ncache = "none"\n'
V10 = "1:10.0.2+ds-2+deb13u1~bpo12+1"
V72 = "1:7.2+dfsg-7+deb12u18+b3"


def test_a_policy_pins_a_version_or_leaves_the_runners() -> None:
    pinned = parse_policy(POLICY + '[qemu]\nversion = "10.0"\n')
    assert pinned.qemu == QemuPin("10.0") and pinned.qemu.pinned
    assert pinned.as_dict()["qemu"] == "10.0"
    assert parse_policy(POLICY + f'[qemu]\nversion = "{V10}"\n').qemu.version == V10
    for text in (POLICY, POLICY + f'[qemu]\nversion = "{RUNNER}"\n'):
        policy = parse_policy(text)
        assert not policy.qemu.pinned
        assert "qemu" not in policy.as_dict()  # a policy without a pin says what it always said
    # the pin is not a drive option: the cells and the policy's digest stay the same
    assert pinned.digest == parse_policy(POLICY).digest


@pytest.mark.parametrize(
    "value",
    [
        '"/usr/bin/qemu-system-x86_64"',
        '"../../build/qemu-system-x86_64"',
        '"10.0/../../x"',
        '"10.0,-L,/etc"',
        '"10.0\\n::error::forged"',
        '"~/qemu"',
        "10",
        '""',
    ],
)
def test_a_pin_that_is_no_version_name_is_one_line_exit_2(value: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_policy(POLICY + f"[qemu]\nversion = {value}\n", source="head/policy.toml")
    message = caught.value.message
    assert caught.value.exit_code == ExitCode.USAGE
    assert message.startswith("head/policy.toml: [qemu] version = ")
    assert "a path is never a pin" in message
    assert "\n" not in message


def test_a_pin_table_with_other_keys_is_refused() -> None:
    with pytest.raises(SpecError, match="unknown \\[qemu\\] key 'path': use version"):
        parse_policy(POLICY + '[qemu]\npath = "/usr/bin/qemu"\n')
    with pytest.raises(SpecError, match="qemu must be a table"):
        parse_policy('qemu = "10.0"\n' + POLICY)


def _subject(policy_text: str, qemu: str | None = None) -> Subject:
    return Subject(
        label="head",
        rev="HEAD",
        commit="0" * 40,
        checkout=Path("/nonexistent"),
        policy=parse_policy(policy_text),
        recipe_dir=Path("/nonexistent"),
        qemu=qemu,
        qemu_img=None,
    )


def test_a_side_without_a_pin_runs_the_runners_qemu() -> None:
    runner = Binaries("/opt/qemu/qemu-system-x86_64", "/opt/qemu/qemu-img")
    assert side_binaries(_subject(POLICY), runner, Path("/nonexistent")) == runner


def test_a_qemu_given_for_a_side_wins_over_its_pin() -> None:
    runner = Binaries("/opt/qemu/qemu-system-x86_64", "/opt/qemu/qemu-img")
    subject = _subject(POLICY + '[qemu]\nversion = "10.0"\n', qemu="/built/qemu-system-x86_64")
    # nothing is fetched: the cache is never reached
    assert side_binaries(subject, runner, Path("/nonexistent")).qemu == "/built/qemu-system-x86_64"


def test_what_differs_names_the_pin_and_both_builds() -> None:
    def side(pin: str | None, debian: str, sha: str, version: str) -> Side:
        policy = {"drive": {"cache": "none"}, **({"qemu": pin} if pin else {})}
        machine = {"qemu_version": version, "qemu_debian_version": debian, "qemu_sha256": sha}
        return Side.from_json({"subject": {"policy": policy}, "machine": machine})

    diff = [
        d.to_json()
        for d in subject_diff(side(None, V72, "aa" * 32, "7.2.22"), side("10.0", V10, "bb" * 32, "10.0.2"))
    ]
    assert {"what": "QEMU pin", "base": "runner", "head": "10.0"} in diff
    assert {"what": "QEMU version", "base": "7.2.22", "head": "10.0.2"} in diff
    assert {
        "what": "QEMU build",
        "base": f"Debian {V72}, sha256 {'aa' * 6}",
        "head": f"Debian {V10}, sha256 {'bb' * 6}",
    } in diff
    same = side(None, V72, "aa" * 32, "7.2.22")
    assert subject_diff(same, same) == []
