"""The SQL dbt-athena compiles, run on the local Trino. What Athena runs is dbt-athena's SQL,
not dbt-trino's: the adapters render their own built-in macros (casts, date arithmetic,
relation names, the lookups a model makes while it compiles), so the trino target's build
proves the project's macros but not this.

The athena target compiles against moto's Glue Data Catalog, which holds the raw tables
as Hudi's sync registered them in the local metastore (columns, partition keys, location
and parameters copied from there). Each model's compiled SELECT then runs on Trino over
the raw tables and the trino target's build:
- first build (no model table in Glue): its rows equal the table the trino target built;
- incremental branch (each incremental model's table registered, as after a first build):
  with nothing landed since that build, its merge changes nothing: every row it emits is
  one the built table holds, every deletion is of a key the table does not hold. Its lookback cutoff is the epoch (moto's Athena
  runs no query, so the lookup of the newest stored row finds none): it reads all of raw.
Differences are named in ATHENA_SQL_DIFFERENCES with their reason; there are none now.
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from dbt_builds import comparable, trino_rows, trino_table
from engine_ports import free_port
from raw_tables import RAW_DATABASE, metastore_uri

from streaming.runtime.athena_local import CATALOG, HOST, query
from streaming.runtime.dbt_runner import run_dbt

pytestmark = pytest.mark.athena

REGION = "eu-west-1"
# mart_freshness.built_at is the time of the statement itself.
BUILD_TIME_COLUMNS = {"mart_freshness": {"built_at"}}
ATHENA_SQL_DIFFERENCES: dict[str, str] = {}
COMPILED_MODELS = Path("dbt") / "target" / "compiled" / "dynamodb_lakehouse" / "dbt_project" / "models"


@contextmanager
def moto_glue(log: Path) -> Iterator[dict[str, str]]:
    """moto's server on a free port; the environment that points boto3 (and dbt-athena) at it."""
    port = free_port()
    with log.open("w") as output:
        server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", HOST, "-p", str(port)],
                                  stdout=output, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection((HOST, port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        pytest.fail(f"moto_server did not start on port {port}; see {log}")
                    time.sleep(0.2)
            yield {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                   "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT_URL": f"http://{HOST}:{port}",
                   "LAKEHOUSE_RAW_DATABASE": RAW_DATABASE}
        finally:
            server.terminate()
            server.wait(timeout=30)


def registered_raw_tables(spark, uri: str) -> list[dict]:
    """Glue TableInputs of the raw tables as the metastore at `uri` holds them."""
    hive = spark.sparkContext._jvm.org.apache.hadoop.hive
    conf = hive.conf.HiveConf()
    conf.set("hive.metastore.uris", uri)
    client = hive.metastore.HiveMetaStoreClient(conf)
    try:
        tables = []
        for name in client.getAllTables(RAW_DATABASE):
            table = client.getTable(RAW_DATABASE, name)
            descriptor = table.getSd()
            tables.append({
                "Name": name, "TableType": "EXTERNAL_TABLE", "Parameters": dict(table.getParameters()),
                "PartitionKeys": [{"Name": key.getName(), "Type": key.getType()} for key in table.getPartitionKeys()],
                "StorageDescriptor": {
                    "Columns": [{"Name": column.getName(), "Type": column.getType()} for column in descriptor.getCols()],
                    "Location": descriptor.getLocation(), "InputFormat": descriptor.getInputFormat(),
                    "OutputFormat": descriptor.getOutputFormat(),
                    "SerdeInfo": {"SerializationLibrary": descriptor.getSerdeInfo().getSerializationLib()}},
            })
        return tables
    finally:
        client.close()


def trino_manifest_models(work: Path) -> dict[str, dict]:
    manifest = json.loads((work / "target" / "manifest.json").read_text())
    return {node["name"]: node for node in manifest["nodes"].values()
            if node["resource_type"] == "model" and node["config"]["materialized"] != "ephemeral"}


def compiled_models(data_dir: Path) -> dict[str, str]:
    return {path.stem: path.read_text() for path in (data_dir / COMPILED_MODELS).rglob("*.sql")}


@pytest.fixture(scope="module")
def athena_compiled(engine, synced, both_built, hudi_spark, tmp_path_factory) -> dict[str, dict[str, str]]:
    """dbt-athena's compiled SQL of every model: {"first build": {...}, "incremental": {...}}."""
    import boto3

    _, state = engine
    _, trino_work = both_built
    work = tmp_path_factory.mktemp("athena-compile")
    models = trino_manifest_models(trino_work)
    compiled = {}
    with moto_glue(work / "moto.log") as aws:
        glue = boto3.client("glue", region_name=REGION, endpoint_url=aws["AWS_ENDPOINT_URL"],
                            aws_access_key_id=aws["AWS_ACCESS_KEY_ID"], aws_secret_access_key=aws["AWS_SECRET_ACCESS_KEY"])
        for database in {RAW_DATABASE, *(node["schema"] for node in models.values())}:
            glue.create_database(DatabaseInput={"Name": database})
        for table in registered_raw_tables(hudi_spark, metastore_uri(state)):
            glue.create_table(DatabaseName=RAW_DATABASE, TableInput=table)
        for branch in ("first build", "incremental"):
            if branch == "incremental":
                # Tables as a first build leaves them: dbt-athena's is_incremental() is true
                # for an Iceberg table that exists.
                for node in models.values():
                    if node["config"]["materialized"] == "incremental":
                        glue.create_table(DatabaseName=node["schema"], TableInput={
                            "Name": node["alias"], "TableType": "EXTERNAL_TABLE", "Parameters": {"table_type": "ICEBERG"},
                            "StorageDescriptor": {"Columns": [{"Name": "_ingested_at", "Type": "timestamp"}],
                                                  "Location": f"s3://lakehouse-curated/{node['alias']}/"}})
            data_dir = work / branch.replace(" ", "-")
            result = run_dbt(["compile", "--select", "resource_type:model"], data_dir, target="athena", extra_env=aws)
            assert result.success, result.exception
            compiled[branch] = compiled_models(data_dir)
    return compiled


def test_dbt_athenas_first_build_sql_gives_on_trino_the_rows_of_the_trino_build(engine, both_built, athena_compiled):
    _, state = engine
    _, trino_work = both_built
    models = trino_manifest_models(trino_work)
    assert len(models) > 15
    differences = {}
    for name, node in sorted(models.items()):
        left_out = BUILD_TIME_COLUMNS.get(name, set())
        built = trino_table(state["trino_port"], node["schema"], node["alias"], left_out)
        selected = trino_rows(state["trino_port"], athena_compiled["first build"][name], left_out)
        if selected != built:
            differences[name] = (f"columns {selected[0] == built[0]}; only dbt-athena's SQL "
                                 f"{sorted(set(selected[1]) - set(built[1]))[:2]}, only the build "
                                 f"{sorted(set(built[1]) - set(selected[1]))[:2]}")
    assert differences == ATHENA_SQL_DIFFERENCES


def rows_by_name(port: int, sql: str) -> list[dict]:
    columns, rows = query(port, sql)
    return [{column["name"]: comparable(value, column["type"]) for column, value in zip(columns, row)} for row in rows]


def test_dbt_athenas_incremental_sql_changes_nothing_when_nothing_landed(engine, both_built, athena_compiled):
    """An incremental run's rows replace the stored rows of their unique key, and a row
    with a null _ingested_at deletes its key (macros/marts/incremental_marts.sql). With
    nothing landed since the build, each row is one the table holds already, and each
    deletion is of a key it does not hold: the merge is a no-op."""
    _, state = engine
    port = state["trino_port"]
    _, trino_work = both_built
    # A microbatch model has no incremental branch of its own: dbt adds each batch's
    # event-time filter when it runs the batch, so it compiles to the first build's SQL,
    # which the test above runs.
    incremental = {name: node for name, node in trino_manifest_models(trino_work).items()
                   if node["config"]["materialized"] == "incremental"
                   and node["config"].get("incremental_strategy") != "microbatch"}
    assert len(incremental) >= 5
    changes = {}
    for name, node in sorted(incremental.items()):
        sql = athena_compiled["incremental"][name]
        assert sql != athena_compiled["first build"][name], f"{name}: the incremental branch was not compiled"
        unique_key = node["config"]["unique_key"]
        key_columns = [unique_key] if isinstance(unique_key, str) else list(unique_key)
        stored = rows_by_name(port, f'select * from "{CATALOG}"."{node["schema"]}"."{node["alias"]}"')
        stored_rows = {json.dumps(row, sort_keys=True) for row in stored}
        stored_keys = {tuple(row[column] for column in key_columns) for row in stored}
        emitted = rows_by_name(port, sql)
        assert not emitted or sorted(emitted[0]) == sorted(stored[0]), name
        for row in emitted:
            deletes = row.get("_ingested_at", "") is None
            if (tuple(row[column] for column in key_columns) in stored_keys if deletes
                    else json.dumps(row, sort_keys=True) not in stored_rows):
                changes.setdefault(name, []).append(("deletes" if deletes else "writes", row))
    assert {name: found[:2] for name, found in changes.items()} == {}
