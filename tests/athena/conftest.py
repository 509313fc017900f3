"""The `athena` tier (`make test-athena`): the local Trino 476 and Hive metastore of
streaming.runtime.athena_local, started once for the tier on free ports in a temporary
data directory and stopped at its end, and one lakehouse streamed into Hudi tables that
Hudi's own sync registered there. `make test` deselects these tests."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from engine_ports import free_port

from streaming.contracts.loader import load_contracts
from streaming.io import layout as raw_layout
from streaming.io.formats.hudi.options import change_log_write_options, current_state_write_options, hudi_table_path
from streaming.io.formats.hudi.sink import run_meta_sync
from streaming.io.layout import DataLayout
from streaming.operations.stream import stream
from streaming.runtime.athena_local import HOST, EnginePaths, start, stop, tools_dir
from streaming.samples.generator import write_landing_files

RAW_DATABASE = "raw"


@pytest.fixture(scope="session")
def engine(tmp_path_factory):
    """(paths, state) of the running engine; `state["trino_port"]` is where to query it."""
    paths = EnginePaths(tmp_path_factory.mktemp("athena-data"))
    state = start(paths, metastore_port=free_port(), trino_port=free_port(), tools=tools_dir())
    yield paths, state
    stop(paths)


def sync_all_raw_tables(spark, raw_dir: Path, raw_base: str, metastore_port: int) -> list[str]:
    """Every raw table under `raw_dir`, synced as a Hudi write with sync_mode "hms" syncs it.

    Hive reads the metastore address from the JVM's system properties
    (HiveConf.applySystemProperties), which reach the sync tool from the shared session."""
    system = spark.sparkContext._jvm.java.lang.System
    system.setProperty("hive.metastore.uris", f"thrift://{HOST}:{metastore_port}")
    synced = []
    try:
        for contract in load_contracts().values():
            for table, options in (
                (contract.changes_table, change_log_write_options(
                    contract, base_path=raw_base, database=RAW_DATABASE, sync_mode="hms")),
                (contract.raw_table, current_state_write_options(
                    contract, base_path=raw_base, database=RAW_DATABASE, sync_mode="hms")),
            ):
                if (raw_dir / table / ".hoodie").is_dir():
                    run_meta_sync(spark, options, hudi_table_path(raw_base, table))
                    synced.append(table)
    finally:
        system.clearProperty("hive.metastore.uris")
    return synced


def metastore_view(spark, metastore_port: int) -> dict[str, dict]:
    """What the metastore holds for each raw table, read with Hive's own client."""
    system = spark.sparkContext._jvm.java.lang.System
    system.setProperty("hive.metastore.uris", f"thrift://{HOST}:{metastore_port}")
    hive = spark.sparkContext._jvm.org.apache.hadoop.hive
    client = hive.metastore.HiveMetaStoreClient(hive.conf.HiveConf())
    try:
        view = {}
        for table in client.getAllTables(RAW_DATABASE):
            found = client.getTable(RAW_DATABASE, table)
            view[table] = {
                "partitions": sorted(tuple(partition.getValues())
                                     for partition in client.listPartitions(RAW_DATABASE, table, -1)),
                "last_synced": found.getParameters().get("last_commit_time_sync"),
                "input_format": found.getSd().getInputFormat(),
                "location": found.getSd().getLocation(),
            }
        return view
    finally:
        client.close()
        system.clearProperty("hive.metastore.uris")


@dataclass(frozen=True)
class SyncedLakehouse:
    layout: DataLayout
    raw_dir: Path
    synced_tables: list[str]
    catalog: dict[str, dict]


@pytest.fixture(scope="session")
def synced(engine, hudi_spark, tmp_path_factory) -> SyncedLakehouse:
    """The generator's full mix (both record formats, deletes, TTL deletes, the `app`
    single-table design with its unrouted table) streamed into Hudi tables, each synced
    into the engine's metastore."""
    _, state = engine
    layout = DataLayout(tmp_path_factory.mktemp("synced") / "data")
    write_landing_files(layout.landing, customers=12, tenants=2, seed=11, record_format="mixed")
    stream(layout, sink="hudi", spark=hudi_spark, out=lambda _: None)
    # The base path the local Hudi sink writes with (streaming.io.sinks.choose_sink).
    raw_base = raw_layout.uri(str(layout.root.resolve()), raw_layout.RAW_FOLDER)
    raw_dir = layout.root / raw_layout.RAW_FOLDER
    synced_tables = sync_all_raw_tables(hudi_spark, raw_dir, raw_base, state["metastore_port"])
    return SyncedLakehouse(layout, raw_dir, synced_tables, metastore_view(hudi_spark, state["metastore_port"]))
