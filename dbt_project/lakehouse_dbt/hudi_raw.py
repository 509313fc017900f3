"""Raw-from-Hudi mode for the local target: loads Hudi table snapshots with hudi-rs
(the PyPI package `hudi`, read-only) into DuckDB tables `raw_hudi.<table>`. With
`--vars '{raw_format: hudi}'` the on-run-start macro register_raw_sources then
exposes them as the `raw.<table>` sources.

Time travel: `as_of` (a Hudi instant time, `yyyyMMddHHmmssSSS`, as `lakehouse status`
lists them) reads each table as its commits up to that instant left it, the way
Spark reads `spark.read.format("hudi").option("as.of.instant", ...)` and Athena
cannot. One instant serves several tables: each shows its newest commit at or before it.

hudi-rs reads every base file with the table's newest writer schema, so a column
added to a contract after older files were written reads as null in their rows
(tests/test_hudi_read.py pins it on tables the Spark sink wrote).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import duckdb
import pyarrow as pa
from hudi import HudiReadOptions, HudiTableBuilder

from lakehouse_dbt.data_dir import DATABASE_FILE

HUDI_SCHEMA = "raw_hudi"

# On a local disk Hudi 1.0.2 creates a completed commit's timeline file and then writes
# its metadata into it; hudi-rs reading the table in between (a dbt build beside a running
# `lakehouse stream`) fails on the empty file with this message. The read is tried again
# once the writer has had time to finish the file.
COMMIT_BEING_WRITTEN = "Failed to parse JSON commit metadata"
COMMIT_BEING_WRITTEN_RETRIES = 5
COMMIT_BEING_WRITTEN_WAIT_S = 0.5

# A Hudi instant time: yyyyMMddHHmmss, and milliseconds since Hudi 0.9 (the timeline's
# file names). hudi-rs would also take other spellings; one keeps `--raw-as-of` plain.
INSTANT = re.compile(r"\d{14}(\d{3})?")


def check_instant(text: str) -> str:
    """`text` if it is a Hudi instant time, else ValueError naming the expected form."""
    if not INSTANT.fullmatch(text):
        raise ValueError(f"{text!r} is not a Hudi instant: give yyyyMMddHHmmssSSS, e.g. 20260404081500000 "
                         "(`lakehouse status` lists each raw table's commits)")
    return text


def read_hudi_snapshot(base_uri: str, as_of: str | None = None, columns: Sequence[str] | None = None) -> pa.Table:
    """The snapshot of a Hudi table (COW or MOR, deletes applied) as Arrow: the latest,
    or as of the instant `as_of` (the commits up to it; none before the first commit);
    all columns, or only `columns`."""
    if "://" not in base_uri:
        # hudi-rs takes a URL or an absolute path: a relative one (the demo's ./data) fails
        # with "relative URL without a base".
        base_uri = os.path.abspath(base_uri)
    options = HudiReadOptions(projection=None if columns is None else list(columns))
    if as_of is not None:
        options = options.with_as_of_timestamp(check_instant(as_of))
    for attempt in range(COMMIT_BEING_WRITTEN_RETRIES + 1):
        try:
            table = HudiTableBuilder.from_base_uri(base_uri).build()
            batches = table.read(options)
            break
        except Exception as error:  # hudi-rs raises its one error type for every failure
            if COMMIT_BEING_WRITTEN not in str(error) or attempt == COMMIT_BEING_WRITTEN_RETRIES:
                raise
            time.sleep(COMMIT_BEING_WRITTEN_WAIT_S)
    if not batches:
        schema = table.get_schema()
        return (schema if columns is None else pa.schema([schema.field(name) for name in columns])).empty_table()
    return pa.Table.from_batches(batches)


def load_hudi_tables(
    data_dir: Path | str, base_uris: Mapping[str, str], as_of: str | None = None
) -> dict[str, int]:
    """Makes schema `raw_hudi` of `<data_dir>/lakehouse.duckdb` hold exactly the snapshot of
    each Hudi table `base_uris[name]` as `raw_hudi.<name>` (as of `as_of` when given):
    a table left from an earlier load (another raw root before `lakehouse switch`) would
    otherwise still feed dbt. Returns the row count loaded per name."""
    database = Path(data_dir) / DATABASE_FILE
    database.parent.mkdir(parents=True, exist_ok=True)
    loaded: dict[str, int] = {}
    with duckdb.connect(str(database)) as con:
        con.sql(f"drop schema if exists {HUDI_SCHEMA} cascade")
        con.sql(f"create schema {HUDI_SCHEMA}")
        for name, base_uri in base_uris.items():
            snapshot = read_hudi_snapshot(base_uri, as_of)
            con.register("hudi_snapshot", snapshot)
            con.sql(f'create or replace table {HUDI_SCHEMA}."{name}" as select * from hudi_snapshot')
            con.unregister("hudi_snapshot")
            loaded[name] = con.sql(f'select count(*) from {HUDI_SCHEMA}."{name}"').fetchall()[0][0]
    return loaded
