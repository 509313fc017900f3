"""Issue 21 item 7: two writes to one item in one millisecond, from Kinesis Data Streams
for DynamoDB records with no sequence number, have ONE winner: the same in the raw
current-state view (what Hudi's upsert holds), in staging built in one run, in staging
built incrementally batch by batch, and as the history's current version. Before, raw
broke the tie by the greatest eventID and staging by the earliest ingestion.

The rows are written with samples.raw_fixtures, whose ordering value
tests/pipeline/test_ordering.py pins to the decoder's; that test also covers Spark and Hudi."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from dbt_tables import query

from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.raw_fixtures import write_raw_batch

pytestmark = pytest.mark.dbt

WRITTEN = datetime(2024, 3, 1, 9, 30, 0, 123000, tzinfo=timezone.utc)  # both writes: this millisecond
LESSER_ID = "0d6b2a64-4f8e-4a4e-9d3c-5b1f0c6a7e21"
GREATER_ID = "f3a1c9e0-7b2d-4c55-8e6f-9a0b1c2d3e4f"
MODELS = ["stg_dynamodb__customers", "stg_dynamodb__customers_changes", "dim_customers_history"]


def _write(data_dir: Path, batch_id: int, event_id: str, email: str) -> None:
    change = {"id": "c9", "cust_name": "Ivy", "email": email, "registration_date": "2024-01-01T00:00:00Z",
              "_event_name": "MODIFY", "_event_ts": WRITTEN, "_event_id": event_id}
    write_raw_batch(data_dir, "customers", batch_id, [change],
                    datetime(2024, 3, 1, 10 + batch_id, tzinfo=timezone.utc))


def _winners(data_dir: Path) -> dict[str, str]:
    return {
        "raw current state": query(data_dir, "select _event_id from raw.customers"),
        "staging": query(data_dir, "select _event_id from lakehouse_staging.stg_dynamodb__customers"),
        "history": query(data_dir, "select version_event_id from lakehouse_marts.dim_customers_history "
                                   "where is_current"),
    }


def _build(data_dir: Path) -> None:
    result = run_dbt(["run", "--select", *MODELS], data_dir)
    assert result.success, result.exception


@pytest.mark.parametrize("greater_arrives", ["first", "last"])
def test_one_winner_for_two_writes_in_one_millisecond(tmp_path, greater_arrives):
    arrivals = [(LESSER_ID, "lesser@example.com"), (GREATER_ID, "greater@example.com")]
    if greater_arrives == "first":
        arrivals.reverse()
    one_run, batch_by_batch = tmp_path / "one_run", tmp_path / "batch_by_batch"
    for batch_id, (event_id, email) in enumerate(arrivals):
        _write(one_run, batch_id, event_id, email)
        _write(batch_by_batch, batch_id, event_id, email)
        _build(batch_by_batch)
    _build(one_run)

    expected = dict.fromkeys(("raw current state", "staging", "history"), [(GREATER_ID,)])
    assert _winners(one_run) == expected
    assert _winners(batch_by_batch) == expected
