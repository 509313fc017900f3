"""dbt on Athena's engine: the project built by dbt-trino on the local Trino, with the Athena
form of every dispatched macro (macros/cross_db/trino_as_athena.sql), from the raw Hudi
tables Hudi's sync registered, compared with DuckDB's build of the same data cell by cell;
the data tests of both engines compared by their results; and the unit tests run on both,
where each passes or is one that its YAML enables for DuckDB alone.

The one column left out is named in BUILD_TIME_COLUMNS: the time of the build itself.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt_builds import duckdb_table, trino_dbt, trino_table

from streaming.io.layout import DataLayout
from streaming.runtime.dbt_runner import DbtFailed, run_dbt_command

pytestmark = pytest.mark.athena

# mart_freshness.built_at is when the build ran (current_timestamp), not data.
BUILD_TIME_COLUMNS = {"mart_freshness": {"built_at"}}
NOT_UNIT_TESTS = ["--exclude-resource-type", "unit_test"]


def built_models(work: Path) -> list[tuple[str, str, str]]:
    """(name, schema, table) of every model the Trino build made, from its manifest."""
    manifest = json.loads((work / "target" / "manifest.json").read_text())
    return sorted((node["name"], node["schema"], node["alias"]) for node in manifest["nodes"].values()
                  if node["resource_type"] == "model" and node["config"]["materialized"] != "ephemeral")


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
