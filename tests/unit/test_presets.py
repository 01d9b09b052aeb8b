"""Presets: every seed experiment expands and validates at every scale; its seed figures match cells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tcgopts import run_dirs

from harness.cli import main
from harness.compare.samplestats import Stats
from harness.errors import SpecError, UsageError
from harness.presets import (
    Figure,
    Order,
    Ratio,
    SeedReference,
    cell_values,
    check_order,
    check_ratio,
    direction,
    list_presets,
    load_preset,
    load_reference,
    matches,
    parse_preset,
    probes_of,
    read_probes,
    resolve_spec,
    scale_value,
    scaled_name,
    split_scaled_name,
)
from harness.subject.binaries import Binaries
from harness.sweep import expand_spec

PRESETS = ("booth-2010", "cluster-size", "kvm-wiki-install", "mkfs-sparse", "preallocation", "subclusters")
# the seeds' own numbers, from shared/seeds/NNN: the preset files must carry them as written
SEED_NUMBERS = {
    "booth-2010": {"sparse qcow2": 223.0, "sparse raw": 15.3, "qcow2 metadata": 14.5, "fallocated raw": 14.8},
    "cluster-size": {"create 512": 101.889, "write 2M": 1.46358, "rate 64K": 79.0},
    "mkfs-sparse": {"sparse raw, first": 1200, "qcow2, first": 2340, "written raw, cold": 119},
    "kvm-wiki-install": {"qcow2 virtio none": 1115, "raw IDE writethrough": 444},
    "subclusters": {
        "2M on": 440,
        "2M off": 100,
        "512K on": 1000,
        "64K on": 3000,
        "32K on": 12000,
        "32K off": 1300,
        "4K off": 100,
        "64K off": 1000,
        "512K off": 300,
    },
}


def test_the_seed_presets_are_there() -> None:
    assert tuple(list_presets()) == PRESETS


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("scale", ["one", "tcg", 0.01, 2.0])
def test_each_preset_expands_and_validates_at_each_scale(name: str, scale: str | float) -> None:
    preset = load_preset(name)
    factor = {"one": 1.0, "tcg": preset.tcg_scale}.get(str(scale), scale)
    assert isinstance(factor, float)
    spec = preset.at_scale(factor)
    plan = expand_spec(spec)
    assert spec.name == scaled_name(name, factor)
    assert plan.cells, name
    assert len({c.id for c in plan.cells}) == len(plan.cells)
    ref = load_reference(preset.reference_path)
    assert ref.seed == preset.seed
    values = [cell_values(c) for c in plan.cells]
    for fig in ref.figures:
        hits = [v for v in values if matches(fig.where, v)]
        assert len(hits) == 1, f"{name} at {factor}: figure {fig.name!r} matches {len(hits)} cells"
    for row in ref.bonnie:
        if row.where:
            assert sum(matches(row.where, v) for v in values) == 1, row.label


@pytest.mark.parametrize("name", sorted(SEED_NUMBERS))
def test_seed_files_carry_the_seeds_numbers(name: str) -> None:
    ref = load_reference(load_preset(name).reference_path)
    for figure, value in SEED_NUMBERS[name].items():
        assert ref.figure(figure).seed == value


def test_seed_001_shape_is_the_15x_penalty() -> None:
    ref = load_reference(load_preset("booth-2010").reference_path)
    ratio = next(r for r in ref.ratios if r.of == "sparse qcow2" and r.to == "sparse raw")
    assert ratio.seed == pytest.approx(223.0 / 15.3)


def test_seed_004_bonnie_rows_are_the_seeds_table() -> None:
    ref = load_reference(load_preset("kvm-wiki-install").reference_path)
    rows = {r.label: r for r in ref.bonnie}
    assert rows["qcow2 IDE"].values["seq_output_block"] == ("36762", "3")
    assert rows["raw virtio"].values["random_seeks"] == ("109.4", "1")
    assert rows["qcow2 virtio"].values["seq_stat"] == ("+++++", "+++")
    assert all(len(r.values) == 12 for r in rows.values())


def test_scale_1_is_the_seeds_setup() -> None:
    cells = expand_spec(load_preset("booth-2010").at_scale(1.0)).cells
    assert {c.image.size for c in cells} == {300 * 1024**2}
    assert {(c.workload.dd_mib, c.workload.dd_chunk_mib, c.workload.fs) for c in cells} == {(256, 2, "ext2")}
    kvm = expand_spec(load_preset("kvm-wiki-install").at_scale(1.0)).cells
    assert {c.workload.payload for c in kvm if c.workload.name.value == "install"} == {"full"}
    assert {(c.workload.bonnie_size_mib, c.workload.bonnie_files) for c in kvm} == {(1472, 16)}
    assert expand_spec(load_preset("mkfs-sparse").at_scale(1.0)).cells[0].image.size == 100 * 1024**3


def test_scaling_rounds_and_keeps_floors() -> None:
    assert scale_value("size", "300M", 0.25) == "75M"
    assert scale_value("size", "300M", 0.01, floor="64M") == "64M"
    assert scale_value("size", "100G", 0.05) == "5G"
    assert scale_value("dd_mib", 256, 0.1, chunk_mib=2) == 26
    assert scale_value("dd_mib", 256, 0.001, chunk_mib=2) == 2
    assert scale_value("dd_mib", 512, 0.01, floor=16, chunk_mib=2) == 16
    assert scale_value("bonnie_size_mib", 1472, 0.25, floor=512) == 512
    assert scale_value("bonnie_files", 16, 0.25) == 4
    assert scale_value("bonnie_files", 0, 0.25) == 0
    with pytest.raises(SpecError, match="payload cannot be scaled"):
        scale_value("payload", "full", 0.5)


def test_below_scale_1_the_install_uses_the_small_payload() -> None:
    cells = expand_spec(load_preset("kvm-wiki-install").at_scale(0.25)).cells
    assert {c.workload.payload for c in cells if c.workload.name.value == "install"} == {"small"}


@pytest.mark.parametrize(
    ("name", "base", "scale"),
    [
        ("booth-2010", "booth-2010", 1.0),
        ("booth-2010-scale0.25", "booth-2010", 0.25),
        ("mkfs-sparse-scale0.01", "mkfs-sparse", 0.01),
    ],
)
def test_scaled_names_round_trip(name: str, base: str, scale: float) -> None:
    assert split_scaled_name(name) == (base, scale)
    assert scaled_name(base, scale) == name


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"spec_path": None, "preset": "nope", "scale": None},
            "unknown preset 'nope': use one of booth-2010,",
        ),
        ({"spec_path": None, "preset": "booth-2010", "scale": 0.0}, "--scale 0 is not allowed"),
        ({"spec_path": None, "preset": "booth-2010", "scale": float("nan")}, "--scale nan is not allowed"),
        (
            {"spec_path": Path("x.toml"), "preset": "booth-2010", "scale": None},
            "give a spec file or --preset, not both",
        ),
        ({"spec_path": Path("x.toml"), "preset": None, "scale": 0.5}, "--scale applies to presets"),
        ({"spec_path": None, "preset": None, "scale": None}, "give a sweep spec file, or --preset NAME"),
    ],
)
def test_bad_preset_requests_say_what_to_do(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError) as info:
        resolve_spec(**kwargs)  # type: ignore[arg-type]
    assert str(info.value).startswith(message), str(info.value)


def test_a_preset_with_an_unscalable_key_is_refused(tmp_path: Path) -> None:
    text = (
        (Path(load_preset("booth-2010").path))
        .read_text()
        .replace('scaled = ["size", "dd_mib"]', 'scaled = ["size", "fs"]')
    )
    with pytest.raises(SpecError, match=r"\[preset\] scaled: 'fs' cannot be scaled"):
        parse_preset(text, path=tmp_path / "booth-2010.toml")


def test_preset_list_shows_each_preset_with_scale_and_estimates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--preset", "list"]) == 0
    out = capsys.readouterr().out
    for name in PRESETS:
        assert f"\n{name}  (seed " in "\n" + out
        assert f"diskbench sweep --preset {name} --scale " in out
    assert out.count("estimate: TCG at --scale") == len(PRESETS)
    assert "scale 1: the seed's 100 GiB disk" in out


def test_a_preset_dry_run_lists_its_cells_at_the_scale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        [
            "sweep",
            "--preset",
            "booth-2010",
            "--scale",
            "0.25",
            "--dry-run",
            *run_dirs(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith("sweep booth-2010-scale0.25 (")
    assert "  run   qcow2-metadata-cs64k-75m.none-threads-virtio-blk.dd-64m-2m-ext2\n" in out
    assert "excluded format=qcow2 preallocation=falloc: seed 001 measured qcow2 sparse" in out
    assert (
        "excluded format=raw preallocation=metadata: preallocation 'metadata' is not allowed for raw" in out
    )
    assert not (tmp_path / "r").exists()


def test_sweep_with_an_unknown_preset_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--preset", "booth-2011"]) == 2
    assert capsys.readouterr().err.startswith("diskbench: error: unknown preset 'booth-2011'")


# -- shape checks (pure) ------------------------------------------------------------------------------

REF = SeedReference(
    seed="001",
    document="d",
    setup="s",
    figures=(
        Figure("a", {}, "phase.write_s", 223.0),
        Figure("b", {}, "phase.write_s", 15.3),
        Figure("c", {}, "phase.write_s", 14.5),
    ),
)


def resolver(values: dict[str, list[float]]) -> object:
    return lambda fig: Stats.of(values[fig.name]) if fig.name in values else None


def test_a_ratio_holds_when_it_lies_on_the_seeds_side_of_1() -> None:
    ratio = Ratio("a/b", "a", "b", seed=223.0 / 15.3)
    held = check_ratio(ratio, REF, resolver({"a": [30.0, 31.0, 29.0], "b": [15.0]}))  # type: ignore[arg-type]
    assert (held.verdict, held.seed, held.ours) == ("holds", "x14.6", "x2")
    gone = check_ratio(ratio, REF, resolver({"a": [14.0], "b": [15.0]}))  # type: ignore[arg-type]
    assert gone.verdict == "changed" and gone.our_value == pytest.approx(14 / 15)
    missing = check_ratio(ratio, REF, resolver({"a": [14.0]}))  # type: ignore[arg-type]
    assert missing.verdict == "not measured"


def test_about_the_same_is_within_ten_percent() -> None:
    assert [direction(x) for x in (0.95, 1.09, 1.2, 0.8)] == ["=", "=", ">", "<"]
    same = Ratio("c/b", "c", "b", seed=14.5 / 15.3)
    assert check_ratio(same, REF, resolver({"c": [10.5], "b": [10.0]})).verdict == "holds"  # type: ignore[arg-type]
    claim = Ratio("c/b", "c", "b", expect=">")
    assert check_ratio(claim, REF, resolver({"c": [10.5], "b": [10.0]})).verdict == "changed"  # type: ignore[arg-type]


def test_an_order_holds_when_ours_ranks_the_same() -> None:
    order = Order("quickest first", ("c", "b", "a"))
    ok = check_order(order, REF, resolver({"a": [3.0], "b": [2.0], "c": [1.0]}))  # type: ignore[arg-type]
    assert ok.verdict == "holds" and ok.ours == "c < b < a"
    swapped = check_order(order, REF, resolver({"a": [3.0], "b": [1.0], "c": [2.0]}))  # type: ignore[arg-type]
    assert swapped.verdict == "changed" and swapped.ours == "b < c < a"
    # within 10% is a tie, and a tie does not contradict the seed's order
    tied = check_order(order, REF, resolver({"a": [3.0], "b": [1.0], "c": [1.05]}))  # type: ignore[arg-type]
    assert tied.verdict == "holds" and tied.ours == "b ≈ c < a"


def test_a_seed_file_with_a_dangling_ratio_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.seed.toml"
    path.write_text(
        'seed = "1"\n[[figure]]\nname = "a"\nmetric = "total_s"\nseed = 1\n[[ratio]]\nof = "a"\nto = "b"\n'
    )
    with pytest.raises(SpecError, match=r"x.seed.toml: \[\[ratio\]\] 1: to = 'b' names no figure"):
        load_reference(path)


def test_the_preallocation_preset_records_its_probe_and_the_report_reads_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.sample import capabilities

    spec = load_preset("preallocation").at_scale(0.05)
    assert probes_of(spec) == ("compressed-writes",)
    assert probes_of(load_preset("booth-2010").spec) == ()
    # the real probe runs qemu-io (tests/integration/test_presets_run.py); here its verdict is given
    monkeypatch.setitem(
        capabilities.PROBES,
        "compressed-writes",
        lambda _work, _binaries: {"supported": False, "reason": "no"},
    )
    notes = capabilities.record_probes(
        probes_of(spec), tmp_path / "sweep", tmp_path / "work", Binaries.on_path()
    )
    assert notes == ["probe compressed-writes: unsupported: no"]
    written = tmp_path / "sweep" / "probes" / "compressed-writes.json"
    assert written.read_text() == (
        '{\n "probe": "compressed-writes",\n "label": "qcow2 compressed (compress filter)",\n'
        ' "supported": false,\n "reason": "no"\n}\n'
    )
    assert [p.name for p in written.parent.iterdir()] == ["compressed-writes.json"]  # no temp file left
    assert read_probes([tmp_path / "sweep", tmp_path / "none"]) == [json.loads(written.read_text())]
