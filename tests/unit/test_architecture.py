"""The house keeps its plan: room sizes, where argparse and the environment may be used, no import
circle at any level, the packages under harness/ in rows, and the page that draws them."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"
MAX_LINES = 600


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(HARNESS.rglob("*.py")):
        parts = path.relative_to(HARNESS.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def test_no_room_is_over_600_lines() -> None:
    big = {
        name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert big == {}


def test_argparse_lives_only_in_the_cli() -> None:
    users = [
        name
        for name, path in modules().items()
        if not name.startswith("harness.cli")
        and any(
            (isinstance(n, ast.Import) and any(a.name == "argparse" for a in n.names))
            or (isinstance(n, ast.ImportFrom) and n.module == "argparse")
            for n in ast.walk(ast.parse(path.read_text()))
        )
    ]
    assert users == []


def test_no_binary_is_read_from_the_environment_below_the_cli() -> None:
    readers = [
        name
        for name, path in modules().items()
        if not name.startswith("harness.cli") and "DISKBENCH_QEMU" in path.read_text()
    ]
    assert readers == []


@dataclass(frozen=True)
class Import:
    """``source`` imports ``target`` (both harness modules) at ``line`` of its file ``path``."""

    source: str
    target: str
    path: Path
    line: int

    def __str__(self) -> str:
        where = self.path.relative_to(HARNESS.parent)
        return f"{where}:{self.line}: {self.source} imports {self.target}"


def _ancestors(name: str) -> set[str]:
    """The packages ``harness.a.b.c`` sits in below ``harness``: ``harness.a``, ``harness.a.b``."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(2, len(parts))}


def imports(name: str, path: Path, known: set[str]) -> list[Import]:
    """The harness modules ``name`` imports, at any level (in functions and TYPE_CHECKING blocks
    too), each once at its first line; importing ``harness.a.b`` runs ``harness.a`` first, so a
    module outside ``harness.a`` imports that package too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], base])
            targets = [full if (full := f"{base}.{a.name}") in known else base for a in node.names]
        for target in targets:
            for module in {target, *(_ancestors(target) - _ancestors(name))}:
                if module in known and module != name:
                    found[module] = min(found.get(module, node.lineno), node.lineno)
    return [Import(name, target, path, line) for target, line in sorted(found.items())]


def import_graph() -> dict[str, list[Import]]:
    mods = modules()
    known = set(mods)
    return {name: imports(name, path, known) for name, path in mods.items()}


def test_no_import_circle_at_any_level() -> None:
    """A package's ``__init__`` may import its modules, and then none of them may import it back."""
    graph = {name: sorted({i.target for i in found}) for name, found in import_graph().items()}
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                circles.append([*trail[trail.index(nxt) :], nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not circles, "\n".join(" -> ".join(circle) for circle in circles)


MAX_PARAMETERS = 8


def _functions(tree: ast.AST, prefix: str) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function in ``tree`` with its dotted name (methods under their class)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((f"{prefix}.{node.name}", node))
            found += _functions(node, f"{prefix}.{node.name}")
        elif isinstance(node, ast.ClassDef):
            found += _functions(node, f"{prefix}.{node.name}")
        else:
            found += _functions(node, prefix)
    return found


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = function.args
    count = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
    return count - (1 if args.args and args.args[0].arg in ("self", "cls") else 0)


def test_no_function_below_the_cli_takes_more_than_eight_parameters() -> None:
    wide = {
        name: count
        for module, path in modules().items()
        if not module.startswith("harness.cli")
        for name, function in _functions(ast.parse(path.read_text()), module)
        if (count := _parameters(function)) > MAX_PARAMETERS
    }
    assert wide == {}


ON_PATH_NAMES = {"QEMU", "QEMU_IMG", "QEMU_IO", "ON_PATH"}
ON_PATH_TEXT = {"qemu-system-x86_64", "qemu-img", "qemu-io"}


def _names_path(node: ast.expr | None) -> bool:
    """Whether a default is the binaries on PATH: their names, as constants or as text, or a
    ``Binaries`` made without saying which."""
    if node is None:
        return False
    if isinstance(node, ast.Name | ast.Attribute):
        return (node.id if isinstance(node, ast.Name) else node.attr) in ON_PATH_NAMES
    if isinstance(node, ast.Constant):
        return node.value in ON_PATH_TEXT
    if isinstance(node, ast.Call):
        called = node.func
        name = called.id if isinstance(called, ast.Name) else getattr(called, "attr", "")
        return name in ("Binaries", "on_path", "default")
    return False


def test_no_parameter_below_the_cli_defaults_to_the_binaries_on_path() -> None:
    """Binaries are a required argument below the CLI, which resolves them once: a default would
    let one side of a gate run the other's (or PATH's) qemu-img unnoticed."""
    found = []
    for module, path in modules().items():
        if module.startswith("harness.cli"):
            continue
        tree = ast.parse(path.read_text())
        for name, function in _functions(tree, module):
            args = function.args
            positional = [*args.posonlyargs, *args.args]
            defaults = list(
                zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
            )
            defaults += [
                (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
            ]
            found += [f"{name}({arg.arg})" for arg, default in defaults if _names_path(default)]
        for node in ast.walk(tree):
            # a dataclass field is a parameter of the class too (VMConfig's qemu, RunOptions' binaries)
            if isinstance(node, ast.ClassDef):
                found += [
                    f"{module}.{node.name}.{item.target.id}"
                    for item in node.body
                    if isinstance(item, ast.AnnAssign)
                    and isinstance(item.target, ast.Name)
                    and _names_path(item.value)
                ]
    assert found == []


def test_only_the_cli_asks_for_the_binaries_on_path() -> None:
    callers = [
        module
        for module, path in modules().items()
        if not module.startswith("harness.cli")
        and module != "harness.subject.binaries"
        and "on_path(" in path.read_text()
    ]
    assert callers == []


# What sits directly under harness/, top to bottom: each imports only from the rows below its
# own (docs/architecture.md draws the same rows).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__",),
    ("cli",),
    ("bisect", "bundle"),
    ("gate", "history"),
    ("report",),
    ("presets",),
    ("sweep",),
    ("rounds", "compare"),
    ("sample",),
    ("record",),
    ("guest",),
    ("debian",),
    ("host",),
    ("subject",),
    ("spec",),
    ("workloads", "backing"),
    ("files", "paths", "progress", "sizes", "units", "untrusted", "data"),
    ("errors",),
)


def _entry(module: str) -> str:
    """The entry directly under harness/ that ``module`` is or sits in (``harness.sample.vm.config``: sample)."""
    return module.split(".")[1]


def test_the_packages_under_harness_import_each_other_only_downward() -> None:
    floor = {entry: depth for depth, row in enumerate(LAYERS) for entry in row}
    entries = {_entry(name) for name in modules() if name != "harness"}
    assert entries == set(floor), "every entry directly under harness/ has one row in LAYERS"
    upward = [
        f"{found} ({_entry(found.target)} is not below {_entry(found.source)} in LAYERS)"
        for name, imported in import_graph().items()
        if name != "harness"
        for found in imported
        # harness/__init__.py holds the version alone and imports nothing: any module may read it
        if found.target != "harness"
        and _entry(found.target) != _entry(name)
        and floor[_entry(found.target)] <= floor[_entry(name)]
    ]
    assert not upward, "imports up the rows:\n" + "\n".join(upward)


def test_harness_itself_holds_at_most_12_modules() -> None:
    direct = sorted(p.name for p in HARNESS.glob("*.py"))
    assert len(direct) <= 12, direct


PAGE = HARNESS.parent / "docs" / "architecture.md"


def test_the_architecture_page_names_every_package_and_only_packages() -> None:
    named = set(re.findall(r"(?<![\w/.-])(harness/(?:[a-z_]+/)+)", PAGE.read_text()))
    packages = {f"{p.parent.relative_to(HARNESS.parent).as_posix()}/" for p in HARNESS.rglob("__init__.py")}
    packages.discard("harness/")
    assert sorted(packages - named) == [], "packages the page does not name"
    assert sorted(named - packages) == [], "names on the page that are no package"


def drawn_rows() -> dict[int, str]:
    """The page's drawing: each row's number and what its column "under harness/" holds."""
    lines = PAGE.read_text().split("```")[1].strip("\n").splitlines()
    start, end = lines[0].index("under harness/"), lines[0].index("wing")
    rows: dict[int, str] = {}
    number = -1
    for line in lines[1:]:
        if line[:start].strip():  # a row's first line; a line without a number goes on with it
            number = int(line[:start])
        rows[number] = f"{rows.get(number, '')} {line[start:end]}"
    return rows


def test_the_architecture_page_draws_the_rows_of_layers() -> None:
    rows = drawn_rows()
    assert sorted(rows) == list(range(len(LAYERS)))
    drawn = {
        number: set(re.findall(r"[\w.]+", text.replace("/", " ").replace(".py", "")))
        for number, text in rows.items()
    }
    assert drawn == {len(LAYERS) - 1 - depth: set(row) for depth, row in enumerate(LAYERS)}


def test_records_are_written_by_the_store_alone() -> None:
    """Modules that hold records write files with ``write_json_atomic`` only where the file is not
    a record: the store writes every record (``write_record``)."""
    writers = {
        name
        for name, path in modules().items()
        if "write_json_atomic" in path.read_text() and "from harness.record" in path.read_text()
    }
    # the store; comparison.json, written beside the records of a compare and of a gate, by its one writer
    assert writers == {"harness.record.store", "harness.compare.comparison"}


# the rooms that build, pass or read a comparison, and the record's cells they compare
COMPARISON_ROOMS = (
    "harness.compare",
    "harness.gate",
    "harness.bisect",
    "harness.cli.compare",
    "harness.cli.gate",
    "harness.cli.bisect",
    "harness.report.exports",
)
# where a JSON object is the thing itself: the comparison's JSON edge and its parts' codec, and
# JSON objects that are neither a record, a sample nor a comparison, each with what it is
JSON_EDGES = {
    "harness.compare.model": "the comparison's parts keep the keys no field names (extra)",
    "harness.compare.jsonpart": "reads and writes a part's JSON object",
    "harness.compare.document.validate_comparison": "checks a loaded comparison.json",
    "harness.compare.subject._dict": "a policy's JSON, as the record's subject keeps it",
    "harness.compare.subject._keys": "a policy's drive, image or options table",
    "harness.compare.subject._policy": "a policy's JSON, as the record's subject keeps it",
    "harness.compare.rules._workload_slug": "a cell's workload, as the record's cell keeps it",
    "harness.bisect.state": "bisect.json, the bisection's own file",
    "harness.gate.spec.GateCell.values": "a gate spec's values of a cell (TOML)",
    "harness.gate.streams": "a replay stream's summary (its own file)",
    "harness.gate.build.BuildInfo.as_dict": "whose build a side ran, as the side's JSON keeps it",
}
_JSON_OBJECT = re.compile(r"\b(dict|Mapping)\[str, Any\]|\bJsonObject\b")


def _json_annotations(name: str, path: Path) -> list[str]:
    """``module.function`` (or ``module.Class.field``) of every parameter, return or dataclass field
    of ``name`` annotated as a JSON object."""
    found = []

    def walk(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, f"{where}.{child.name}")
            elif isinstance(child, ast.FunctionDef):
                args = child.args
                notes = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
                if any(
                    n is not None and _JSON_OBJECT.search(ast.unparse(n)) for n in [*notes, child.returns]
                ):
                    found.append(f"{where}.{child.name}")
            elif (
                isinstance(child, ast.AnnAssign)
                and isinstance(child.target, ast.Name)
                and _JSON_OBJECT.search(ast.unparse(child.annotation))
                and where != name
            ):
                found.append(f"{where}.{child.target.id}")

    walk(ast.parse(path.read_text()), name)
    return found


def test_no_comparison_record_or_sample_travels_as_a_json_object() -> None:
    """The comparison is a :class:`harness.compare.model.Comparison` from where it is built to
    every renderer, export and reader, and the records it compares are ``Record``/``Sample``/
    ``CellInfo``: no function of the comparison's rooms takes or gives a JSON object, save its
    JSON edges."""
    loose = [
        found
        for name, path in modules().items()
        if name.startswith(COMPARISON_ROOMS)
        for found in _json_annotations(name, path)
        if not any(found == edge or found.startswith(f"{edge}.") for edge in JSON_EDGES)
    ]
    assert loose == []


def test_every_test_file_has_a_name_of_its_own() -> None:
    """pytest imports test files by their base name (no package under tests/): two files of one
    name in two folders stop the whole run at collection."""
    tests = Path(__file__).resolve().parents[1]
    names = [p.name for p in tests.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
