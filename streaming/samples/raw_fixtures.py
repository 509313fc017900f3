"""Writes raw change-log batches exactly as the local streaming sink lays them out:
`<data>/raw/<table>_changes/_ingest_hour=<h>/_batch_id=<n>/part-00000.parquet`, for dbt
tests and demos."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from streaming.contracts.evolution import contract_version
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.contracts.model import TableContract
from streaming.io import layout as raw_layout
from streaming.samples.raw_schema import arrow_raw_schema

SEQUENCE_DIGITS = 64


def ordering_value(event_ts: datetime, sequence_number: str, event_id: str) -> str:
    """`yyyyMMddHHmmssSSSSSS` of the event time, the padded sequence number, and the
    eventID's UTF-8 bytes in hex, as the decoder builds it (pipeline/envelope.py)."""
    return event_ts.astimezone(timezone.utc).strftime("%Y%m%d%H%M%S%f") + sequence_number + event_id.encode().hex().upper()


def _complete_row(row: Mapping[str, Any], contract: TableContract, ingested_at: datetime) -> dict[str, Any]:
    """Fills the metadata the sink derives; business columns not given are null."""
    full = dict(row)
    event_name = full.setdefault("_event_name", "INSERT")
    full.setdefault("_is_deleted", event_name == "REMOVE")
    full.setdefault("_is_ttl_delete", False)
    event_ts: datetime = full["_event_ts"]
    full.setdefault("_sequence_number", str(full.pop("sequence", 0)).zfill(SEQUENCE_DIGITS))
    key = "-".join(str(full[column]) for column in contract.key_columns)
    # Opaque, like DynamoDB's eventIDs: a key column may be PII (cust_name), and the
    # event id reaches the marts (dim_customers_history.version_event_id).
    time_and_sequence = ordering_value(event_ts, full["_sequence_number"], event_id="")
    full.setdefault("_event_id", str(uuid.uuid5(uuid.NAMESPACE_URL, f"{contract.table}/{key}/{time_and_sequence}")))
    full.setdefault("_ordering_value", ordering_value(event_ts, full["_sequence_number"], full["_event_id"]))
    full.setdefault("_source_table", contract.table)
    full.setdefault("_ingested_at", ingested_at)
    full.setdefault("_contract_version", contract_version(contract))
    # Every sample contract partitions on the last character of the partition key.
    partition_key_column = contract.attribute(contract.partition_key).column
    full.setdefault(contract.partition_column, str(full[partition_key_column])[-1:])
    return full


def write_raw_batch(
    data_dir: Path | str,
    table: str,
    batch_id: int,
    rows: Iterable[Mapping[str, Any]],
    ingested_at: datetime,
    contract: TableContract | None = None,
) -> Path:
    """Writes one micro-batch of change rows into the change log of raw table `table`;
    returns its folder (under the hour of `ingested_at`). `contract` is the table's when
    it is not a sample table.

    Each row gives business columns plus `_event_ts` (aware datetime) and optionally
    `_event_name` (default INSERT), `sequence` (an int, padded like the sink does) or
    any metadata column to override. Replaying a batch id replaces its folder.
    """
    contract = contract or load_contracts(SAMPLE_CONTRACTS_DIR)[table]
    schema = arrow_raw_schema(contract)
    rows = list(rows)
    unknown = {name for row in rows for name in row} - set(schema.names) - {"sequence"}
    if unknown:
        raise ValueError(f"columns not in raw table {table}: {sorted(unknown)}")
    completed = [_complete_row(row, contract, ingested_at) for row in rows]
    arrow_table = pa.Table.from_pylist(
        [{name: row.get(name) for name in schema.names} for row in completed], schema=schema
    )
    table_dir = raw_layout.change_log_dir(raw_layout.DataLayout(Path(data_dir)).raw, contract)
    for earlier in table_dir.glob(f"*/{raw_layout.batch_folder(batch_id)}"):
        shutil.rmtree(earlier)
    batch_dir = table_dir / raw_layout.hour_folder_of(ingested_at) / raw_layout.batch_folder(batch_id)
    batch_dir.mkdir(parents=True)
    pq.write_table(arrow_table, batch_dir / "part-00000.parquet", coerce_timestamps="us")
    return batch_dir
