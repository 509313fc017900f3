"""Test files import helpers, never each other: code two test files share lives in a
helper module at the top of tests/ (docs/development.md, "Where tests live"), so a test
file can move with its package without breaking another."""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imported_test_modules(source: str) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return [name for name in names if name.split(".")[-1].startswith("test_")]


def test_no_test_file_imports_another():
    offenders = {
        str(path.relative_to(TESTS)): found
        for path in sorted(TESTS.rglob("test_*.py"))
        if (found := imported_test_modules(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, f"move what these import into a helper module at the top of tests/: {offenders}"


def test_the_check_sees_both_import_forms():
    assert imported_test_modules("from test_decode import change_record\nimport test_hudi_sink\n") == [
        "test_decode", "test_hudi_sink"]
    assert imported_test_modules("from change_records import change_record\nimport pytest\n") == []
