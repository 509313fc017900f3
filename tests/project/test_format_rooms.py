"""Each raw format keeps to its room, streaming/io/formats/<format>/: everything else reaches
a format through the registry (formats/registry.py) and the RawFormat protocol
(formats/raw_format.py), so a new format is its folder, one registry entry, the
raw-sources macro and deploy. Checked from the source, as tests/project/test_layers.py reads imports.

The rule, for every module of streaming/ outside streaming/io/formats/ and ALLOWED:
1. no import of a format's folder (`streaming.io.formats.<format>`);
2. no string that is a format's name (`"hudi"`): a format is chosen by the registry, never
   by comparing names;
3. no identifier (name, attribute, argument, function, class, imported module or name)
   holding a format's name. Parquet is exempt here (FILE_FORMAT_WORDS): it is also the file
   format that Spark, DuckDB and pyarrow read and write for the quarantine and the batch
   folders (`.parquet()`, `pyarrow.parquet`).
Comments, docstrings and messages may name a format elsewhere: what an operator reads stays
as it was. streaming/operations/ goes further: it mentions no format at all, not even in a
comment (Parquet, the file format, aside).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from streaming.io.formats.registry import FORMATS

REPO = Path(__file__).resolve().parents[2]
STREAMING = REPO / "streaming"
ROOMS = STREAMING / "io" / "formats"
OPERATIONS = STREAMING / "operations"
# A format's name that is also the plain file format every engine here reads and writes.
FILE_FORMAT_WORDS = {"parquet"}
# Modules that may name a format in code, and why.
ALLOWED = {
    # The data directory's layout names every folder in it, a format's marker folder too
    # (tests/project/test_layout_names.py holds every such name to that one module).
    "streaming/io/layout.py",
    # The Trino engine standing in for Athena reads the tables through Trino's own Hudi
    # connector and catalog, whose name is Trino's, not a choice of raw format.
    "streaming/runtime/athena_local.py",
    # The AWS job writes the production format only, named in its imports alone
    # (test_the_aws_job_names_its_format_in_its_imports_alone): its sink and its jar check
    # are the format's (RawFormat.job_sink, require_jars), its --sync_mode and
    # --retain_hours the Hudi sink's options (deploy/job_arguments.py).
    "streaming/runtime/glue_job.py",
}


def _words(names: set[str]) -> re.Pattern[str]:
    return re.compile("|".join(sorted(map(re.escape, names))), re.IGNORECASE)


def spelled_formats(source: str, names: set[str]) -> list[tuple[int, str]]:
    """Where `source` spells one of the format `names` in code (rules 1 to 3 above)."""
    identifier_words = _words(names - FILE_FORMAT_WORDS) if names - FILE_FORMAT_WORDS else None
    room = re.compile(r"^streaming\.io\.formats\.(" + "|".join(map(re.escape, sorted(names))) + r")(\.|$)")
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        identifiers: list[str] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in names:
            found.append((node.lineno, f"the string {node.value!r}"))
        elif isinstance(node, ast.Name):
            identifiers.append(node.id)
        elif isinstance(node, ast.Attribute):
            identifiers.append(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            identifiers.append(node.name)
        elif isinstance(node, ast.arg):
            identifiers.append(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            identifiers.append(node.arg)
        elif isinstance(node, ast.Import):
            identifiers += [name for alias in node.names for name in (alias.name, alias.asname) if name]
            found += [(node.lineno, f"an import of {alias.name}") for alias in node.names if room.match(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            identifiers += [module, *(name for alias in node.names for name in (alias.name, alias.asname) if name)]
            found += [(node.lineno, f"an import of {module}") for target in
                      (module, *(f"{module}.{alias.name}" for alias in node.names)) if room.match(target)][:1]
        if identifier_words is not None:
            found += [(node.lineno, f"the name {name}") for name in identifiers if identifier_words.search(name)]
    return sorted(set(found))


def _modules(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*.py") if "__pycache__" not in path.parts)


def test_no_module_outside_the_rooms_spells_a_format_in_code() -> None:
    names = set(FORMATS)
    found = [
        f"{path.relative_to(REPO)}:{line}: {what}"
        for path in _modules(STREAMING)
        if ROOMS not in path.parents and path.relative_to(REPO).as_posix() not in ALLOWED
        for line, what in spelled_formats(path.read_text(encoding="utf-8"), names)
    ]
    assert not found, (
        "a raw format named outside streaming/io/formats/ (ask the registry or the RawFormat protocol):\n"
        + "\n".join(found)
    )


def test_no_operations_module_mentions_a_format_at_all() -> None:
    words = _words(set(FORMATS) - FILE_FORMAT_WORDS)
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in _modules(OPERATIONS)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if words.search(line)
    ]
    assert not found, "streaming/operations/ mentions a raw format:\n" + "\n".join(found)


def test_the_aws_job_names_its_format_in_its_imports_alone() -> None:
    """Everything else in the job reaches the format through what it imported."""
    source = (STREAMING / "runtime" / "glue_job.py").read_text(encoding="utf-8")
    imports = {node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, (ast.Import, ast.ImportFrom))}
    spelled = spelled_formats(source, set(FORMATS))
    assert spelled, "the job no longer names its format: remove it from ALLOWED"
    assert not [(line, what) for line, what in spelled if line not in imports]


def test_every_allowed_module_still_needs_its_place() -> None:
    """An entry of ALLOWED whose module no longer names a format is removed, not kept."""
    unneeded = [module for module in sorted(ALLOWED)
                if not spelled_formats((REPO / module).read_text(encoding="utf-8"), set(FORMATS))]
    assert not unneeded, f"remove from ALLOWED: {unneeded}"


@pytest.mark.parametrize("source", [
    'if name == "hudi": pass',
    "from streaming.io.formats.hudi.sink import HudiSink",
    "import streaming.io.formats.parquet.sink",
    "from streaming.io.formats.parquet import sink",
    "from streaming.io.formats import parquet",
    "def hudi_tables(raw_dir): pass",
    "sink = choose(use_hudi=True)",
    "counts = raw.hudi_counts",
    "from lakehouse_dbt.hudi_raw import read_hudi_snapshot",
    'SINKS = ("parquet",)',
])
def test_the_scan_finds_a_format_spelled_in_code(source: str) -> None:
    assert spelled_formats(source, {"hudi", "parquet"}), source


@pytest.mark.parametrize("source", [
    '"""Hudi commits are recognised by their batch marker."""',
    "# the Hudi sink stages nothing",
    'raise OperatorError("--raw-as-of reads Hudi raw tables as of a commit")',
    "df.write.parquet(folder)",
    "import pyarrow.parquet as pq",
    "from streaming.io.formats.registry import format_of_table",
    'SQL = "select * from read_parquet(?)"',
])
def test_the_scan_leaves_prose_the_registry_and_the_file_format(source: str) -> None:
    assert not spelled_formats(source, {"hudi", "parquet"}), source
