"""dbt on Athena's engine: the project built by dbt-trino on the local Trino, with the Athena
form of every dispatched macro (macros/cross_db/trino_as_athena.sql), from the raw Hudi
tables Hudi's sync registered, compared with DuckDB's build of the same data cell by cell;
the data tests of both engines compared by their results; and the unit tests run on both,
where each passes or is one that its YAML enables for DuckDB alone.

The one column left out is named in BUILD_TIME_COLUMNS: the time of the build itself.
"""
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

from lakehouse_dbt.pii_key import key_of_data_dir
from streaming.io.layout import DataLayout
from streaming.runtime.athena_local import CATALOG, query
from streaming.runtime.dbt_runner import DbtFailed, run_dbt_command

pytestmark = pytest.mark.athena

REPO = Path(__file__).resolve().parents[2]
# dbt-trino 1.11.0 beside the project's dbt pins, in a venv of its own (make test-athena).
TRINO_DBT = REPO / ".venv-trino" / "bin" / "dbt"
# mart_freshness.built_at is when the build ran (current_timestamp), not data.
BUILD_TIME_COLUMNS = {"mart_freshness": {"built_at"}}
NOT_UNIT_TESTS = ["--exclude-resource-type", "unit_test"]


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


@pytest.fixture(scope="module")
def both_built(engine, synced, tmp_path_factory):
    """DuckDB's build and Trino's build of every model and seed (no tests yet)."""
    _, state = engine
    port = state["trino_port"]
    window = event_window(port, [table for table in synced.synced_tables if table.endswith("_changes")])
    run_dbt_command(synced.layout.root, ["build", "--exclude-resource-type", "test", "unit_test", *window],
                    report=lambda _: None)
    # The Athena form of the pseudonyms reads the PII key from a one-row table (docs/pii.md);
    # the same key as DuckDB's, so that keyed pseudonyms compare too.
    key = key_of_data_dir(synced.layout.root).decode()
    query(port, f'create schema if not exists "{CATALOG}"."lakehouse_staging"')
    query(port, f"""create table "{CATALOG}"."lakehouse_staging"."pii_key" as select '{key.replace("'", "''")}' as pii_key""")
    work = tmp_path_factory.mktemp("dbt-trino")
    built = trino_dbt(port, ["build", "--exclude-resource-type", "test", "unit_test", *window], work)
    assert built.returncode == 0, built.stdout[-4000:]
    return window, work


def built_models(work: Path) -> list[tuple[str, str, str]]:
    """(name, schema, table) of every model the Trino build made, from its manifest."""
    manifest = json.loads((work / "target" / "manifest.json").read_text())
    return sorted((node["name"], node["schema"], node["alias"]) for node in manifest["nodes"].values()
                  if node["resource_type"] == "model" and node["config"]["materialized"] != "ephemeral")


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
    columns, rows = query(port, f'select * from "{CATALOG}"."{schema}"."{table}"')
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


def test_every_model_built_on_trino_equals_duckdbs_build(engine, synced, both_built):
    _, state = engine
    _, work = both_built
    database = synced.layout.root / "lakehouse.duckdb"
    models = built_models(work)
    assert len(models) > 15
    differences = {}
    for name, schema, table in models:
        left_out = BUILD_TIME_COLUMNS.get(name, set())
        trino_names, trino_rows = trino_table(state["trino_port"], schema, table, left_out)
        duckdb_names, duckdb_rows = duckdb_table(database, schema, table, left_out)
        if trino_names != duckdb_names:
            differences[name] = f"columns: only Trino {set(trino_names) - set(duckdb_names)}, " \
                                f"only DuckDB {set(duckdb_names) - set(trino_names)}"
        elif trino_rows != duckdb_rows:
            only_trino = sorted(set(trino_rows) - set(duckdb_rows))
            only_duckdb = sorted(set(duckdb_rows) - set(trino_rows))
            differences[name] = (f"{len(trino_rows)} rows on Trino, {len(duckdb_rows)} on DuckDB; "
                                 f"only Trino {only_trino[:2]}, only DuckDB {only_duckdb[:2]}")
    assert differences == {}


def test_the_data_tests_give_the_same_results_on_both_engines(engine, synced, both_built):
    _, state = engine
    _, work = both_built
    try:
        run_dbt_command(synced.layout.root, ["test", *NOT_UNIT_TESTS], report=lambda _: None)
    except DbtFailed:
        pass  # a failing data test is a result to compare; a run that never tested is caught below
    trino_dbt(state["trino_port"], ["test", *NOT_UNIT_TESTS], work)

    on_duckdb = recorded_results(DataLayout(synced.layout.root).dbt_target / "run_results.json", "test.")
    on_trino = recorded_results(work / "target" / "run_results.json", "test.")
    assert len(on_duckdb) > 50
    assert on_trino == on_duckdb


def recorded_results(run_results: Path, kind: str) -> dict[str, tuple[str, int | None]]:
    """(status, failures) of each node of `kind` ("test.", "unit_test.") a dbt run recorded."""
    return {result["unique_id"]: (result["status"], result.get("failures"))
            for result in json.loads(run_results.read_text())["results"]
            if result["unique_id"].startswith(kind)}


def test_the_unit_tests_pass_on_both_engines_and_trino_skips_none(engine, synced, both_built):
    """A fixture in DuckDB's dialect alone would fail on Athena, and skip the models
    after it in a plain `dbt build`; a unit test enabled for DuckDB alone is left out."""
    _, state = engine
    _, work = both_built
    run_dbt_command(synced.layout.root, ["test", "--select", "test_type:unit"], report=lambda _: None)
    on_duckdb = recorded_results(DataLayout(synced.layout.root).dbt_target / "run_results.json", "unit_test.")
    tested = trino_dbt(state["trino_port"], ["test", "--select", "test_type:unit"], work)
    on_trino = recorded_results(work / "target" / "run_results.json", "unit_test.")
    manifest = json.loads((work / "target" / "manifest.json").read_text())
    disabled_on_trino = {unique_id for unique_id in manifest["disabled"] if unique_id.startswith("unit_test.")}
    assert len(on_duckdb) > 10
    assert {status for status, _ in on_duckdb.values()} == {"pass"}
    assert {unique_id: status for unique_id, (status, _) in on_trino.items()} == {
        unique_id: "pass" for unique_id in on_duckdb if unique_id not in disabled_on_trino}, tested.stdout[-3000:]
