"""The raw Hudi tables of the athena tier as the metastore and the engines see them: what
Hudi's sync registered, the partition folders on disk, and each table's rows through
Trino and through hudi-rs (the `hudi` PyPI package) in one comparable form, Trino's
client protocol JSON."""
from __future__ import annotations

import base64
import json
import re
from datetime import datetime
from pathlib import Path

import pyarrow as pa
from hudi import HudiReadOptions, HudiTableBuilder

from streaming.runtime.athena_local import HOST, query

RAW_DATABASE = "raw"


def metastore_view(spark, uri: str) -> dict[str, dict]:
    """What the metastore at `uri` holds for each raw table, read with Hive's own client."""
    hive = spark.sparkContext._jvm.org.apache.hadoop.hive
    conf = hive.conf.HiveConf()
    conf.set("hive.metastore.uris", uri)
    client = hive.metastore.HiveMetaStoreClient(conf)
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


def metastore_uri(state: dict) -> str:
    """The engine's metastore as `lakehouse stream --catalog` takes it."""
    return f"thrift://{HOST}:{state['metastore_port']}"


def hudi_tables_on_disk(raw_dir: Path) -> list[str]:
    return sorted(path.name for path in raw_dir.iterdir() if (path / ".hoodie").is_dir())


def partition_folders(table: Path) -> list[tuple[str, ...]]:
    """The partition values the folders of a table name (`<column>=<value>`), as written."""
    folders = {path.parent.relative_to(table) for path in table.rglob("*.parquet") if ".hoodie" not in path.parts}
    return sorted(tuple(part.split("=", 1)[1] for part in folder.parts) for folder in folders if folder.parts)


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


def hudi_rs_table(raw_dir: Path, table: str, as_of: str | None = None) -> pa.Table:
    """Raw table `table` as hudi-rs reads it: its latest commit, or as of commit `as_of`."""
    options = HudiReadOptions() if as_of is None else HudiReadOptions().with_as_of_timestamp(as_of)
    return pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(raw_dir / table)).build().read(options))


def trino_and_hudi_rs_rows(port: int, raw_dir: Path, table: str, *, as_of: str | None = None,
                           database: str = RAW_DATABASE) -> tuple[list[str], list[str]]:
    """The rows of raw table `table` through `"awsdatacatalog"."<database>"` on Trino, and
    as hudi-rs reads its files, each canonical; the column names must agree. With `as_of`
    (a commit instant), hudi-rs reads the table as of that commit and Trino the rows
    `_hoodie_commit_time <= as_of`, the earlier state docs/analysts.md discusses."""
    where = "" if as_of is None else f" where _hoodie_commit_time <= '{as_of}'"
    columns, trino_rows = query(port, f'select * from "awsdatacatalog"."{database}"."{table}"{where}')
    read_by_rs = hudi_rs_table(raw_dir, table, as_of)
    names = [column["name"] for column in columns]
    assert sorted(names) == sorted(read_by_rs.column_names), table
    expected = [[as_trino_json(row[column["name"]], column["type"]) for column in columns]
                for row in read_by_rs.to_pylist()]
    return canonical(trino_rows), canonical(expected)
