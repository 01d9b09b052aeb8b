"""Nothing a pull request or a guest writes becomes a workflow command of the CI runner.

The GitHub runner reads every line a step prints: a line whose trimmed start
is ``::name ...::`` or ``::name::`` is a command (``::warning``, ``::error``,
``::add-mask::``, ``::stop-commands::``), and so is a line holding
``##[name]`` anywhere; inside a command ``%0A`` is a newline. Before, a policy
key or a symlink target holding a newline and ``::warning ...`` reached stderr
inside the error message, and a guest's reason kept ``##[`` and ``%0A``.

:func:`runner_commands` implements those parsing rules; every attack here
prints through the real CLI and its output must hold no command, while the
attack text itself does (so each test can fail).
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

import pytest
from recordkit import tcg_record

from harness import cli, guest
from harness.errors import ExitCode
from harness.record import Sample, record_path, write_record
from harness.untrusted import InertStream, inert_for_runner

_V1 = re.compile(r"##\[([A-Za-z-]+)[^\]\r\n]*\]")
_V2 = re.compile(r"^::([A-Za-z-]+)(?:[ ][^\r\n]*?)?::")


def runner_commands(output: str) -> list[str]:
    """The workflow commands the GitHub runner would read in ``output`` (its names)."""
    found = []
    for line in re.split(r"\r\n|\r|\n", output):
        match = _V2.match(line.strip())
        if match:
            found.append(match.group(1))
        found += [m.group(1) for m in _V1.finditer(line)]
    return found


FORGED = "::warning file=README.md,line=1::all benchmarks passed"
MASK = "::add-mask::diskbench"
OLD = "##[error]forged%0A::error::second"


def test_the_parser_reads_what_the_runner_reads() -> None:
    assert runner_commands(f"x\n  {FORGED}\r{MASK}\nok {OLD}") == ["warning", "add-mask", "error"]
    assert runner_commands("::error::x") == ["error"]
    assert runner_commands("a ::error::x\n: :warning::y\n# #[error]z\n::not a command") == []


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_policy_key_with_a_newline_and_a_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy.toml"
    key = f"##[error]x\n{FORGED}\n{MASK}"
    policy.write_text(f'[drive.options]\n"{key.encode("unicode_escape").decode()}" = "unmap"\n')
    assert runner_commands(key) == ["error", "warning", "add-mask"]
    code, output = run_cli(["sweep", "sweeps/matrix.toml", "--policy", str(policy), "--dry-run"], capsys)
    assert code == ExitCode.USAGE
    assert "is not a -drive option a policy may set" in output
    assert runner_commands(output) == []


def test_a_symlink_target_with_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = f"/nowhere\n{FORGED}\n  {MASK}\n{OLD}"
    images = tmp_path / "images"
    os.symlink(target, images)
    real = guest.build_guest
    monkeypatch.setattr(guest, "build_guest", lambda **kw: real(recipe_dir=images, **kw))
    code, output = run_cli(["guest", "build"], capsys)
    assert code == ExitCode.USAGE
    assert "is a symlink to /nowhere" in output
    assert "all benchmarks passed" in output  # shown, as text
    assert runner_commands(output) == []


def test_a_guest_reason_with_the_old_syntax_and_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = tcg_record({"id": "raw-off-2g.writeback-threads-virtio-blk.dd-256m-2m-ext4"})
    reason = f"guest said: {OLD} ##[warning title=x]ok%0A%0D%25 done"
    record = record.with_sample(Sample(index=0, status="error", reason=reason, logs={}))
    path = record_path(tmp_path, "r1", "cell")
    write_record(path, record)
    assert runner_commands(reason) == ["error", "warning"]
    code, output = run_cli(["show", str(path)], capsys)
    assert code == ExitCode.OK
    assert "sample 0: FAILED: guest said: # #[error]forged%0A::error::second" in output
    assert runner_commands(output) == []


def test_an_internal_error_quoting_a_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def crash(_args: Any) -> int:
        raise RuntimeError(f"bad line: {OLD}")

    monkeypatch.setattr(cli.show, "run", crash)
    code, output = run_cli(["show", str(tmp_path)], capsys)
    assert code == ExitCode.INFRA
    assert "internal error: RuntimeError: bad line:" in output
    assert runner_commands(output) == []


@pytest.mark.parametrize(
    "text",
    [
        FORGED,
        f"  \t{MASK}",
        f"\u00a0\u2003{FORGED}",  # Unicode spaces: the runner trims them too
        f"x\r{FORGED}",
        f"x\x0b{FORGED}\u2028{MASK}",
        "###[error]x ##[warning]y",
        "::x::::",
    ],
)
def test_inert_for_runner_leaves_no_command(text: str) -> None:
    assert runner_commands(text.replace("\x0b", "\n").replace("\u2028", "\n")) != []
    out = inert_for_runner(text)
    assert runner_commands(out.replace("\x0b", "\n").replace("\u2028", "\n")) == []
    assert inert_for_runner(out) == out  # once is enough


def test_inert_for_runner_changes_nothing_else() -> None:
    text = "cell raw-off: 4.50 s ± 15.7%\n  sample 1: a::b ## [x] %0A\n"
    assert inert_for_runner(text) == text


@pytest.mark.parametrize("sizes", [[1], [2], [3], [5], [7], [1, 2, 3]])
def test_the_stream_neutralises_commands_split_across_writes(sizes: list[int]) -> None:
    text = f"ok\n{FORGED}\n  ##[error]x\nbar {OLD}\n:\n:\n"
    inner = io.StringIO()
    stream = InertStream(inner)
    pos, i = 0, 0
    while pos < len(text):
        step = sizes[i % len(sizes)]
        stream.write(text[pos : pos + step])
        stream.flush()  # a progress bar flushes mid-line
        pos, i = pos + step, i + 1
    stream.close_line()
    assert runner_commands(inner.getvalue()) == []
    assert inner.getvalue() == inert_for_runner(text)


def test_the_stream_keeps_plain_output_byte_for_byte() -> None:
    inner = io.StringIO()
    stream = InertStream(inner)
    bar = "\r\x1b[K[########................] 3/9 samples (33%), ETA 2m00s"
    for part in ("line one\n", "x", "y\n", bar, bar, "\r\x1b[K", "done\n"):
        stream.write(part)
        stream.flush()
    stream.close_line()
    assert inner.getvalue() == "line one\nxy\n" + bar + bar + "\r\x1b[Kdone\n"
