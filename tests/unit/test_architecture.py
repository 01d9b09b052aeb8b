"""The house keeps its plan: room sizes, where argparse and the environment may be used, no import circle."""

from __future__ import annotations

import ast
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


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The harness modules ``name`` imports at module level (TYPE_CHECKING blocks included)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in tree.body:
        stack = [node]
        while stack:
            item = stack.pop()
            if isinstance(item, ast.If):
                stack.extend(item.body)
            elif isinstance(item, ast.Import):
                found.update(a.name for a in item.names if a.name in known)
            elif isinstance(item, ast.ImportFrom):
                base = item.module or ""
                if item.level:
                    parts = package.split(".")
                    base = ".".join([*parts[: len(parts) - item.level + 1], base])
                for alias in item.names:
                    full = f"{base}.{alias.name}"
                    found.add(full if full in known else base)
    return {m for m in found if m in known and m != name}


def test_no_import_circle() -> None:
    mods = modules()
    known = set(mods)
    graph = {name: _imports(name, path, known) for name, path in mods.items()}
    # a package importing its own submodules (re-exports) is how packages are made, not a circle
    for name in graph:
        graph[name] = {
            m for m in graph[name] if not m.startswith(name + ".") and not name.startswith(m + ".")
        }
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append([*trail[trail.index(nxt) :], nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert circles == []


MAX_PARAMETERS = 8
# still over MAX_PARAMETERS, each to be cut down by the change that owns it (records as values
# retypes the cell loop's and the comparison document's arguments; make_cell takes the cell's
# spellings by name): a function that grows past the limit, or one of these mended, fails here
STILL_WIDE = {
    "harness.compare.document.build_comparison",
    "harness.rounds.cell.run_cell",
    "harness.rounds.session.Session.run_cell",
    "harness.spec.make_cell",
}


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
    assert set(wide) == STILL_WIDE, wide


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
