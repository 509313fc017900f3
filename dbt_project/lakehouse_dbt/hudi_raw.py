"""Raw-from-Hudi mode for the local target: loads Hudi table snapshots with hudi-rs
(the PyPI package `hudi`, read-only) into DuckDB tables `raw_hudi.<table>`. With
`--vars '{raw_format: hudi}'` the on-run-start macro register_raw_sources then
exposes them as the `raw.<table>` sources."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb
import pyarrow as pa
from hudi import HudiReadOptions, HudiTableBuilder

HUDI_SCHEMA = "raw_hudi"


def read_hudi_snapshot(base_uri: str) -> pa.Table:
    """The latest snapshot of a Hudi table (COW or MOR, deletes applied) as Arrow."""
    table = HudiTableBuilder.from_base_uri(base_uri).build()
    batches = table.read(HudiReadOptions())
    if not batches:
        return table.get_schema().empty_table()
    return pa.Table.from_batches(batches)


def load_hudi_tables(data_dir: Path | str, base_uris: Mapping[str, str]) -> dict[str, int]:
    """Replaces `raw_hudi.<name>` in `<data_dir>/lakehouse.duckdb` with the snapshot of
    each Hudi table `base_uris[name]`; returns the row count loaded per name."""
    database = Path(data_dir) / "lakehouse.duckdb"
    database.parent.mkdir(parents=True, exist_ok=True)
    loaded: dict[str, int] = {}
    with duckdb.connect(str(database)) as con:
        con.sql(f"create schema if not exists {HUDI_SCHEMA}")
        for name, base_uri in base_uris.items():
            snapshot = read_hudi_snapshot(base_uri)
            con.register("hudi_snapshot", snapshot)
            con.sql(f'create or replace table {HUDI_SCHEMA}."{name}" as select * from hudi_snapshot')
            con.unregister("hudi_snapshot")
            loaded[name] = con.sql(f'select count(*) from {HUDI_SCHEMA}."{name}"').fetchall()[0][0]
    return loaded
