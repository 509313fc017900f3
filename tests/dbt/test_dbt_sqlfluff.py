"""sqlfluff lints every model, rendered by the dbt templater (offline, local target)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.runtime.dbt_runner import PROJECT_DIR

pytestmark = pytest.mark.dbt


def test_sqlfluff_lint_passes_on_all_models(tmp_path: Path) -> None:
    sqlfluff = Path(sys.executable).parent / "sqlfluff"
    env = {
        **os.environ,
        "LAKEHOUSE_DATA_DIR": str(tmp_path),
        "DBT_TARGET_PATH": str(tmp_path / "target"),
        "DBT_LOG_PATH": str(tmp_path / "logs"),
    }
    completed = subprocess.run(
        [str(sqlfluff), "lint", "dbt_project/models", "--format", "json", "--nofail"],
        cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=300, check=True,
    )
    reports = json.loads(completed.stdout)
    linted = {Path(report["filepath"]).name for report in reports}
    assert {"stg_dynamodb__customers.sql", "int_orders__lines_unnested.sql", "fct_orders.sql"} <= linted
    violations = [
        f"{report['filepath']}:{v['start_line_no']} {v['code']} {v['description']}"
        for report in reports
        for v in report["violations"]
    ]
    assert violations == []
