"""The package's layers, checked from its source: a lower layer never imports a higher
one, and no two modules import each other, directly or round a longer loop. Imports
inside functions and under TYPE_CHECKING count: they are dependencies all the same.

streaming.errors and streaming.atomic_files are the base every layer may use; the
lakehouse_dbt package runs inside dbt's own image without `streaming`, so it imports
none of it (docs/architecture.md, "Layers")."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE_ROOTS = {"streaming": REPO / "streaming", "lakehouse_dbt": REPO / "dbt_project" / "lakehouse_dbt"}
# Lowest first; a module may import its own layer and the ones before it.
LAYERS = (
    ("lakehouse_dbt", "streaming.errors", "streaming.atomic_files"),
    ("streaming.contracts",),
    ("streaming.pipeline",),
    ("streaming.io",),
    ("streaming.runtime",),
    ("streaming.samples",),
    ("streaming.operations",),
    ("streaming.cli",),
)


def module_name(path: Path, package: str, root: Path) -> str:
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(path, package, root): path
        for package, root in PACKAGE_ROOTS.items()
        for path in sorted(root.rglob("*.py"))
    }


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Project modules named by the file's import statements (a `from package import
    name` counts as the submodule when `name` is one)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name in known}


def layer_of(module: str) -> int:
    for index, prefixes in enumerate(LAYERS):
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return index
    raise AssertionError(f"{module} belongs to no layer: add its package to LAYERS in {__file__}")


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {name: imported_modules(path, known) - {name} for name, path in modules.items()}


def test_every_module_sits_in_a_layer() -> None:
    for module in project_modules():
        if module not in ("streaming",):
            layer_of(module)


def test_no_layer_imports_a_higher_one() -> None:
    upward = [
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        for module, targets in import_graph().items()
        if module != "streaming"
        for target in sorted(targets)
        if target != "streaming" and layer_of(target) > layer_of(module)
    ]
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert not found, "modules importing each other: " + "; ".join(" <-> ".join(group) for group in found)


def test_cycle_finder_finds_a_loop_of_three() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("source, expected", [
    ("from streaming.io import layout", {"streaming.io", "streaming.io.layout"}),
    ("def f():\n    import streaming.cli", {"streaming.cli"}),
    ("from streaming.io.layout import DataLayout", {"streaming.io.layout"}),
])
def test_imports_inside_functions_and_from_packages_are_seen(tmp_path: Path, source: str, expected: set[str]) -> None:
    module = tmp_path / "probe.py"
    module.write_text(source)
    assert imported_modules(module, {"streaming.io", "streaming.io.layout", "streaming.cli"}) == expected
