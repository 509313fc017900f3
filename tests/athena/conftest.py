"""The `athena` tier (`make test-athena`): the local Trino 476 and Hive metastore of
streaming.runtime.athena_local, started once for the tier on free ports in a temporary
data directory and stopped at its end, and one lakehouse streamed into Hudi tables that
the stream's own catalog sync (`lakehouse stream --catalog`) registered there. `make
test` deselects these tests."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from dbt_builds import event_window, trino_dbt
from engine_ports import free_port
from raw_tables import metastore_uri, metastore_view
from value_shapes import write_value_shapes

from lakehouse_dbt.pii_key import key_of_data_dir
from streaming.io import layout as raw_layout
from streaming.io.layout import DataLayout
from streaming.operations.stream import stream
from streaming.runtime.athena_local import CATALOG, EnginePaths, query, start, stop, tools_dir
from streaming.runtime.dbt_runner import run_dbt_command
from streaming.samples.generator import write_landing_files


@pytest.fixture(scope="session")
def engine(tmp_path_factory):
    """(paths, state) of the running engine; `state["trino_port"]` is where to query it."""
    paths = EnginePaths(tmp_path_factory.mktemp("athena-data"))
    state = start(paths, metastore_port=free_port(), trino_port=free_port(), tools=tools_dir())
    yield paths, state
    stop(paths)


@dataclass(frozen=True)
class SyncedLakehouse:
    layout: DataLayout
    raw_dir: Path
    catalog: dict[str, dict]

    @property
    def change_logs(self) -> list[str]:
        return sorted(table for table in self.catalog if table.endswith("_changes"))


@pytest.fixture(scope="session")
def synced(engine, hudi_spark, tmp_path_factory) -> SyncedLakehouse:
    """The generator's full mix (both record formats, deletes, TTL deletes, the `app`
    single-table design with its unrouted table) and the orders of tests/value_shapes.py,
    streamed into Hudi tables with the catalog set: each commit synced into the engine's
    metastore by the stream itself, as on Glue."""
    _, state = engine
    layout = DataLayout(tmp_path_factory.mktemp("synced") / "data")
    write_landing_files(layout.landing, customers=12, tenants=2, seed=11, record_format="mixed")
    write_value_shapes(layout.landing)
    stream(layout, sink="hudi", catalog=metastore_uri(state), spark=hudi_spark, out=lambda _: None)
    raw_dir = layout.root / raw_layout.RAW_FOLDER
    return SyncedLakehouse(layout, raw_dir, metastore_view(hudi_spark, metastore_uri(state)))


@pytest.fixture(scope="session")
def both_built(engine, synced, tmp_path_factory):
    """DuckDB's build and Trino's build of every model and seed (no tests yet)."""
    _, state = engine
    port = state["trino_port"]
    window = event_window(port, synced.change_logs)
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
