"""Hudi's own catalog sync into the local metastore, read back through Athena's catalog name.

The generator's full mix is streamed into Hudi tables with `--catalog` set to the engine's
metastore: each commit syncs the way the Glue job's commits sync, the write options of
sync_mode "hms" (HiveSyncTool) run by Hudi after the commit, or by `run_meta_sync` when a
replayed batch finds its commit already written (tests/athena/conftest.py). Then:
- the metastore holds every raw table on disk, each partition folder, the last synced
  commit and Hudi's input format, as HiveSyncTool writes them into Glue;
- Trino's rows of `"awsdatacatalog"."raw"."<table>"` equal hudi-rs's, cell by cell, the
  value shapes that once broke the Hudi sink included.
"""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest
from raw_tables import hudi_tables_on_disk, partition_folders, row_fields, trino_and_hudi_rs_rows
from value_shapes import VALUE_SHAPES

from streaming.io.formats.hudi.timeline import LocalFiles, table_commits
from streaming.runtime.athena_local import query

pytestmark = pytest.mark.athena

# hudi-hadoop-common's input format for copy-on-write tables, which HiveSyncTool records
# (HoodieInputFormatUtils.getInputFormatClassName for COPY_ON_WRITE and PARQUET).
HUDI_INPUT_FORMAT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"


def test_every_raw_table_and_partition_is_registered_with_hudis_input_format(synced):
    raw_dir, catalog = synced.raw_dir, synced.catalog
    on_disk = hudi_tables_on_disk(raw_dir)
    assert len(on_disk) == 12  # customers, orders and the app design's four tables, each twice
    assert on_disk == sorted(catalog)
    for table in on_disk:
        assert catalog[table]["partitions"] == partition_folders(raw_dir / table), table
        assert catalog[table]["last_synced"] == table_commits(LocalFiles(), str(raw_dir / table))[-1].instant, table
        assert catalog[table]["input_format"] == HUDI_INPUT_FORMAT, table
        location = urlparse(catalog[table]["location"])
        assert (location.scheme, Path(location.path)) == ("file", (raw_dir / table).resolve()), table


def test_trinos_rows_equal_hudi_rs_rows_for_every_raw_table(engine, synced):
    _, state = engine
    for table in hudi_tables_on_disk(synced.raw_dir):
        on_trino, on_hudi_rs = trino_and_hudi_rs_rows(state["trino_port"], synced.raw_dir, table)
        assert len(on_trino) > 0, table
        assert on_trino == on_hudi_rs, table


def expected_line_items(dynamodb_list: dict, field_names: list[str]) -> list:
    """The line items a DynamoDB `L` of `M` holds, as Trino returns an array of rows whose
    fields are `field_names`: a NULL element is null, an absent or NULL field is null,
    numbers stay their exact text (the raw layer does not cast)."""
    def plain(name: str) -> str:
        return name.replace("_", "").lower()

    items = []
    for element in dynamodb_list["L"]:
        if "NULL" in element:
            items.append(None)
            continue
        fields = {plain(name): value for name, value in element["M"].items()}
        items.append([None if "NULL" in fields.get(plain(name), {"NULL": True})
                      else next(iter(fields[plain(name)].values())) for name in field_names])
    return items


def test_the_value_shapes_read_back_through_trino_from_the_hudi_files(engine, synced):
    """NULL in a list, a NULL field, empty lists (tests/value_shapes.py), landed beside the
    mix: Trino reads each from the Hudi files as written; the mixed-type list was
    quarantined, so it is not there."""
    _, state = engine
    columns, rows = query(state["trino_port"], "select order_id, line_items from \"awsdatacatalog\".\"raw\".\"orders\" "
                                               "where customer_id = 'cust-shapes'")
    field_names = [name for name, _ in row_fields(columns[1]["type"][len("array("):-1])]
    expected = {order_id: expected_line_items(shape["lineItems"], field_names)
                for order_id, shape in VALUE_SHAPES.items() if order_id != "mixed-lines"}
    assert dict(rows) == expected
