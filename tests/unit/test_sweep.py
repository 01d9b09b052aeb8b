"""Sweep specs: validation with lines, exclusions with reasons, shards, --only, resume."""

from __future__ import annotations

import io
import itertools
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from tcgopts import run_dirs, tcg_options

from harness.cli import main
from harness.errors import SpecError
from harness.progress import EtaModel, Progress
from harness.record import (
    CellInfo,
    MachineInfo,
    Record,
    Sample,
    SubjectInfo,
    load_record,
    new_record,
    write_record,
)
from harness.rounds.session import Session
from harness.spec import Cell, make_cell
from harness.subject.binaries import QEMU_IMG
from harness.sweep import (
    Measure,
    expand_spec,
    filter_only,
    image_need_bytes,
    parse_shard,
    parse_spec,
    run_sweep,
    select,
    shard_cells,
    sweep_dir,
)

REPO = Path(__file__).resolve().parents[2]

GOOD = """\
name = "t"
repeat = 2

[axes]
format = ["raw", "qcow2"]
preallocation = ["off", "metadata"]
cache = ["none", "writeback"]
aio = ["threads", "native"]

[params]
workload = "dd"
dd_mib = 16
size = "256M"

[[exclude]]
format = "qcow2"
cache = "none"
reason = "not this time"
"""


def spec_of(text: str) -> Any:
    return parse_spec(textwrap.dedent(text), source="x.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[axes]\nformat = ["qcow2"]\ncache = [\n  "none",\n  "fast",\n]\n',
            "x.toml:5: unknown cache mode 'fast': use one of none, writethrough, writeback",
        ),
        ('[params]\ninterface = "floppy"\n', "x.toml:2: unknown interface 'floppy'"),
        ('axes.cache = ["none", # [a comment]\n  "fast"]\n', "x.toml:2: unknown cache mode 'fast'"),
        ('axes = { format = ["raw"] }\n\n[params]\nfs = "xfs"\n', "x.toml:4: unknown filesystem 'xfs'"),
        ('name = "n"\nrepaet = 3\n', "x.toml:2: unknown key 'repaet': use name, description, repeat"),
        ('cache = ["none"]\n', "x.toml:1: unknown key 'cache' (axes go under [axes] or [params])"),
        ('[axes]\nformat = ["raw"]\nbus = ["ide"]\n', "x.toml:3: unknown axis 'bus' in [axes]: use format"),
        ('[fixed]\nsize = "1G"\n', "x.toml:1: unknown key 'fixed'"),
        ('[axes]\nformat = ["raw"\ncache = 1\n', "x.toml:3: "),
        ('name = "a"\n[axes\n', "x.toml:2: "),
        ("repeat = 0\n", "x.toml:1: repeat 0 is not allowed: use 1 or more"),
        ('name = "../up"\n', "x.toml:1: name '../up' is not allowed"),
        ('[params]\ndd_mib = "16"\n', "x.toml:2: dd_mib '16' is str, not an integer"),
        ("[params]\nlazy_refcounts = 1\n", "x.toml:2: lazy_refcounts 1 is int, not true or false"),
        ('[axes]\ncluster_size = [65536, "3K"]\n', "x.toml:2: cluster_size '3K' is not allowed"),
        ('[axes]\nsize = ["1G", "32M"]\n', "x.toml:2: disk size '32M' is too small"),
        ('[params]\ncache = ["none", "writeback"]\n', "x.toml:2: cache in [params] takes one value"),
        ("[axes]\ncache = []\n", "x.toml:2: cache = [] has no value"),
        (
            '[axes]\ncache = ["none"]\n\n[params]\ncache = "none"\n',
            "x.toml:5: cache is given in [axes] (line 2) and in [params]: keep one",
        ),
        (
            '[axes]\ncache = ["none"]\n\n[[exclude]]\ncache = "none"\n',
            "x.toml:4: exclude needs a reason",
        ),
        (
            '[axes]\ncache = ["none"]\n\n[[exclude]]\nreason = "r"\n',
            "x.toml:4: exclude names no axis value",
        ),
        (
            '[axes]\ncache = ["none"]\n[[exclude]]\nreason = "a"\ncache = "none"\n'
            '[[exclude]]\nreason = "b"\nbus = "ide"\n',
            "x.toml:8: unknown axis 'bus' in [[exclude]]",
        ),
        (
            '[axes]\ncache = ["none"]\n[[exclude]]\nreason = "a"\ncache = "nope"\n',
            "x.toml:5: unknown cache mode 'nope'",
        ),
    ],
)
def test_bad_specs_name_the_line_and_the_value(text: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        expand_spec(parse_spec(text, source="x.toml"))
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[axes]\ncache = ["none", "writeback"]\n[[exclude]]\nreason = "a"\ncache = "unsafe"\n',
            "x.toml:3: exclude matches no combination",
        ),
        (
            '[params]\nworkload = "dd"\ndd_mib = 256\nsize = "256M"\n',
            "x.toml: every combination is excluded, so nothing would run: dd of 256 MiB does not fit",
        ),
    ],
)
def test_specs_that_leave_nothing_to_do_are_errors(text: str, message: str) -> None:
    with pytest.raises(SpecError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        expand_spec(parse_spec(text, source="x.toml"))


def test_impossible_and_excluded_combinations_are_kept_with_their_reasons() -> None:
    plan = expand_spec(spec_of(GOOD))
    assert plan.spec.name == "t" and plan.spec.repeat == 2
    reasons = {ex.label: ex.reason for ex in plan.excluded}
    assert reasons["format=raw preallocation=metadata cache=none aio=threads"].startswith(
        "preallocation 'metadata' is not allowed for raw"
    )
    assert reasons["format=raw preallocation=off cache=writeback aio=native"].startswith(
        "aio=native needs a direct cache mode"
    )
    assert reasons["format=qcow2 preallocation=off cache=none aio=native"] == "not this time (x.toml:15)"
    ids = [c.id for c in plan.cells]
    assert ids == [
        "raw-off-256m.none-threads-virtio-blk.dd-16m-2m-ext4",
        "raw-off-256m.none-native-virtio-blk.dd-16m-2m-ext4",
        "raw-off-256m.writeback-threads-virtio-blk.dd-16m-2m-ext4",
        "qcow2-off-cs64k-256m.writeback-threads-virtio-blk.dd-16m-2m-ext4",
        "qcow2-metadata-cs64k-256m.writeback-threads-virtio-blk.dd-16m-2m-ext4",
    ]
    assert len(plan.cells) + len(plan.excluded) == 16


def test_exclusions_match_sizes_and_lists_in_any_spelling() -> None:
    plan = expand_spec(
        spec_of(
            """
            [axes]
            size = ["1G", "2G", "4G"]
            interface = ["ide", "ahci", "nvme"]
            [[exclude]]
            size = ["2g", 4294967296]
            interface = ["IDE", "ahci"]
            reason = "slow buses on small disks only"
            """
        )
    )
    assert sorted(ex.label for ex in plan.excluded) == [
        "size=2G interface=ahci",
        "size=2G interface=ide",
        "size=4G interface=ahci",
        "size=4G interface=ide",
    ]
    assert len(plan.cells) == 5


def test_value_valid_only_with_a_param_is_accepted() -> None:
    # dd_mib 3 is not a multiple of the default 2 MiB chunk, but of the spec's 3 MiB one
    plan = expand_spec(spec_of('[axes]\ndd_mib = [3, 6]\n[params]\nworkload = "dd"\ndd_chunk_mib = 3\n'))
    assert [c.workload.dd_mib for c in plan.cells] == [3, 6]


@pytest.mark.parametrize("name", ["default.toml", "matrix.toml"])
def test_the_example_specs_are_valid(name: str) -> None:
    from harness.sweep import load_spec

    plan = expand_spec(load_spec(REPO / "sweeps" / name))
    if name == "matrix.toml":
        assert len(plan.cells) == 24 and plan.spec.repeat == 3
        images = {(c.image.format.value, c.image.preallocation) for c in plan.cells}
        assert images == {("raw", "falloc"), ("qcow2", "off"), ("qcow2", "metadata")}
    else:
        assert len(plan.cells) == 10 and plan.spec.repeat == 2


def many_cells() -> list[Cell]:
    return [
        make_cell(format=f, preallocation=p, cache=c, interface=i, workload="dd", dd_mib=16, size="256M")
        for f, p, c, i in itertools.product(
            ("raw", "qcow2"), ("off", "falloc"), ("none", "writeback", "unsafe"), ("ide", "nvme", "ahci")
        )
    ]


@pytest.mark.parametrize("count", [0, 1, 2, 5, 17, 36])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 40])
def test_shards_together_cover_every_cell_exactly_once(count: int, n: int) -> None:
    cells = many_cells()[:count]
    shards = [shard_cells(cells, k, n) for k in range(1, n + 1)]
    ids = [c.id for shard in shards for c in shard]
    assert sorted(ids) == sorted(c.id for c in cells)
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1
    # the same shard whatever order the spec listed the cells in
    assert [c.id for c in shard_cells(list(reversed(cells)), 1, n)] == [
        c.id for c in reversed(shard_cells(cells, 1, n))
    ]


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "a/b", "2", "-1/2", "1/2/3"])
def test_bad_shards_are_usage_errors(text: str) -> None:
    with pytest.raises(SpecError, match=r"^--shard "):
        parse_shard(text)


def test_only_filters_by_comma_separated_globs_and_refuses_a_glob_that_matches_nothing() -> None:
    cells = many_cells()
    kept = filter_only(cells, "raw-off-*.none-*, *.unsafe-threads-nvme.*")
    assert {c.id for c in kept} == {
        c.id
        for c in cells
        if (c.id.startswith("raw-off-") and ".none-" in c.id) or ".unsafe-threads-nvme." in c.id
    }
    assert len(kept) == 3 + 4
    with pytest.raises(SpecError, match=r"--only 'qcow3-\*' matches no cell"):
        filter_only(cells, "raw-*,qcow3-*")
    # --only first, then the shard: N runners with the same --only cover it once
    shards = [select(cells, only="qcow2-*", shard=f"{k}/3") for k in (1, 2, 3)]
    assert sorted(c.id for s in shards for c in s) == sorted(c.id for c in cells if c.id.startswith("qcow2-"))


def test_image_need_is_full_size_when_preallocated_else_metadata_plus_writes() -> None:
    measure = Measure(required=589824, fully_allocated=2 * 1024**3 + 589824)
    falloc = make_cell(format="qcow2", preallocation="falloc", workload="dd", dd_mib=16)
    sparse = make_cell(format="qcow2", preallocation="off", workload="dd", dd_mib=16)
    raw = make_cell(format="raw", preallocation="off", workload="dd", dd_mib=16)
    assert image_need_bytes(falloc, measure) == measure.fully_allocated
    fs = 128 * 1024**2  # a 2 GiB disk: 1/16 for the filesystem's own writes
    assert image_need_bytes(sparse, measure) == 589824 + 16 * 1024**2 + fs
    assert image_need_bytes(raw, Measure(2 * 1024**3, 2 * 1024**3)) == 16 * 1024**2 + fs


@pytest.mark.integration
def test_too_little_space_is_an_infra_error_with_the_figures(tmp_path: Path) -> None:
    from harness.errors import InfraError
    from harness.sweep import check_free_space

    huge = make_cell(format="raw", preallocation="falloc", size="64T", workload="dd", dd_mib=16)
    small = make_cell(format="qcow2", workload="dd", dd_mib=16, size="256M")
    with pytest.raises(InfraError) as info:
        check_free_space(tmp_path / "work", [small, huge], qemu_img=QEMU_IMG)
    message = str(info.value)
    assert f"work dir {tmp_path / 'work'} has " in message
    assert f"the largest image ({huge.id}) needs up to 65536.00 GiB" in message
    assert check_free_space(tmp_path, [small], qemu_img=QEMU_IMG).startswith(
        f"disk: the largest image ({small.id}) needs up to 0."
    )


# -- the loop, with a session that fakes guests -----------------------------------


@dataclass
class FakeSession(Session):
    """Runs no guest: appends samples up to ``upto`` per call (failing for ids in ``fail``)."""

    calls: list[tuple[str, int]] = field(default_factory=list)
    fail: set[str] = field(default_factory=set)

    def run_cell(self, cell: Cell, **kw: Any) -> tuple[Path, Record]:
        path: Path = kw["where"].path(cell.id)
        record = kw.get("existing") or new_record(
            cell=CellInfo(cell.as_dict()),
            machine=self.machine,
            subject=self.subject,
            vm={"accel": self.opts.accel, "mem_mib": self.opts.mem_mib, "smp": self.opts.smp},
            run_id=self.opts.run_id,
        )
        upto = kw.get("upto") or self.opts.repeat
        for index in range(len(record.samples), upto):
            self.calls.append((cell.id, index))
            ok = cell.id not in self.fail
            sample = Sample(
                index=index,
                status="ok" if ok else "error",
                metrics={"total_s": 1.0 + index} if ok else {},
                logs={"console": str(kw["where"].log_root(cell.id) / f"sample-{index}" / "console.log")},
                reason=None if ok else "guest workload failed: boom",
            )
            record = record.with_sample(sample)
            write_record(path, record)
        return path, record


def fake_session(tmp_path: Path, *, qemu_version: str = "7.2.0", fail: set[str] | None = None) -> FakeSession:
    opts = tcg_options(tmp_path / "w", tmp_path, run_id="x")
    session = FakeSession(
        guest=None,  # type: ignore[arg-type]
        opts=opts,
        machine=MachineInfo({"hostname": "h", "accel": "tcg", "qemu_version": qemu_version}),
        subject=SubjectInfo({"guest": {"recipe_hash": "abc"}}),
    )
    session.fail.update(fail or set())
    return session


def test_a_sweep_runs_in_rounds_and_a_rerun_skips_what_is_recorded(tmp_path: Path) -> None:
    cells = many_cells()[:3]
    out = io.StringIO()
    session = fake_session(tmp_path)
    result = run_sweep("s", cells, session, results_dir=tmp_path, repeat=2, progress=Progress(out, bar=False))
    assert session.calls == [(c.id, 0) for c in cells] + [(c.id, 1) for c in cells]
    assert result.ran_samples == 6 and result.skipped_samples == 0 and result.failed_samples == 0
    directory = sweep_dir(tmp_path, "s")
    assert sorted(p.name for p in directory.glob("*.json")) == sorted(f"{c.id}.json" for c in cells)
    assert "6/6 samples (100%)" in out.getvalue()

    # one record loses its second sample (as if killed during it); then rerun with repeat 3
    path = directory / f"{cells[1].id}.json"
    record = load_record(path)
    write_record(path, replace(record, samples=record.samples[:-1]))
    again = fake_session(tmp_path)
    result = run_sweep(
        "s", cells, again, results_dir=tmp_path, repeat=3, progress=Progress(io.StringIO(), bar=False)
    )
    assert again.calls == [(cells[1].id, 1), (cells[0].id, 2), (cells[1].id, 2), (cells[2].id, 2)]
    assert result.skipped_samples == 5 and result.ran_samples == 4
    assert [len(r.samples) for r in result.records] == [3, 3, 3]


def test_records_of_another_machine_are_set_aside_not_mixed_in(tmp_path: Path) -> None:
    cells = many_cells()[:2]
    old = fake_session(tmp_path, qemu_version="7.2.0")
    run_sweep("s", cells, old, results_dir=tmp_path, repeat=1, progress=Progress(io.StringIO(), bar=False))
    directory = sweep_dir(tmp_path, "s")
    (directory / "logs" / cells[0].id / "sample-0").mkdir(parents=True)
    out = io.StringIO()
    new = fake_session(tmp_path, qemu_version="8.2.0")
    result = run_sweep("s", cells, new, results_dir=tmp_path, repeat=1, progress=Progress(out, bar=False))
    assert new.calls == [(c.id, 0) for c in cells], "nothing of the old QEMU was resumed"
    assert all(r.machine.qemu_version == "8.2.0" for r in result.records)
    assert len(result.set_aside) == 2
    moved = load_record(directory / "previous" / old.fingerprint / f"{cells[0].id}.json")
    assert moved.machine.qemu_version == "7.2.0"
    assert moved.samples[0].logs["console"].startswith(str(directory / "previous" / old.fingerprint / "logs"))
    assert "set aside a record of another machine or subject" in out.getvalue()


def test_failed_samples_are_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    cells = many_cells()[:3]
    session = fake_session(tmp_path, fail={cells[0].id})
    result = run_sweep(
        "s", cells, session, results_dir=tmp_path, repeat=1, progress=Progress(io.StringIO(), bar=False)
    )
    assert len(session.calls) == 3
    assert result.failed_cells == [cells[0].id] and result.failed_samples == 1


def test_progress_bar_draws_in_place_and_eta_learns_from_samples() -> None:
    out = io.StringIO()
    progress = Progress(out, bar=True)
    progress.plan([("dd", 10.0), ("dd", 10.0), ("install", 60.0)])
    progress.start(total=3)
    progress.begin("c1")
    progress.end("c1", 30.0, ok=True, kind="dd")
    assert progress.eta_s() == 30.0 + 60.0  # the measured dd time, the install's prior
    progress.note("a note")
    progress.finish()
    text = out.getvalue()
    assert "\r\x1b[K[########................] 1/3 samples (33%)" in text
    assert "\r\x1b[Ka note\n" in text
    assert text.endswith("sweep: 1/3 samples (33%), elapsed 0s, ETA 1m30s\n")
    assert EtaModel({"dd": [1.0, 3.0]}).remaining_s([("dd", 9.0), ("x", 5.0)]) == 7.0


def test_progress_is_plain_lines_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("CI", raising=False)
    assert Progress(Tty()).bar
    monkeypatch.setenv("CI", "true")
    assert not Progress(Tty()).bar


# -- the command ---------------------------------------------------------------------


def write_spec(tmp_path: Path, text: str = GOOD) -> Path:
    path = tmp_path / "t.toml"
    path.write_text(text)
    return path


def test_dry_run_lists_cells_exclusions_and_the_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path)
    rc = main(
        [
            "sweep",
            str(spec),
            "--dry-run",
            "--only",
            "raw-*",
            *run_dirs(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith(
        "sweep t (" + str(spec) + "): 5 cells x 2 repeats\nselected 3 of 5 cells by --only raw-*\n"
    )
    assert "  run   raw-off-256m.none-native-virtio-blk.dd-16m-2m-ext4\n" in out
    assert f"  excluded format=qcow2 cache=none (4 cells): not this time ({spec}:15)\n" in out
    assert "estimate: 6 samples, about " in out
    assert not (tmp_path / "r").exists() and not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shard", "3/2"], "diskbench: error: --shard '3/2' is not allowed"),
        (["--only", "nope*"], "diskbench: error: --only 'nope*' matches no cell"),
        (["--repeat", "0"], "diskbench: error: --repeat 0: use 1 or more"),
    ],
)
def test_sweep_usage_errors_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    rc = main(["sweep", str(write_spec(tmp_path)), "--dry-run", *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith(message) and len(err.strip().splitlines()) == 1


def test_a_bad_spec_exits_2_naming_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, GOOD.replace('"writeback"]', '"fast"]'))
    assert main(["sweep", str(spec), "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"diskbench: error: {spec}:7: unknown cache mode 'fast': use one of none, writethrough, writeback, directsync, unsafe\n"
    )
    assert not (tmp_path / "r").exists()


def test_a_rerun_retries_failed_samples_and_keeps_the_good_ones(tmp_path: Path) -> None:
    cells = many_cells()[:2]
    first = fake_session(tmp_path, fail={cells[0].id})
    run_sweep("s", cells, first, results_dir=tmp_path, repeat=2, progress=Progress(io.StringIO(), bar=False))
    path = sweep_dir(tmp_path, "s") / f"{cells[0].id}.json"
    # one good sample and one failure in the same record
    record = load_record(path)
    good = Sample.from_json({"index": 0, "status": "ok", "metrics": {"total_s": 1.0}})
    write_record(path, replace(record, samples=(good, *record.samples[1:])))

    kept = fake_session(tmp_path)
    out = io.StringIO()
    result = run_sweep(
        "s",
        cells,
        kept,
        results_dir=tmp_path,
        repeat=2,
        progress=Progress(out, bar=False),
        retry_failures=False,
    )
    assert kept.calls == [] and result.failed_samples == 1
    assert "retrying" not in out.getvalue()

    again = fake_session(tmp_path)
    out = io.StringIO()
    result = run_sweep("s", cells, again, results_dir=tmp_path, repeat=2, progress=Progress(out, bar=False))
    assert again.calls == [(cells[0].id, 1)]
    assert "resuming: 3 of 4 samples are recorded already and are skipped" in out.getvalue()
    assert (
        "retrying 1 failed sample: kept under 'retried' in the records, the good samples stay"
        in out.getvalue()
    )
    stored = load_record(path)
    assert [s.status for s in stored.samples] == ["ok", "ok"]
    assert stored.samples[0].to_json() == good.to_json(), "the good sample is kept as it was"
    assert [s.reason for s in stored.retried] == ["guest workload failed: boom"]
    assert result.failed_samples == 0


def test_the_next_sample_index_never_reuses_a_retried_ones() -> None:
    record = Record(
        cell=CellInfo({"id": "c"}),
        machine=MachineInfo(),
        samples=(Sample(index=0), Sample(index=2)),
        retried=(Sample(index=1), Sample(index=3)),
    )
    assert record.next_sample_index() == 4
    assert replace(record, samples=(), retried=()).next_sample_index() == 0


# The README's default sweep measured on the development host (docs/snapshot-start.md): wall time
# of two runs with each start kind, 20 samples under TCG on two cores.
MEASURED_DEFAULT_S = {"auto": (329.6, 371.7), "cold": (424.6, 439.6)}


@pytest.mark.parametrize("start", ["auto", "cold"])
def test_the_default_sweeps_estimate_is_within_a_quarter_of_its_measured_time(start: str) -> None:
    from harness.sweep import describe_plan, estimate_builds_s, estimate_sample_s, expand_spec, load_spec

    plan = expand_spec(load_spec(Path("sweeps/default.toml")))
    cells = plan.cells
    builds, build_s = estimate_builds_s(cells, start=start)
    total = sum(estimate_sample_s(c, start=start) for c in cells) * 2 + build_s
    measured = sum(MEASURED_DEFAULT_S[start]) / 2
    assert 0.75 * measured <= total <= 1.25 * measured, (start, total, measured)
    # one snapshot per workload (install has its payload drive), none for cold boots
    assert builds == (2 if start == "auto" else 0)
    text = describe_plan(plan, cells, repeat=2, start=start)
    assert f"with --start {start}" in text


def test_the_start_kind_moves_the_estimate() -> None:
    from harness.spec import make_cell
    from harness.sweep import estimate_builds_s, estimate_sample_s

    fresh = make_cell(workload="dd", dd_mib=256)
    cold = estimate_sample_s(fresh, start="cold")
    assert cold - estimate_sample_s(fresh, start="snapshot") == pytest.approx(5.0 - 0.25)
    assert estimate_sample_s(fresh, start="auto") == estimate_sample_s(fresh, start="snapshot")
    # a warm sample runs on a primed image: it boots under any --start, and builds no snapshot
    warm = make_cell(workload="dd", dd_mib=256, cache_state="warm")
    assert estimate_sample_s(warm, start="snapshot") == estimate_sample_s(warm, start="cold")
    assert estimate_builds_s([warm], start="auto") == (0, 0.0)
    # two cells differing only in the image share a snapshot
    raw = make_cell(workload="dd", dd_mib=256, format="raw")
    assert estimate_builds_s([fresh, raw], start="auto")[0] == 1
