"""A CDC scenario in four raw batches: inserts, updates, deletes (user and TTL), a
badly formatted amount, then late older events and a redelivered event that arrive
when the newer changes they lose to are already outside the incremental lookback."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from streaming.samples.raw_fixtures import write_raw_batch

DAY_1 = datetime(2024, 3, 1, tzinfo=timezone.utc)
DAY_2 = DAY_1 + timedelta(days=1)
# Ten or more hours apart: more than the default raw_lookback_hours (3).
INGESTED = {
    0: DAY_1 + timedelta(hours=1),
    1: DAY_1 + timedelta(hours=11),
    2: DAY_2 + timedelta(hours=9),
    3: DAY_2 + timedelta(hours=20),
}
BATCHES = tuple(INGESTED)
# The scenario's events lie years before the clock: a build without an event-time
# range would run the microbatch model for the days before now and skip them. Builds
# pass the range an orchestrator passes for the scenario's days (end exclusive).
EVENT_WINDOW = ["--event-time-start", "2024-03-01", "--event-time-end", "2024-03-03"]
# The scenario's own marts (customers and orders), everything they read (seeds, sources,
# staging, intermediate) and their data and unit tests: about 60% of the project's
# nodes. Not the `app` table's models, whose raw tables the scenario leaves empty, nor
# mart_freshness, which reads the app's mart too. For builds of tests about these
# models (test_dbt_local.py's incremental builds); the session's scenario build
# (conftest.py, scenario_build) builds every node.
SCENARIO_MARTS = ("dim_customers", "dim_customers_history", "fct_orders", "fct_order_lines",
                  "agg_daily_customer_activity", "agg_daily_revenue_by_status")
SCENARIO_SELECTION = ["--select", *(f"+{mart}" for mart in SCENARIO_MARTS)]
# Leaves the unit tests out of a build. They mock every input a model reads (the
# `unit_tests:` of dbt_project/models), so their outcome does not depend on the data a
# build finds: a build whose tests are about that data runs without them. They cost 4
# of a full build's 12.5 s of CPU (2026-11-27). The session's scenario build
# (conftest.py) runs every one, and test_dbt_local.py fails unless each passes.
WITHOUT_UNIT_TESTS = ["--exclude-resource-type", "unit_test"]


@dataclass(frozen=True)
class ScenarioBuild:
    """A data directory with the scenario built, and dbt's result of that build."""
    data_dir: Path
    result: Any  # dbtRunnerResult


def _at(day: datetime, hour: int, minute: int = 0) -> datetime:
    return day + timedelta(hours=hour, minutes=minute)


def _line(sku: str, quantity: str, unit_price: str) -> dict[str, str]:
    return {"sku": sku, "quantity": quantity, "unit_price": unit_price}


CUSTOMERS = {
    0: [
        {"id": "c1", "cust_name": "Ann", "email": " Ann@Example.COM ", "registration_date": "2024-03-01T00:00:00Z", "_event_ts": _at(DAY_1, 0), "sequence": 1},
        {"id": "c2", "cust_name": "Bob", "email": "bob@gmail.com", "registration_date": "2024-03-01T00:01:00Z", "_event_ts": _at(DAY_1, 0, 1), "sequence": 2},
        {"id": "c3", "cust_name": " Cy ", "email": "not-an-email", "registration_date": "March 1st", "_event_ts": _at(DAY_1, 0, 2), "sequence": 3},
        {"id": "c4", "cust_name": "Dee", "email": "dee@outlook.com", "registration_date": "2024-03-01T00:03:00+01:00", "_event_ts": _at(DAY_1, 0, 3), "sequence": 4},
    ],
    1: [
        {"id": "c1", "cust_name": "Ann", "email": "ann@new.example.com", "registration_date": "2024-03-01T00:00:00Z", "_event_name": "MODIFY", "_event_ts": _at(DAY_1, 9), "sequence": 10},
        {"id": "c2", "cust_name": "Bob", "_event_name": "REMOVE", "_event_ts": _at(DAY_1, 9, 30), "sequence": 11},
        {"id": "c4", "cust_name": "Dee", "_event_name": "REMOVE", "_is_ttl_delete": True, "_event_ts": _at(DAY_1, 9, 40), "sequence": 12},
        {"id": "c5", "cust_name": "Eve", "email": "eve@yahoo.com", "registration_date": "2024-03-01T09:50:00Z", "_event_ts": _at(DAY_1, 9, 50), "sequence": 13},
    ],
    2: [
        {"id": "c3", "cust_name": " Cy ", "email": "cy@yahoo.com", "registration_date": "2024-03-01T00:02:00Z", "_event_name": "MODIFY", "_event_ts": _at(DAY_2, 8), "sequence": 20},
        {"id": "c6", "cust_name": "Fay", "email": "fay@example.org", "registration_date": "2024-03-02T08:30:00Z", "_event_ts": _at(DAY_2, 8, 30), "sequence": 21},
    ],
    3: [
        # Late and older than batch 1's change of c1: must not win.
        {"id": "c1", "cust_name": "Ann", "email": "stale@example.com", "registration_date": "2024-03-01T00:00:00Z", "_event_name": "MODIFY", "_event_ts": _at(DAY_1, 5), "sequence": 5},
        # Redelivery of batch 0's INSERT of c2 (same event): must not resurrect c2.
        {"id": "c2", "cust_name": "Bob", "email": "bob@gmail.com", "registration_date": "2024-03-01T00:01:00Z", "_event_ts": _at(DAY_1, 0, 1), "sequence": 2},
        {"id": "c7", "cust_name": "Gus", "email": "gus@web.de", "registration_date": "2024-03-02T10:00:00Z", "_event_ts": _at(DAY_2, 10), "sequence": 22},
    ],
}

_ORDER_DETAILS = {
    "is_gift": False,
    "tags": ["web"],
    "package_weights_kg": ["1.250"],
    "receipt_digest": bytes.fromhex("00ff10"),
    "attachment_checksums": [b"\x01"],
    "shipping_address": {"street": "Main St 1", "city": "Berlin", "postcode": "10115", "country": "DE"},
}

ORDERS = {
    0: [
        {"customer_id": "c1", "order_id": "o1", "created_at": "2024-03-01T01:00:00Z", "status": "PAID", "amount": "20.30", "currency": "EUR",
         "line_items": [_line("A", "1", "0.30"), _line("B", "2", "10.00")], "_event_ts": _at(DAY_1, 1), "sequence": 30, **_ORDER_DETAILS},
        {"customer_id": "c2", "order_id": "o2", "created_at": "2024-03-01T02:00:00Z", "status": "PLACED", "amount": "5.00", "currency": "USD",
         "line_items": [_line("C", "5", "1.00")], "_event_ts": _at(DAY_1, 2), "sequence": 31, **_ORDER_DETAILS},
    ],
    1: [
        {"customer_id": "c1", "order_id": "o1", "created_at": "2024-03-01T01:00:00Z", "status": "SHIPPED", "amount": "20.30", "currency": "EUR",
         "line_items": [_line("A", "1", "0.30"), _line("B", "2", "10.00")], "_event_name": "MODIFY", "_event_ts": _at(DAY_1, 10), "sequence": 40, **_ORDER_DETAILS},
        {"customer_id": "c5", "order_id": "o3", "created_at": "2024-03-01T09:55:00Z", "status": "DELIVERED", "amount": "0.30", "currency": "eur",
         "line_items": [_line("D", "3", "0.10")], "_event_ts": _at(DAY_1, 9, 55), "sequence": 41, **_ORDER_DETAILS},
    ],
    2: [
        {"customer_id": "c2", "order_id": "o2", "_event_name": "REMOVE", "_event_ts": _at(DAY_2, 7), "sequence": 50},
        {"customer_id": "c6", "order_id": "o4", "created_at": "2024-03-02T08:40:00Z", "status": "CANCELLED", "amount": "100.00", "currency": "GBP",
         "line_items": [_line("E", "1", "100.00")], "_event_ts": _at(DAY_2, 8, 40), "sequence": 51},
        # 12.345 does not fit decimal(18,2): kept with a null amount and flagged.
        {"customer_id": "c6", "order_id": "o5", "created_at": "2024-03-02T08:45:00Z", "status": "PLACED", "amount": "12.345", "currency": "GBP",
         "_event_ts": _at(DAY_2, 8, 45), "sequence": 52},
    ],
    3: [
        # Late and older than batch 1's SHIPPED: must not win.
        {"customer_id": "c1", "order_id": "o1", "created_at": "2024-03-01T01:00:00Z", "status": "PLACED", "amount": "20.30", "currency": "EUR",
         "line_items": [_line("A", "1", "0.30"), _line("B", "2", "10.00")], "_event_name": "MODIFY", "_event_ts": _at(DAY_1, 0, 30), "sequence": 29, **_ORDER_DETAILS},
        {"customer_id": "c7", "order_id": "o6", "created_at": "2024-03-02T10:05:00Z", "status": "PAID", "amount": "7.50", "currency": "EUR",
         "line_items": [_line("F", "3", "2.50")], "_event_ts": _at(DAY_2, 10, 5), "sequence": 53, **_ORDER_DETAILS},
    ],
}

def write_batch(data_dir: Path, batch_id: int) -> None:
    write_raw_batch(data_dir, "customers", batch_id, CUSTOMERS[batch_id], INGESTED[batch_id])
    write_raw_batch(data_dir, "orders", batch_id, ORDERS[batch_id], INGESTED[batch_id])
