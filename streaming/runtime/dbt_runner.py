"""Runs dbt in-process (dbtRunner) against this repository's project and profiles."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from dbt.cli.main import dbtRunner, dbtRunnerResult

from lakehouse_dbt.pii_key import KEY_ENV, ensure_local_key
from streaming.errors import OperatorError
from streaming.io.layout import DataLayout, dbt_env

PROJECT_DIR = Path(__file__).resolve().parents[2]


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
    create_local_pii_key: bool = True,
) -> dbtRunnerResult:
    """Runs `dbt <args>` with the local data directory `data_dir`.

    The project and profiles are this repository's; target/ and logs/ go under
    `<data_dir>/dbt` so concurrent runs on different data directories do not clash.
    The environment is restored afterwards. The caller checks `result.success`.

    On the local target without env LAKEHOUSE_PII_KEY, the data directory's own PII key
    is created on first use (lakehouse_dbt.pii_key); `create_local_pii_key=False` uses
    only a key that exists already, as a plain `dbt` command does.
    """
    data_path = Path(data_dir).resolve()
    data_path.mkdir(parents=True, exist_ok=True)
    if create_local_pii_key and target == "local" and KEY_ENV not in {**os.environ, **(extra_env or {})}:
        ensure_local_key(data_path)
    env = {
        "LAKEHOUSE_DBT_TARGET": target,
        "DBT_PROFILES_DIR": str(PROJECT_DIR),
        # The data directory, and its active raw location (it follows `lakehouse switch`).
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
                "--target-path", str(DataLayout(data_path).dbt_target),
                "--log-path", str(DataLayout(data_path).dbt_logs),
            ]
        )
    finally:
        _close_duckdb_environment()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def failure_summary(result: dbtRunnerResult, *, most: int = 10) -> str:
    """dbt's own words for a failed invocation: the exception it returned (a usage error
    such as an unknown option, raised before dbt logs anything), else each node that
    errored or failed with the first line of its message."""
    if result.exception is not None:
        return str(result.exception)
    node_results = getattr(result.result, "results", None) or []
    failed = [node for node in node_results if str(node.status) in ("error", "fail", "runtime error")]
    if not failed:
        return "dbt reported failure without a failing node"
    lines = [f"{len(failed)} node(s) failed:"]
    for node in failed[:most]:
        first_lines = [line.strip() for line in str(node.message or "").splitlines() if line.strip()][:2]
        lines.append(f"  {node.node.unique_id} ({node.status}): {' / '.join(first_lines)}")
    if len(failed) > most:
        lines.append(f"  ... and {len(failed) - most} more (dbt's output above lists them all)")
    return "\n".join(lines)


def reprocess_args(start: date, end: date, extra_vars: Mapping[str, Any] | None = None) -> list[str]:
    """Arguments that make `dbt build`/`dbt run` redo the event days [start, end): the
    current-state staging merges through vars reprocess_from/reprocess_to, the
    microbatch marts through --event-time-start/--event-time-end. dbt keeps only the
    last --vars, so other vars of the run go in `extra_vars`."""
    if start >= end:
        raise ValueError(f"reprocess range is empty: {start} .. {end} (end exclusive)")
    dbt_vars = {**(extra_vars or {}), "reprocess_from": start.isoformat(), "reprocess_to": end.isoformat()}
    return [
        "--vars", json.dumps(dbt_vars),
        "--event-time-start", start.isoformat(),
        "--event-time-end", end.isoformat(),
    ]


class DbtFailed(OperatorError):
    """A dbt command failed; the message carries dbt's own words and the log's path."""


def run_dbt_command(data_dir: Path, dbt_args: Sequence[str]) -> None:
    """`lakehouse dbt <args>`: dbt on this repository's project with the local data directory.

    dbt writes its own progress; a failure ends with dbt's own error (failure_summary),
    not only a pointer to a log that a usage error never writes.
    """
    if not dbt_args:
        raise DbtFailed("name a dbt command, e.g. `lakehouse dbt build`")
    if not data_dir.is_dir():
        # dbt would create it empty and build nothing from it; a mistyped path is the likely cause.
        raise DbtFailed(f"data directory {data_dir} does not exist; give --data-dir, or run `lakehouse demo`")
    result = run_dbt(list(dbt_args), data_dir)
    if not result.success:
        log_file = DataLayout(data_dir).dbt_logs / "dbt.log"
        where = f"\nfull log: {log_file}" if log_file.is_file() else ""
        raise DbtFailed(f"dbt {' '.join(dbt_args)} failed: {failure_summary(result)}{where}")
