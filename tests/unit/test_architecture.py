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


def test_records_are_written_by_the_store_alone() -> None:
    """Modules that hold records write files with ``write_json_atomic`` only where the file is not
    a record: the store writes every record (``write_record``)."""
    writers = {
        name
        for name, path in modules().items()
        if "write_json_atomic" in path.read_text() and "from harness.record" in path.read_text()
    }
    # the store; comparison.json is written beside the records of a compare and of a gate
    assert writers == {"harness.record.store", "harness.compare.comparison", "harness.gate.run"}
