"""fio's JSON parsed into figures: real output of Debian's fio 3.33 (the package the guest pins)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ProtocolError
from harness.paths import IMAGES_DIR
from harness.workloads import metric_info, parse_outputs
from harness.workloads.fio import parse_fio_json

JOBS = (IMAGES_DIR / "workloads" / "fio.fio").read_text()

# Debian bookworm's fio 3.33-3 binary with its libraries, run on a file with the job file below
# (TARGET a file, PREFIX "file-", SIZE 8M, IOS 200, FSYNC_IOS 50)
REAL = Path(__file__).parent / "data" / "fio-3.33-debian.json"


def test_every_job_of_the_job_file_gives_its_figures() -> None:
    figures, doc = parse_fio_json(REAL.read_text())
    assert doc["fio version"] == "fio-3.33"
    names = [line[1:-1] for line in JOBS.splitlines() if line.startswith("[${PREFIX}")]
    jobs = [n.replace("${PREFIX}", "file-") for n in names]
    assert jobs == [j["jobname"] for j in doc["jobs"]]
    assert len(jobs) == 7
    for job in jobs:
        for figure in ("iops", "mib_per_s", "clat_mean_ms", "clat_p50_ms", "clat_p99_ms"):
            assert figures[f"fio.{job}.{figure}"] > 0, (job, figure)
    # 1 MiB blocks: MiB/s equals IOPS; 4 KiB blocks: a 256th of it
    assert figures["fio.file-seq-write.mib_per_s"] == pytest.approx(figures["fio.file-seq-write.iops"])
    rand = "fio.file-rand-write-qd32"
    assert figures[f"{rand}.mib_per_s"] == pytest.approx(figures[f"{rand}.iops"] / 256, rel=1e-3)
    assert figures[f"{rand}.clat_p50_ms"] <= figures[f"{rand}.clat_p99_ms"]
    # the figures of the fixture, as fio wrote them (clat_ns mean and percentiles, bw_bytes)
    write = next(j for j in doc["jobs"] if j["jobname"] == "file-fsync-write")["write"]
    assert figures["fio.file-fsync-write.clat_mean_ms"] == pytest.approx(write["clat_ns"]["mean"] / 1e6)
    assert figures["fio.file-fsync-write.clat_p99_ms"] == pytest.approx(
        write["clat_ns"]["percentile"]["99.000000"] / 1e6
    )


def test_the_figures_are_registered_with_their_direction() -> None:
    figures, _ = parse_fio_json(REAL.read_text())
    for name in figures:
        info = metric_info(name)
        assert info.higher_is_better is name.endswith(("iops", "mib_per_s")), name


def test_parse_outputs_keeps_the_raw_json_in_the_record() -> None:
    figures, fields = parse_outputs("fio", {"fio_file_json": REAL.read_text()})
    assert fields["fio_json"]["file"]["jobs"][0]["jobname"] == "file-seq-write"
    assert "fio.file-seq-read.iops" in figures
    # both targets: the figures of each, the JSON of each under its target
    raw = REAL.read_text().replace('"file-', '"raw-')
    figures, fields = parse_outputs("fio", {"fio_raw_json": raw, "fio_file_json": REAL.read_text()})
    assert "fio.raw-seq-read.iops" in figures and "fio.file-seq-read.iops" in figures
    assert set(fields["fio_json"]) == {"raw", "file"}
    with pytest.raises(ProtocolError, match="outputs: none; expected fio_raw_json and/or fio_file_json"):
        parse_outputs("fio", {})
    with pytest.raises(ProtocolError, match="unexpected fio_json; expected"):
        parse_outputs("fio", {"fio_json": REAL.read_text()})
    with pytest.raises(ProtocolError, match="unexpected zzz; expected"):
        parse_outputs("fio", {"fio_file_json": REAL.read_text(), "zzz": "1"})


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(jobs=[]), "has no jobs"),
        (lambda d: d["jobs"][0].update(error=5), "job file-seq-write failed: error 5"),
        (lambda d: d["jobs"][0].update(jobname="a b"), "is not a plain name"),
        (lambda d: d["jobs"][0]["write"].update(total_ios=0), "did no IO"),
        (lambda d: d["jobs"][0]["write"].update(iops="fast"), "is not a number"),
        # numbers no figure may be: a record holding them could not be read back
        (lambda d: d["jobs"][0]["write"].update(iops=float("nan")), "NaN is not a number JSON allows"),
        (lambda d: d.update(note=float("-inf")), "-Infinity is not a number JSON allows"),
        (
            lambda d: d["jobs"][0]["write"]["clat_ns"].update(mean=-5),
            "clat mean is -5, not a number from 0 to 1e",
        ),
        (lambda d: d["jobs"][0]["write"].update(iops=10**400), "iops is 1000.*not a number from 0 to 1e"),
        (lambda d: d["jobs"][0]["write"].update(total_ios="5"), "total_ios is not a number"),
        # finite, but a mean or a variance of a few of them is not
        (lambda d: d["jobs"][0]["write"].update(bw_bytes=1e308), "bw_bytes is 1e.308, not a number from 0"),
        # what fio always reports of a job that did IO
        (lambda d: d["jobs"][0]["write"].pop("clat_ns"), "seq-write write has no clat_ns"),
        (lambda d: d["jobs"][0]["write"]["clat_ns"].update(percentile="x"), "has no clat_ns percentiles"),
        (lambda d: d["jobs"][0]["write"]["clat_ns"]["percentile"].pop("99.000000"), "99.000000 is not"),
        # names that would make figures collide, or figure names no metric pattern reads
        (lambda d: d["jobs"].append(d["jobs"][0]), "job file-seq-write is reported twice"),
        (lambda d: d["jobs"][0].update(jobname="file-a.b"), "is not a plain name"),
        (lambda d: d["jobs"][0].update(jobname="file-../x"), "is not a plain name"),
        (lambda d: d["jobs"][0].update(jobname="file-" + "a" * 100), "is not a plain name"),
        (lambda d: d.update(jobs=d["jobs"] * 5), "35 jobs, more than the job file's"),
    ],
)
def test_output_that_is_not_fios_json_is_a_protocol_error(edit: object, message: str) -> None:
    doc = json.loads(REAL.read_text())
    edit(doc)  # type: ignore[operator]
    with pytest.raises(ProtocolError, match=message):
        parse_fio_json(json.dumps(doc))
    with pytest.raises(ProtocolError, match="not JSON"):
        parse_fio_json("fio: engine libaio not loadable")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "nests too deeply"),
        ('{"jobs": [' + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "]}", "nests too deeply"),
        ('{"jobs": [' + "9" * 5000 + "]}", "not fio's JSON"),
    ],
)
def test_hostile_json_is_a_protocol_error_not_a_crash(text: str, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        parse_fio_json(text)


def test_each_targets_jobs_carry_its_prefix() -> None:
    """The raw target's JSON under fio_file_json (or the same JSON twice) would give figures of
    one target under the other's name, or replace them."""
    with pytest.raises(ProtocolError, match="not a plain name starting with 'raw-'"):
        parse_outputs("fio", {"fio_raw_json": REAL.read_text()})
    with pytest.raises(ProtocolError, match="starting with 'raw-'"):
        parse_outputs("fio", {"fio_raw_json": REAL.read_text(), "fio_file_json": REAL.read_text()})


@pytest.mark.parametrize(
    ("target", "sent", "ok"),
    [
        ("both", {"fio_raw_json", "fio_file_json"}, True),
        ("raw", {"fio_raw_json"}, True),
        ("raw", {"fio_file_json"}, False),
        ("both", {"fio_raw_json"}, False),
        ("file", {"fio_raw_json", "fio_file_json"}, False),
    ],
)
def test_the_guest_ran_the_targets_the_cell_asked_for(target: str, sent: set[str], ok: bool) -> None:
    from harness.sample.guest_sampler import check_outputs as check_fio_targets
    from harness.spec import make_cell

    cell = make_cell(workload="fio", fio_target=target, size="1G")
    outputs = dict.fromkeys(sent, "{}")
    if ok:
        check_fio_targets(cell, outputs)
    else:
        with pytest.raises(ProtocolError, match=f"the cell asked for .*fio_target={target}"):
            check_fio_targets(cell, outputs)
