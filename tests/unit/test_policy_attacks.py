"""A pull request's policy is untrusted: every way to reach another file or node is refused by name.

Each policy here was accepted before the -drive options were allowlisted, and
some of them (``backing.file.filename``) put a host file behind the disk under
test with QEMU holding it open.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.subject.policy import DRIVE_OPTIONS, THROTTLE_VALUE_MAX, load_policy, parse_policy

SOURCE = "pr/policy.toml"
NOT_ALLOWED = "is not a -drive option a policy may set"


def refused(text: str) -> str:
    with pytest.raises(SpecError) as caught:
        parse_policy(text, source=SOURCE)
    message = caught.value.message
    assert message.startswith(f"{SOURCE}: "), message
    assert "\n" not in message, "one line, whatever the file holds"
    return message


@pytest.mark.parametrize(
    ("options", "key"),
    [
        # the attack shown on main: a raw backing node over /etc/shadow
        (
            '"backing.driver" = "raw"\n"backing.file.driver" = "file"\n'
            '"backing.file.filename" = "/etc/shadow"\n',
            "backing.driver",
        ),
        ('"backing.file.filename" = "/etc/shadow"', "backing.file.filename"),
        ('backing = "json:{\\"driver\\":\\"file\\",\\"filename\\":\\"/etc/shadow\\"}"', "backing"),
        ('"file.driver" = "host_device"', "file.driver"),
        ('"file.filename" = "/dev/sda"', "file.filename"),
        ('"file.locking" = "off"', "file.locking"),
        ('"data-file.filename" = "/proc/self/environ"', "data-file.filename"),
        ('"data-file" = "/proc/1/mem"', "data-file"),
        ('"encrypt.key-secret" = "sec0"', "encrypt.key-secret"),
        ('driver = "vvfat"', "driver"),
        ('"x.y.z" = 1', "x.y.z"),
        ('"throttling.bps-write.file" = 1', "throttling.bps-write.file"),
        ('"throttling.group" = "g"', "throttling.group"),
        ('"write-cache" = "off"', "write-cache"),
        ('"cache.no-flush" = true', "cache.no-flush"),
        ('"force-share" = true', "force-share"),
        ('"auto-read-only" = true', "auto-read-only"),
        ('"discard,file.filename" = "unmap"', "discard,file.filename"),
        ('"discard\\nfile.filename" = "unmap"', "discard\nfile.filename"),
        # the nested spelling of the same attack
        ('[drive.options.backing.file]\nfilename = "/etc/shadow"', "backing.file.filename"),
    ],
)
def test_node_and_file_options_are_refused_by_name(options: str, key: str) -> None:
    message = refused(f"[drive.options]\n{options}\n")
    assert f"[drive.options] {key!r} {NOT_ALLOWED}" in message


@pytest.mark.parametrize(
    ("option", "value", "hint"),
    [
        ("detect-zeroes", '"unmap,file.filename=/etc/shadow"', "use one of off, on, unmap"),
        ("discard", '"unmap,driver=file"', "use one of ignore, unmap, off, on"),
        ("discard", '"json:{}"', "use one of ignore, unmap, off, on"),
        ("copy-on-read", '"on\\nfile=/etc/shadow"', "use one of on, off"),
        ("werror", '"stop,backing.file.filename=/etc/shadow"', "use one of report"),
        ("rerror", '"enospc"', "use one of report, ignore, stop"),
        ("throttling.bps-write", '"1048576,file.filename=/etc/shadow"', "use a number from 0 to"),
        ("throttling.bps-write", "-1", "use a number from 0 to"),
        ("throttling.iops-total", str(THROTTLE_VALUE_MAX + 1), "use a number from 0 to"),
        ("throttling.bps-total-max-length", "0", "use a number from 1 to"),
        ("throttling.iops-read", "true", "use a number from 0 to"),
        ("l2-cache-size", '"/dev/zero"', "use a number from 0 to"),
        ("l2-cache-size", str((1 << 32) + 1), "use a number from 0 to"),
    ],
)
def test_values_are_checked_against_the_options_range_or_set(option: str, value: str, hint: str) -> None:
    message = refused(f'[drive.options]\n"{option}" = {value}\n')
    assert f"[drive.options] {option} = " in message
    assert hint in message


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[image]\nsize = "1G,backing_file=/etc/shadow"', "size"),
        ('[image]\npreallocation = "off,backing_file=/etc/shadow"', "preallocation"),
        ('[image]\ncompat = "1.1,data_file=/etc/shadow"', "compat"),
        ('[image]\ncluster_size = "64K,data_file=/proc/self/mem"', "cluster_size"),
        ('[image]\nformat = "qcow2,backing_fmt=raw"', "format"),
        ('[image]\nsize = "2G\\n"', "size"),
        ('[drive]\ncache = "none,file.filename=/etc/shadow"', "cache"),
        ('[drive]\ninterface = "virtio-blk\\nok"', "interface"),
        ('[drive]\naio = "threads,driver=file"', "aio"),
    ],
)
def test_image_and_drive_values_cannot_carry_another_option(text: str, key: str) -> None:
    message = refused(text)
    assert f"] {key} = " in message
    assert "use letters, digits and . _ - only" in message


def test_every_allowed_option_passes_at_its_bounds() -> None:
    for rule in DRIVE_OPTIONS.values():
        value = f'"{rule.choices[-1]}"' if rule.choices else str(rule.maximum)
        lines = [f'"{rule.name}" = {value}']
        # a burst needs its rate, a burst length its burst (QEMU's rules)
        base = rule.name.removesuffix("-length").removesuffix("-max")
        if base != rule.name:
            lines.append(f'"{base}" = {THROTTLE_VALUE_MAX}')
        if rule.name.endswith("-max-length"):
            lines.append(f'"{base}-max" = {THROTTLE_VALUE_MAX}')
        if rule.name == "throttling.iops-size":
            # an IO's size for the iops limits needs an iops limit
            lines.append(f'"throttling.iops-total" = {THROTTLE_VALUE_MAX}')
        policy = parse_policy("[drive.options]\n" + "\n".join(lines) + "\n", source=SOURCE)
        assert dict(policy.drive_options)[rule.name] == value.strip('"')
    policy = parse_policy('[drive.options]\n"copy-on-read" = false\n', source=SOURCE)
    assert policy.drive_options == (("copy-on-read", "off"),)


def test_a_policy_file_that_is_a_symlink_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.toml"
    secret.write_text('[image]\nsize = "token-1234"\n')
    link = tmp_path / "policy.toml"
    link.symlink_to(secret)
    with pytest.raises(SpecError) as caught:
        load_policy(link)
    assert caught.value.message == f"policy {link} is a symlink: pass the policy file itself"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            '"throttling.bps-total" = 10\n"throttling.bps-write" = 5',
            "throttling.bps-total and throttling.bps-read/-write cannot be used together",
        ),
        (
            '"throttling.iops-total-max" = 10\n"throttling.iops-read-max" = 5\n"throttling.iops-total" = 1',
            "throttling.iops-total-max and throttling.iops-read-max/-write-max cannot be used together",
        ),
        ('"throttling.bps-write-max" = 10', "throttling.bps-write-max needs throttling.bps-write"),
        (
            '"throttling.bps-write" = 10\n"throttling.bps-write-max" = 5',
            "throttling.bps-write-max = 5 is below throttling.bps-write = 10",
        ),
        (
            '"throttling.iops-read" = 10\n"throttling.iops-read-max-length" = 5',
            "throttling.iops-read-max-length needs throttling.iops-read-max",
        ),
    ],
)
def test_a_throttle_qemu_would_refuse_is_refused_here(options: str, message: str) -> None:
    assert message in refused(f"[drive.options]\n{options}\n")


def test_a_burst_with_its_rate_and_length_is_accepted() -> None:
    policy = parse_policy(
        '[drive.options]\n"throttling.bps-write" = 10\n"throttling.bps-write-max" = 20\n'
        '"throttling.bps-write-max-length" = 5\n"throttling.iops-read" = 100\n',
        source=SOURCE,
    )
    assert dict(policy.drive_options)["throttling.bps-write-max-length"] == "5"
