"""Runs dbt in-process (dbtRunner) against this repository's project and profiles."""

from __future__ import annotations

import os
from pathlib import Path

from dbt.cli.main import dbtRunner, dbtRunnerResult

from streaming.reprocess import dbt_env

PROJECT_DIR = Path(__file__).resolve().parent.parent


def _close_duckdb_environment() -> None:
    """dbt-duckdb keeps one DuckDB instance per process, open after the command
    ends; DuckDB lets a file be attached only once per process, so close it for the
    caller (and the next dbt command) to open the file again."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    with DuckDBConnectionManager._LOCK:
        environment = DuckDBConnectionManager._ENV
        if environment is not None:
            environment.close()
            DuckDBConnectionManager._ENV = None


def run_dbt(
    args: list[str],
    data_dir: Path | str,
    *,
    target: str = "local",
    extra_env: dict[str, str] | None = None,
) -> dbtRunnerResult:
    """Runs `dbt <args>` with the local data directory `data_dir`.

    The project and profiles are this repository's; target/ and logs/ go under
    `<data_dir>/dbt` so concurrent runs on different data directories do not clash.
    The environment is restored afterwards. The caller checks `result.success`.
    """
    data_path = Path(data_dir).resolve()
    data_path.mkdir(parents=True, exist_ok=True)
    env = {
        "LAKEHOUSE_DATA_DIR": str(data_path),
        "LAKEHOUSE_DBT_TARGET": target,
        "DBT_PROFILES_DIR": str(PROJECT_DIR),
        # Follow `lakehouse switch`: dbt reads the active raw location.
        **dbt_env(data_path),
        **(extra_env or {}),
    }
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        return dbtRunner().invoke(
            [
                *args,
                "--project-dir", str(PROJECT_DIR),
                "--profiles-dir", str(PROJECT_DIR),
                "--target-path", str(data_path / "dbt" / "target"),
                "--log-path", str(data_path / "dbt" / "logs"),
            ]
        )
    finally:
        _close_duckdb_environment()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
