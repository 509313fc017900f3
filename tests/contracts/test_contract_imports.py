"""Contracts load where Spark is absent: only spark_schema.py of streaming/contracts/
imports pyspark, so the CDK app and other readers of contracts need no Spark."""
from __future__ import annotations

import ast
from pathlib import Path

from cli_processes import REPO, fresh_python

CONTRACTS = REPO / "streaming" / "contracts"


def test_the_model_and_the_loader_load_the_contracts_without_pyspark():
    # A None entry makes any `import pyspark` raise ImportError in the fresh interpreter,
    # so an import inside a function that loading runs is caught as well.
    probe = (
        "import sys; sys.modules['pyspark'] = None; "
        "import streaming.contracts.model, streaming.contracts.names, streaming.contracts.evolution; "
        "from streaming.contracts.loader import load_contracts; "
        "print(len(load_contracts()))"
    )
    completed = fresh_python(probe)
    assert completed.returncode == 0, completed.stderr
    assert int(completed.stdout) > 0


def _imports_pyspark(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "pyspark" for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "pyspark":
            return True
    return False


def test_spark_schema_is_the_only_contracts_module_importing_pyspark():
    assert [path.name for path in sorted(CONTRACTS.glob("*.py")) if _imports_pyspark(path)] == ["spark_schema.py"]
