"""The project's layers, checked from its source: a lower layer never imports a higher
one, and no two modules import each other, directly or round a longer loop. Imports
inside functions and under TYPE_CHECKING count: they are dependencies all the same, and
so do relative imports, read as the absolute names they stand for.

lakehouse_dbt is the lowest layer and imports none of `streaming`: it runs inside dbt's
own process, and in the dbt image, which holds its __init__, env, pii_key and
athena_pii_key and no `streaming` at all (tests/deploy/test_dbt_image.py). Above it,
streaming.errors, streaming.atomic_files and streaming.s3_locations are the base every `streaming` layer may use.
benchmarks/ and deploy/ sit on top: they may import any layer, nothing imports them,
and neither imports the other (docs/development.md, "Layout of the code")."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE_ROOTS = {
    "streaming": REPO / "streaming",
    "lakehouse_dbt": REPO / "dbt_project" / "lakehouse_dbt",
    "benchmarks": REPO / "benchmarks",
    "deploy": REPO / "deploy",
}
# Lowest first; a module may import its own layer and the ones before it.
LAYERS = (
    ("lakehouse_dbt",),
    ("streaming.errors", "streaming.atomic_files", "streaming.s3_locations"),
    ("streaming.contracts",),
    ("streaming.pipeline",),
    ("streaming.io",),
    ("streaming.runtime",),
    ("streaming.samples",),
    ("streaming.operations",),
    ("streaming.cli",),
)
# Above every layer, side by side: each may import any layer and its own package only.
TOP_PACKAGES = ("benchmarks", "deploy")


def module_name(path: Path, package: str, root: Path) -> str:
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(path, package, root): path
        for package, root in PACKAGE_ROOTS.items()
        for path in sorted(root.rglob("*.py"))
    }


def imported_modules(path: Path, known: set[str], module: str) -> set[str]:
    """Project modules named by the import statements of `module`'s file (a `from
    package import name` counts as the submodule when `name` is one)."""
    # A relative import starts from the importing module's package: the module itself
    # when it is a package's __init__.py.
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = absolute_module(node, package, module)
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {name for name in found if name in known}


def absolute_module(node: ast.ImportFrom, package: str, module: str) -> str:
    """The module a `from ... import` statement reads names from, as an absolute name."""
    if node.level == 0:
        assert node.module is not None
        return node.module
    parts = package.split(".")
    if node.level > len(parts):
        raise AssertionError(f"{module}: a relative import {node.level} levels up leaves the top package")
    base = ".".join(parts[: len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def top_package(module: str) -> str | None:
    return next((top for top in TOP_PACKAGES if module == top or module.startswith(top + ".")), None)


def layer_of(module: str) -> int:
    if top_package(module):
        return len(LAYERS)
    for index, prefixes in enumerate(LAYERS):
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return index
    raise AssertionError(f"{module} belongs to no layer: add its package to LAYERS in {__file__}")


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {name: imported_modules(path, known, name) - {name} for name, path in modules.items()}


def forbidden_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a higher layer, or of another top package."""
    found = []
    for module, targets in graph.items():
        if module == "streaming":
            continue
        for target in sorted(targets - {"streaming"}):
            if layer_of(target) > layer_of(module) or top_package(target) not in (None, top_package(module)):
                found.append(f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})")
    return found


def test_every_module_sits_in_a_layer() -> None:
    for module in project_modules():
        if module not in ("streaming",):
            layer_of(module)


def test_no_layer_imports_a_higher_one() -> None:
    forbidden = forbidden_imports(import_graph())
    assert not forbidden, "imports against the layer order:\n" + "\n".join(forbidden)


@pytest.mark.parametrize("module, target", [
    ("lakehouse_dbt.pii_key", "streaming.errors"),
    ("lakehouse_dbt.env", "streaming.io.layout"),
    ("streaming.cli.data", "benchmarks.run"),
    ("streaming.runtime.package_zip", "deploy.app"),
    ("deploy.app", "benchmarks.measure"),
    ("benchmarks.run", "deploy.config"),
])
def test_the_layer_rule_refuses(module: str, target: str) -> None:
    assert forbidden_imports({module: {target}})


@pytest.mark.parametrize("module, target", [
    ("streaming.errors", "lakehouse_dbt.env"),
    ("streaming.io.layout", "lakehouse_dbt.env"),
    ("benchmarks.run", "streaming.cli"),
    ("deploy.app", "streaming.runtime.glue_job"),
    ("deploy.app", "deploy.stacks.lakehouse"),
])
def test_the_layer_rule_allows(module: str, target: str) -> None:
    assert not forbidden_imports({module: {target}})


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


KNOWN = {"streaming", "streaming.io", "streaming.io.layout", "streaming.io.sinks", "streaming.cli",
         "streaming.cli.data"}


@pytest.mark.parametrize("source, expected", [
    ("from streaming.io import layout", {"streaming.io", "streaming.io.layout"}),
    ("def f():\n    import streaming.cli", {"streaming.cli"}),
    ("from streaming.io.layout import DataLayout", {"streaming.io.layout"}),
    # Relative imports, from the module streaming.io.probe.
    ("from ..cli import build_parser", {"streaming.cli"}),
    ("from ..cli.data import add_commands", {"streaming.cli.data"}),
    ("from . import layout", {"streaming.io", "streaming.io.layout"}),
    ("from .sinks import QuarantineWriter", {"streaming.io.sinks"}),
    ("from .. import cli", {"streaming", "streaming.cli"}),
])
def test_imports_inside_functions_and_from_packages_are_seen(tmp_path: Path, source: str, expected: set[str]) -> None:
    module = tmp_path / "probe.py"
    module.write_text(source)
    assert imported_modules(module, KNOWN, "streaming.io.probe") == expected


def test_a_package_s_relative_imports_start_from_the_package_itself(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text("from .layout import DataLayout\nfrom ..cli import data")
    assert imported_modules(init, KNOWN, "streaming.io") == {"streaming.io.layout", "streaming.cli", "streaming.cli.data"}
