"""Hudi's own catalog sync into the local metastore, read back through Athena's catalog name.

The generator's full mix is streamed into Hudi tables, and every raw table is synced the way the Glue job's writes sync: `run_meta_sync` with the write options of
sync_mode "hms" (HiveSyncTool), here pointed at the engine's Thrift metastore
(tests/athena/conftest.py). Then:
- the metastore holds every raw table on disk, each partition folder, the last synced
  commit and Hudi's input format, as HiveSyncTool writes them into Glue;
- Trino's rows of `"awsdatacatalog"."raw"."<table>"` equal hudi-rs's, cell by cell.
"""
from __future__ import annotations

import base64
import json
import re
from datetime import datetime
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from streaming.io.formats.hudi.timeline import LocalFiles, table_commits
from streaming.runtime.athena_local import query

pytestmark = pytest.mark.athena

# hudi-hadoop-common's input format for copy-on-write tables, which HiveSyncTool records
# (HoodieInputFormatUtils.getInputFormatClassName for COPY_ON_WRITE and PARQUET).
HUDI_INPUT_FORMAT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"


def hudi_tables_on_disk(raw_dir: Path) -> list[str]:
    return sorted(path.name for path in raw_dir.iterdir() if (path / ".hoodie").is_dir())


def partition_folders(table: Path) -> list[tuple[str, ...]]:
    """The partition values the folders of a table name (`<column>=<value>`), as written."""
    folders = {path.parent.relative_to(table) for path in table.rglob("*.parquet") if ".hoodie" not in path.parts}
    return sorted(tuple(part.split("=", 1)[1] for part in folder.parts) for folder in folders if folder.parts)


def test_every_raw_table_and_partition_is_registered_with_hudis_input_format(synced):
    raw_dir, synced_tables, catalog = synced.raw_dir, synced.synced_tables, synced.catalog
    on_disk = hudi_tables_on_disk(raw_dir)
    assert len(on_disk) == 12  # customers, orders and the app design's four tables, each twice
    assert sorted(synced_tables) == on_disk == sorted(catalog)
    for table in on_disk:
        assert catalog[table]["partitions"] == partition_folders(raw_dir / table), table
        assert catalog[table]["last_synced"] == table_commits(LocalFiles(), str(raw_dir / table))[-1].instant, table
        assert catalog[table]["input_format"] == HUDI_INPUT_FORMAT, table
        location = urlparse(catalog[table]["location"])
        assert (location.scheme, Path(location.path)) == ("file", (raw_dir / table).resolve()), table


def as_trino_json(value, trino_type: str):
    """An Arrow value as Trino's client protocol writes a value of `trino_type`."""
    if value is None:
        return None
    if trino_type.startswith("timestamp"):
        digits = int(re.match(r"timestamp\((\d+)\)", trino_type).group(1))
        assert isinstance(value, datetime)
        fraction = f"{value.microsecond:06d}".ljust(digits, "0")[:digits]
        return f"{value:%Y-%m-%d %H:%M:%S}" + (f".{fraction}" if digits else "")
    if trino_type == "varbinary":
        return base64.b64encode(value).decode()
    if trino_type.startswith("array("):
        element = trino_type[len("array("):-1]
        return [as_trino_json(item, element) for item in value]
    if trino_type.startswith("row("):
        return [as_trino_json(value[name], field_type) for name, field_type in row_fields(trino_type)]
    return value


def row_fields(trino_type: str) -> list[tuple[str, str]]:
    """The (name, type) fields of `row(a varchar, b array(row(...)))`, nesting respected."""
    body, fields, depth, start = trino_type[len("row("):-1], [], 0, 0
    for index, char in enumerate(body + ","):
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            name, field_type = body[start:index].strip().split(" ", 1)
            fields.append((name.strip('"'), field_type))
            start = index + 1
    return fields


def canonical(rows: list[list]) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


def test_trinos_rows_equal_hudi_rs_rows_for_every_raw_table(engine, synced):
    _, state = engine
    raw_dir = synced.raw_dir
    for table in hudi_tables_on_disk(raw_dir):
        columns, trino_rows = query(state["trino_port"], f'select * from "awsdatacatalog"."raw"."{table}"')
        read_by_rs = pa.Table.from_batches(
            HudiTableBuilder.from_base_uri(str(raw_dir / table)).build().read(HudiReadOptions()))
        names = [column["name"] for column in columns]
        assert sorted(names) == sorted(read_by_rs.column_names), table
        expected = [[as_trino_json(row[column["name"]], column["type"]) for column in columns]
                    for row in read_by_rs.to_pylist()]
        assert len(trino_rows) == read_by_rs.num_rows > 0, table
        assert canonical(trino_rows) == canonical(expected), table
