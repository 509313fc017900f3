"""dbt on a new data directory reuses the parse another data directory's command saved,
and each data directory's database stays its own (profiles.yml names none of them:
dbt_project/lakehouse_dbt/duckdb_database.py)."""
from __future__ import annotations

from datetime import datetime, timezone

from dbt_tables import query

from streaming.io.layout import DataLayout
from streaming.operations.marts_summary import MARTS_SCHEMA
from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.raw_fixtures import write_raw_batch

INGESTED = datetime(2024, 3, 1, 2, tzinfo=timezone.utc)


def test_two_new_data_dirs_in_one_process_share_a_parse_and_build_only_their_own_rows(tmp_path):
    customers = {"first": ["a1", "a2"], "second data dir": ["b1"]}
    for name, ids in customers.items():
        rows = [{"id": customer_id, "cust_name": f"Name {customer_id}", "email": f"{customer_id}@example.com",
                 "_event_ts": INGESTED, "sequence": 1} for customer_id in ids]
        write_raw_batch(tmp_path / name, "customers", 0, rows, INGESTED)
        result = run_dbt(["build", "--select", "+dim_customers", "--exclude", "test_type:data"], tmp_path / name)
        assert result.success, result.exception

    # The first command may have parsed (no parse of this kind saved yet); the second,
    # the same kind of command on a data directory dbt has never seen, must not.
    second_log = (DataLayout(tmp_path / "second data dir").dbt_logs / "dbt.log").read_text(encoding="utf-8")
    assert "Unable to do partial parsing" not in second_log
    assert "Partial parsing enabled" in second_log
    for name, ids in customers.items():
        built = query(tmp_path / name, f"select customer_id from {MARTS_SCHEMA}.dim_customers order by 1")
        assert built == [(customer_id,) for customer_id in ids], f"{name} holds its own customers, and only them"
