"""Keys made of several key columns (macros/keys/composite_key.sql) are unambiguous:
two different key tuples never give one key text, on a real DuckDB build. DynamoDB
key values often hold `#` (single-table designs: `CUSTOMER#42`), and may hold any
other character, so no separator alone can keep them apart; the macro escapes it.
The Athena form of the same macro is compiled and checked in test_dbt_athena.py."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
from composite_key_cases import CUSTOMER_KEYS, ORDER_KEYS, composite_key
from dbt_scenario import EVENT_WINDOW, WITHOUT_UNIT_TESTS
from dbt_tables import pseudonym

from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.raw_fixtures import write_raw_batch

pytestmark = pytest.mark.dbt

INGESTED_AT = datetime(2024, 3, 1, 12, tzinfo=UTC)
EVENT_TS = datetime(2024, 3, 1, 11, tzinfo=UTC)


def _query(data_dir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as con:
        return con.sql(sql).fetchall()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("composite_keys")
    write_raw_batch(data_dir, "customers", 0, [
        {"id": customer_id, "cust_name": name, "email": "someone@example.com",
         "registration_date": "2024-03-01T00:00:00Z", "_event_ts": EVENT_TS, "sequence": position}
        for position, (customer_id, name) in enumerate(CUSTOMER_KEYS)
    ], INGESTED_AT)
    write_raw_batch(data_dir, "orders", 0, [
        {"customer_id": customer_id, "order_id": order_id, "created_at": "2024-03-01T10:00:00Z", "status": "PAID",
         "amount": "1.00", "currency": "EUR", "line_items": [{"sku": "A", "quantity": "1", "unit_price": "1.00"}],
         "_event_ts": EVENT_TS, "sequence": 100 + position}
        for position, (customer_id, order_id) in enumerate(ORDER_KEYS)
    ], INGESTED_AT)
    # Every model and data test; the unit tests read no raw table (WITHOUT_UNIT_TESTS).
    result = run_dbt(["build", *EVENT_WINDOW, *WITHOUT_UNIT_TESTS], data_dir)
    assert result.exception is None, result.exception
    # Only warnings may remain: the orders' customers are not among the customers.
    failed = [(r.node.name, str(r.status)) for r in result.result if str(r.status) not in {"success", "pass", "warn"}]
    assert result.success and failed == [], failed
    return data_dir


def test_orders_with_look_alike_keys_keep_distinct_order_keys(built: Path) -> None:
    expected = sorted((c, o, composite_key(c, o)) for c, o in ORDER_KEYS)
    for table in ("lakehouse_staging.stg_dynamodb__orders", "lakehouse_marts.fct_orders"):
        assert sorted(_query(built, f"select customer_id, order_id, order_key from {table}")) == expected, table


def test_order_lines_of_look_alike_keys_keep_distinct_line_keys(built: Path) -> None:
    expected = sorted((composite_key(c, o), composite_key(c, o, "1")) for c, o in ORDER_KEYS)
    for table in ("lakehouse_intermediate.int_orders__lines_unnested", "lakehouse_marts.fct_order_lines"):
        assert sorted(_query(built, f"select order_key, order_line_key from {table}")) == expected, table


def test_customers_with_look_alike_keys_keep_distinct_customer_keys(built: Path) -> None:
    """customer_key is the keyed pseudonym of the same composite text (the HMAC is
    computed here with Python's hmac under the session's key)."""
    expected = sorted(pseudonym("customer_key", composite_key(i, n)) for i, n in CUSTOMER_KEYS)
    assert sorted(key for (key,) in _query(built, "select customer_key from lakehouse_marts.dim_customers")) == expected
    history = _query(built, "select distinct customer_key from lakehouse_marts.dim_customers_history")
    assert sorted(key for (key,) in history) == expected
