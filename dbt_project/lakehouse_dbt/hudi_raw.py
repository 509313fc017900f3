"""Raw-from-Hudi mode for the local target: loads Hudi table snapshots with hudi-rs
(the PyPI package `hudi`, read-only) into DuckDB tables `raw_hudi.<table>`. With
`--vars '{raw_format: hudi}'` the on-run-start macro register_raw_sources then
exposes them as the `raw.<table>` sources.

Time travel: `as_of` (a Hudi instant time, `yyyyMMddHHmmssSSS`, as `lakehouse status`
lists them) reads each table as its commits up to that instant left it, the way
Spark reads `spark.read.format("hudi").option("as.of.instant", ...)` and Athena
cannot. One instant serves several tables: each shows its newest commit at or before it.

A table whose first commit has not completed (in flight, or left by a writer killed in
it) has no rows and no schema yet: it is read as not there, as one not created yet. A
table hudi-rs cannot read (a schema it cannot parse, a damaged timeline) raises
UnreadableHudiTable, and the loader loads the others.

hudi-rs reads every base file with the table's newest writer schema, so a column
added to a contract after older files were written reads as null in their rows
(tests/io/formats/hudi/interop/test_hudi_read.py pins it on tables the Spark sink wrote).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
from hudi import HudiReadOptions, HudiTable, HudiTableBuilder

from lakehouse_dbt.data_dir import DATABASE_FILE

HUDI_SCHEMA = "raw_hudi"
# The tables of the last load that hudi-rs could not read, with its reason: the raw
# views of those tables are left out (register_raw_sources), so that their models fail
# by name instead of reading them as empty. Raw table folders starting with `_` are
# never tables, so the name cannot be a raw table's.
UNREADABLE_TABLE = "_unreadable"

# On a local disk Hudi 1.0.2 creates a completed commit's timeline file and then writes
# its metadata into it; hudi-rs reading the table in between (a dbt build beside a running
# `lakehouse stream`) fails on the empty file with this message. The read is tried again
# once the writer has had time to finish the file.
COMMIT_BEING_WRITTEN = "Failed to parse JSON commit metadata"
COMMIT_BEING_WRITTEN_RETRIES = 5
COMMIT_BEING_WRITTEN_WAIT_S = 0.5

# hoodie.properties' key for the schema a table was created with (HoodieTableConfig.CREATE_SCHEMA
# in apache/hudi release-1.0.2, hudi-common/src/main/java/org/apache/hudi/common/table/HoodieTableConfig.java).
# Before its first completed commit, a table that has it reads as empty in that schema;
# the Spark sink's tables have none, so theirs is not known until that commit.
CREATE_SCHEMA = "hoodie.table.create.schema"

# A Hudi instant time: yyyyMMddHHmmss, and milliseconds since Hudi 0.9 (the timeline's
# file names). hudi-rs would also take other spellings; one keeps `--raw-as-of` plain.
INSTANT = re.compile(r"\d{14}(\d{3})?")


# What an operator does about a raw table its readers cannot read.
REPAIR_UNREADABLE = "restore it from a backup, or rebuild the raw tables with `lakehouse reprocess`"


class UnreadableHudiTable(Exception):
    """hudi-rs cannot read a Hudi table: a schema it cannot parse, a damaged timeline.
    The message names the table, hudi-rs's reason and what to do, on one line."""

    def __init__(self, base_uri: str, reason: str) -> None:
        self.base_uri = base_uri
        self.reason = reason
        super().__init__(f"{base_uri}: hudi-rs cannot read this Hudi table ({reason}); {REPAIR_UNREADABLE}")


def check_instant(text: str) -> str:
    """`text` if it is a Hudi instant time, a real moment included (month 13 is none),
    else ValueError naming the expected form."""
    expected = ("give yyyyMMddHHmmssSSS, e.g. 20260404081500000 "
                "(`lakehouse status` lists each raw table's commits)")
    if not INSTANT.fullmatch(text):
        raise ValueError(f"{text!r} is not a Hudi instant: {expected}")
    try:
        datetime(int(text[0:4]), int(text[4:6]), int(text[6:8]), int(text[8:10]), int(text[10:12]), int(text[12:14]))
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a Hudi instant ({exc}): {expected}") from exc
    return text


def read_hudi_snapshot(
    base_uri: str, as_of: str | None = None, columns: Sequence[str] | None = None
) -> pa.Table | None:
    """The snapshot of a Hudi table (COW or MOR, deletes applied) as Arrow: the latest,
    or as of the instant `as_of` (the commits up to it; none before the first commit);
    all columns, or only `columns`. None while no commit of the table has completed and
    it has no schema to be empty in; UnreadableHudiTable when hudi-rs cannot read it."""
    if "://" not in base_uri:
        # hudi-rs takes a URL or an absolute path: a relative one (the demo's ./data) fails
        # with "relative URL without a base".
        base_uri = os.path.abspath(base_uri)
    options = HudiReadOptions(projection=None if columns is None else list(columns))
    if as_of is not None:
        options = options.with_as_of_timestamp(check_instant(as_of))
    retries = COMMIT_BEING_WRITTEN_RETRIES
    while True:
        try:
            return _snapshot(HudiTableBuilder.from_base_uri(base_uri).build(), options, columns)
        except Exception as error:  # hudi-rs raises its one error type for every failure
            if COMMIT_BEING_WRITTEN in str(error) and retries > 0:
                retries -= 1
                time.sleep(COMMIT_BEING_WRITTEN_WAIT_S)
                continue
            reason = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
            raise UnreadableHudiTable(base_uri, reason) from error


def _snapshot(table: HudiTable, options: HudiReadOptions, columns: Sequence[str] | None) -> pa.Table | None:
    """read_hudi_snapshot's read of one built table. hudi-rs fails to read one with no
    completed commit and no create schema: it has no schema to be empty in."""
    if not table.get_timeline().get_completed_commits() and CREATE_SCHEMA not in table.hudi_options():
        return None
    batches = table.read(options)
    if batches:
        return pa.Table.from_batches(batches)
    schema = table.get_schema()
    return (schema if columns is None else pa.schema([schema.field(name) for name in columns])).empty_table()


@dataclass(frozen=True)
class HudiLoad:
    """What one load of the raw tables into DuckDB found."""

    rows: dict[str, int] = field(default_factory=dict)
    """Per table loaded: its rows."""
    uncommitted: tuple[str, ...] = ()
    """Tables whose first commit has not completed: not loaded, read as empty."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """Per table hudi-rs cannot read: UnreadableHudiTable's message. Not loaded; their raw
    views are left out."""


def load_hudi_tables(data_dir: Path | str, base_uris: Mapping[str, str], as_of: str | None = None) -> HudiLoad:
    """Makes schema `raw_hudi` of `<data_dir>/lakehouse.duckdb` hold exactly the snapshot of
    each Hudi table `base_uris[name]` as `raw_hudi.<name>` (as of `as_of` when given):
    a table left from an earlier load (another raw root before `lakehouse switch`) would
    otherwise still feed dbt. The tables hudi-rs cannot read are listed in
    `raw_hudi._unreadable` instead, and the others loaded.

    One transaction replaces the schema: a load that fails (or is killed) part way
    leaves the previous load as it was, for the next `dbt show` to read."""
    if as_of is not None:
        check_instant(as_of)
    database = Path(data_dir) / DATABASE_FILE
    database.parent.mkdir(parents=True, exist_ok=True)
    rows: dict[str, int] = {}
    uncommitted: list[str] = []
    unreadable: dict[str, str] = {}
    with duckdb.connect(str(database)) as con:
        con.begin()
        try:
            con.sql(f"drop schema if exists {HUDI_SCHEMA} cascade")
            con.sql(f"create schema {HUDI_SCHEMA}")
            con.sql(f'create table {HUDI_SCHEMA}."{UNREADABLE_TABLE}" (table_name varchar, reason varchar)')
            for name, base_uri in base_uris.items():
                try:
                    snapshot = read_hudi_snapshot(base_uri, as_of)
                except UnreadableHudiTable as unread:
                    unreadable[name] = str(unread)
                    con.execute(f'insert into {HUDI_SCHEMA}."{UNREADABLE_TABLE}" values (?, ?)', [name, unread.reason])
                    continue
                if snapshot is None:
                    uncommitted.append(name)
                    continue
                con.register("hudi_snapshot", snapshot)
                con.sql(f'create table {HUDI_SCHEMA}."{name}" as select * from hudi_snapshot')
                con.unregister("hudi_snapshot")
                rows[name] = con.sql(f'select count(*) from {HUDI_SCHEMA}."{name}"').fetchall()[0][0]
            con.commit()
        except BaseException:
            con.rollback()
            raise
    return HudiLoad(rows, tuple(uncommitted), unreadable)

