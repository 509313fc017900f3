"""dbt on both engines for the athena tier: dbt-trino's runs on the local Trino (in the
venv of its own that `make test-athena` fills) and each engine's values in one comparable
form, with the tables the two builds made read back."""
from __future__ import annotations

import base64
import json
import os
import subprocess
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from streaming.runtime.athena_local import CATALOG, query

REPO = Path(__file__).resolve().parents[2]
# dbt-trino 1.11.0 beside the project's dbt pins, in a venv of its own (make test-athena).
TRINO_DBT = REPO / ".venv-trino" / "bin" / "dbt"

def event_window(port: int, change_logs: list[str]) -> list[str]:
    """The event days of the landed changes (end exclusive): without it the daily microbatch
    mart runs one batch per day from activity_begin to today on each engine."""
    union = " union all ".join(f'select _event_ts from "{CATALOG}"."raw"."{table}"' for table in change_logs)
    _, rows = query(port, f"select cast(min(_event_ts) as date), cast(max(_event_ts) as date) + interval '1' day "
                          f"from ({union})")
    first, end = rows[0]
    return ["--event-time-start", first, "--event-time-end", end]


def trino_dbt(port: int, args: list[str], work: Path) -> subprocess.CompletedProcess:
    if not TRINO_DBT.is_file():
        pytest.fail(f"{TRINO_DBT} is missing: `make test-athena` installs dbt-trino into .venv-trino")
    environment = {**os.environ, "LAKEHOUSE_TRINO_PORT": str(port), "LAKEHOUSE_RAW_DATABASE": "raw",
                   "DBT_PROFILES_DIR": str(REPO)}
    return subprocess.run(
        [str(TRINO_DBT), *args, "--project-dir", str(REPO), "--target", "trino",
         "--target-path", str(work / "target"), "--log-path", str(work / "logs")],
        env=environment, cwd=REPO, capture_output=True, text=True, check=False)


def comparable(value, trino_type: str | None = None):
    """One cell in a form both engines' values map to: Trino's JSON by its type, DuckDB's
    Python values by theirs. Timestamps to the microsecond, decimals by value."""
    if value is None:
        return None
    if trino_type is not None:
        if trino_type.startswith("timestamp"):
            text = value.removesuffix(" UTC")
            whole, _, fraction = text.partition(".")
            return f"{whole}.{fraction[:6].ljust(6, '0')}"
        if trino_type.startswith("decimal"):
            return str(Decimal(value).normalize())
        if trino_type == "varbinary":
            return base64.b64decode(value).hex()
        if trino_type in ("double", "real"):
            return round(float(value), 9)
        if trino_type.startswith("array("):
            return [comparable(item, trino_type[len("array("):-1]) for item in value]
        if trino_type.startswith("row("):
            return [comparable(item, field) for item, field in zip(value, row_field_types(trino_type))]
        return value
    if isinstance(value, datetime):
        return f"{value:%Y-%m-%d %H:%M:%S}.{value.microsecond:06d}"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value.normalize())
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, list):
        return [comparable(item) for item in value]
    if isinstance(value, dict):
        return [comparable(item) for item in value.values()]
    return value


def row_field_types(trino_type: str) -> list[str]:
    body, fields, depth, start = trino_type[len("row("):-1], [], 0, 0
    for index, char in enumerate(body + ","):
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            fields.append(body[start:index].strip().split(" ", 1)[1])
            start = index + 1
    return fields


def trino_table(port: int, schema: str, table: str, left_out: set[str]) -> tuple[list[str], list[str]]:
    return trino_rows(port, f'select * from "{CATALOG}"."{schema}"."{table}"', left_out)


def trino_rows(port: int, sql: str, left_out: set[str]) -> tuple[list[str], list[str]]:
    """The column names (sorted) and the rows (sorted, each cell comparable) of a query on Trino."""
    columns, rows = query(port, sql)
    kept = [(index, column) for index, column in enumerate(columns) if column["name"] not in left_out]
    names = sorted(column["name"] for _, column in kept)
    order = sorted(kept, key=lambda pair: pair[1]["name"])
    return names, sorted(json.dumps([comparable(row[index], column["type"]) for index, column in order])
                         for row in rows)


def duckdb_table(database: Path, schema: str, table: str, left_out: set[str]) -> tuple[list[str], list[str]]:
    with duckdb.connect(str(database), read_only=True) as con:
        cursor = con.execute(f'select * from "{schema}"."{table}"')
        names = [column[0] for column in cursor.description]
        rows = cursor.fetchall()
    kept = sorted((name, index) for index, name in enumerate(names) if name not in left_out)
    return [name for name, _ in kept], sorted(json.dumps([comparable(row[index]) for _, index in kept])
                                              for row in rows)
