"""Every folder and file name of a data directory is written once: in streaming/io/layout.py,
or, for the three a lower layer needs, in the one module below it that layout.py lists
(the contract registry's folder, dbt's database and the PII key). A name written again
elsewhere is a second place for the layout to drift, so the scan below fails on one used
for a path: joined with `/`, given to Path(), joinpath() or uri(), spelled after a `/`
in an f-string, or assigned to a constant of its own."""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path, PurePath

import pytest

from lakehouse_dbt import data_dir as dbt_data_dir
from streaming.contracts import evolution
from streaming.io import layout

REPO = Path(__file__).resolve().parents[2]
SCANNED = [REPO / "streaming", REPO / "benchmarks", REPO / "deploy", REPO / "dbt_project" / "lakehouse_dbt"]
LAYOUT_MODULE = REPO / "streaming" / "io" / "layout.py"
# A layout name that is also another thing's name, where it is that other thing.
NOT_THE_DATA_DIR = {
    # Its scratch folder is a temporary directory of its own, not a data directory's replay.
    ("streaming/operations/reconcile.py", "records.jsonl"),
    # dbt's target folder of the project (where the shared parse is kept), not of a data directory.
    ("streaming/runtime/dbt_runner.py", "target"),
    # The bucket prefixes of Athena's query results and the marts, not the data directory's dbt/.
    ("deploy/stacks/parts/storage.py", "dbt"),
    # The local engine's own log folder, inside <data dir>/athena-local/, not dbt's.
    ("streaming/runtime/athena_local.py", "logs"),
    # Work folders of the benchmarks named after what they measure, each a data directory itself.
    ("benchmarks/drills.py", "dbt"),
    ("benchmarks/run.py", "dbt"),
}
_NAME_CONSTANT = re.compile(r"_(FOLDER|FILE|MARKER)$")
_PATH_CALLS = {"Path", "PurePath", "joinpath", "uri", "join"}


def _layout_names() -> dict[str, Path]:
    """Each data-dir name -> the one module that may spell it."""
    owners: dict[str, Path] = {}
    for name, value in vars(layout).items():
        if _NAME_CONSTANT.search(name) and isinstance(value, str):
            owners[value] = LAYOUT_MODULE
    owners[evolution.REGISTRY_FOLDER] = Path(evolution.__file__)
    # The key file's folder: the file's own name is also the Glue table Athena reads the key from.
    for value in (dbt_data_dir.DATABASE_FILE, PurePath(dbt_data_dir.PII_KEY_FILE).parts[0]):
        owners[value] = Path(dbt_data_dir.__file__)
    return owners


NAMES = _layout_names()


def _parts(text: str) -> list[str]:
    return [part for part in text.split("/") if part]


def literal_paths(source: str) -> Iterator[tuple[int, str]]:
    """(line, name) of every data-dir name in `source` used for a path or a constant of its own."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            texts = [side.value for side in (node.left, node.right)
                     if isinstance(side, ast.Constant) and isinstance(side.value, str)]
        elif isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if called in _PATH_CALLS:
                texts = [arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, str) and node.value.value in NAMES:
                yield node.lineno, node.value.value
        elif isinstance(node, ast.JoinedStr):
            # `f"{root}/raw/..."`: the text right after a value, up to a space, is a path.
            for value, piece in zip(node.values, node.values[1:]):
                if (isinstance(value, ast.FormattedValue) and isinstance(piece, ast.Constant)
                        and str(piece.value).startswith("/")):
                    texts.append(str(piece.value).split()[0])
        for text in texts:
            for part in _parts(text):
                if part in NAMES:
                    yield node.lineno, part


def _modules() -> Iterator[Path]:
    for folder in SCANNED:
        yield from sorted(folder.rglob("*.py"))


def test_no_module_but_the_layout_spells_a_data_dir_name_for_a_path():
    found = []
    for module in _modules():
        relative = module.relative_to(REPO).as_posix()
        for line, name in literal_paths(module.read_text(encoding="utf-8")):
            if NAMES[name] == module or (relative, name) in NOT_THE_DATA_DIR:
                continue
            found.append(f"{relative}:{line}: {name!r}")
    assert not found, (
        "data-dir names written outside streaming/io/layout.py (use its constants or DataLayout's paths):\n"
        + "\n".join(found)
    )


@pytest.mark.parametrize("source", [
    'raw_dir = data_dir / "raw"',
    "message = f\"{data_root / 'raw'} holds batches\"",
    'message = f"{target}/raw has no tables"',
    'IDENTITY_FILE = "_stream.json"',
    'DEMO_MARKER = ".lakehouse-demo"',
    'database = Path(data_dir) / "lakehouse.duckdb"',
    'key = Path("secrets") / "pii_key"',
    'location = f"{root}/_contracts"',
    'moved = uri(root, "checkpoints")',
    'log_file = data_dir / "dbt/logs/dbt.log"',
    'metadata = f"{table_path}/.hoodie/hoodie.properties"',
])
def test_the_scan_finds_a_literal_data_dir_name_in_a_path(source):
    assert list(literal_paths(source)), source


@pytest.mark.parametrize("source", [
    'with hold_data_dir(root, "demo"): pass',
    'commands.add_parser("quarantine", help="the quarantine")',
    'counts = {"quarantine": 0, "landing": 1}',
    'raw = layout.raw / contract.changes_table',
])
def test_the_scan_leaves_the_same_words_used_for_other_things(source):
    assert not list(literal_paths(source)), source
