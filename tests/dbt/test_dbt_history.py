"""Exact customer history: dim_customers_history against an oracle computed in Python
from the generator's true events, delivered shuffled, duplicated and late over several
raw batches (every incremental build == the oracle of what had arrived == a full
refresh); and agg_daily_customer_activity against the true events per day, after the
real stream landed the generated CDC."""

from __future__ import annotations

import random
import shutil
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dbt_scenario import WITHOUT_UNIT_TESTS
from dbt_tables import pseudonym

from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR
from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.generator import CUSTOMERS, TrueEvent, generate_cdc, land_cdc
from streaming.samples.raw_fixtures import write_raw_batch

pytestmark = pytest.mark.dbt

# Events from 20:00 on: a key's changes (hours apart) run into the next day or two.
GENERATOR_START = datetime(2026, 11, 1, 20, tzinfo=timezone.utc)
HISTORY_BUILD = ["build", "--select", "stg_dynamodb__customers stg_dynamodb__customers_changes dim_customers_history",
                 "--indirect-selection", "cautious"]
# The first build runs the models' unit tests; the later builds (the same unit tests on
# the same inputs) leave them out (WITHOUT_UNIT_TESTS).
# Ten hours between batches: more than raw_lookback_hours (3), so a late event arrives
# after the newer changes of its key were built and fell out of the look-back window.
# Batch 3 comes one hour after batch 2: inside the window, read again.
BATCH_OFFSETS_H = (0, 10, 20, 21, 31)
DUPLICATE_SHARE = 0.15
# Compared with the oracle; customer_key, customer_name and email are pseudonyms
# (macros/cross_db: protect_pii), checked for consistency below instead.
COMPARED = ("customer_id", "version_number", "version_event_id", "version_event_name", "email_domain",
            "is_email_valid", "registration_date", "valid_from", "valid_to", "is_current", "is_deleted",
            "is_ttl_delete")


@dataclass(frozen=True)
class Delivery:
    event: TrueEvent
    event_id: str
    sequence: int  # order of the true events: DynamoDB Streams' sequence number


def _raw_row(delivery: Delivery) -> dict[str, Any]:
    event = delivery.event
    customer_id, cust_name = event.key
    row: dict[str, Any] = {"id": customer_id, "cust_name": cust_name, "_event_name": event.event_name,
                           "_is_ttl_delete": event.is_ttl_delete, "_event_ts": event.event_time,
                           "sequence": delivery.sequence, "_event_id": delivery.event_id}
    if event.new_image is not None:
        row["email"] = event.new_image["email"]["S"]
        row["registration_date"] = event.new_image["registrationDate"]["S"]
    return row



def _oracle(deliveries: list[Delivery]) -> set[tuple]:
    """The expected rows (COMPARED columns) from the distinct events delivered so far."""
    per_key: dict[tuple[str, ...], dict[str, Delivery]] = defaultdict(dict)
    for delivery in deliveries:
        per_key[delivery.event.key][delivery.event_id] = delivery
    rows = set()
    for (customer_id, _name), distinct in per_key.items():
        # The ordering value is event time then sequence number: compare the two.
        ordered = sorted(distinct.values(), key=lambda d: (d.event.event_time, d.sequence))
        version_number = 0
        for position, delivery in enumerate(ordered):
            event = delivery.event
            if event.event_name == "REMOVE":
                continue
            version_number += 1
            following = ordered[position + 1].event if position + 1 < len(ordered) else None
            email = event.new_image["email"]["S"].strip().lower()
            registered = datetime.strptime(event.new_image["registrationDate"]["S"], "%Y-%m-%dT%H:%M:%SZ")
            ended_by_delete = following is not None and following.event_name == "REMOVE"
            rows.add((
                customer_id, version_number, delivery.event_id, event.event_name, pseudonym("email", email.split("@")[1]), True,
                registered, _naive_utc(event.event_time),
                _naive_utc(following.event_time) if following else None, following is None,
                ended_by_delete, ended_by_delete and following.is_ttl_delete,
            ))
    return rows


def _naive_utc(moment: datetime) -> datetime:
    return moment.astimezone(timezone.utc).replace(tzinfo=None)


def _deliver(events: list[TrueEvent], batches: int, rng: random.Random) -> list[list[Delivery]]:
    """Each true event in a random batch, in random order within it; a share of them
    delivered again in a later batch (the same eventID, as a Kinesis redelivery)."""
    distinct = [Delivery(event, f"evt-{index:05d}", index + 1) for index, event in enumerate(events)]
    assigned: list[list[Delivery]] = [[] for _ in range(batches)]
    for delivery in distinct:
        batch = rng.randrange(batches)
        assigned[batch].append(delivery)
        if batch + 1 < batches and rng.random() < DUPLICATE_SHARE:
            assigned[rng.randrange(batch + 1, batches)].append(delivery)
    for batch in assigned:
        rng.shuffle(batch)
    return assigned


def _history(data_dir: Path) -> list[dict[str, Any]]:
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as con:
        relation = con.sql("select * from lakehouse_marts.dim_customers_history")
        return [dict(zip(relation.columns, row)) for row in relation.fetchall()]


def _assert_success(result) -> None:
    assert result.exception is None, result.exception
    failed = [(r.node.unique_id, str(r.status), r.message) for r in result.result if str(r.status) not in {"success", "pass"}]
    assert result.success and not failed, failed


def test_history_equals_the_oracle_after_every_incremental_build_and_a_full_refresh(tmp_path: Path) -> None:
    cdc = generate_cdc(seed=11, customers=40, start=GENERATOR_START, delete_rate=0.2, ttl_delete_rate=0.1)
    events = cdc.true_events(CUSTOMERS)
    batches = _deliver(events, len(BATCH_OFFSETS_H), random.Random(5))
    ingested = [GENERATOR_START + timedelta(days=3, hours=offset) for offset in BATCH_OFFSETS_H]

    # The delivery must hold what the mart has to survive, or the comparison proves little.
    first_batch: dict[str, int] = {}
    newest_seen: dict[tuple, datetime] = {}
    late_older_events = 0
    for number, batch in enumerate(batches):
        late_older_events += sum(1 for d in batch if d.event.event_time < newest_seen.get(d.event.key, d.event.event_time))
        for d in batch:
            newest_seen[d.event.key] = max(newest_seen.get(d.event.key, d.event.event_time), d.event.event_time)
            first_batch.setdefault(d.event_id, number)
    redelivered = sum(1 for number, batch in enumerate(batches) for d in batch if first_batch[d.event_id] < number)
    assert late_older_events >= 10 and redelivered >= 10
    assert {e.event_name for e in events} == {"INSERT", "MODIFY", "REMOVE"} and any(e.is_ttl_delete for e in events)
    assert len({e.event_time.date() for e in events}) >= 2

    incremental_dir, full_dir = tmp_path / "incremental", tmp_path / "full"
    delivered: list[Delivery] = []
    for number, batch in enumerate(batches):
        for data_dir in (incremental_dir, full_dir):
            write_raw_batch(data_dir, "customers", number, [_raw_row(d) for d in batch], ingested[number])
        delivered += batch
        _assert_success(run_dbt([*HISTORY_BUILD, *(WITHOUT_UNIT_TESTS if number else [])], incremental_dir))
        history = _history(incremental_dir)
        assert {tuple(row[c] for c in COMPARED) for row in history} == _oracle(delivered), f"after batch {number}"
        assert len(history) == len(_oracle(delivered))

    _assert_success(run_dbt([*HISTORY_BUILD, "--full-refresh", *WITHOUT_UNIT_TESTS], full_dir))
    full, incremental = _history(full_dir), _history(incremental_dir)
    assert sorted(tuple(row.values()) for row in full) == sorted(tuple(row.values()) for row in incremental)

    # customer_key: one per DynamoDB key, never shared; names and e-mails never in clear.
    key_of_event = {d.event_id: d.event.key for d in delivered}
    customer_keys: dict[tuple, set[str]] = defaultdict(set)
    for row in full:
        customer_keys[key_of_event[row["version_event_id"]]].add(row["customer_key"])
    assert all(len(keys) == 1 for keys in customer_keys.values())
    assert len({key for keys in customer_keys.values() for key in keys}) == len(customer_keys)
    clear = {d.event.key[1] for d in delivered} | {e.new_image["email"]["S"].lower() for e in events if e.new_image}
    assert not clear & {value for row in full for value in (row["customer_name"], row["email"])}


@pytest.mark.spark
def test_daily_activity_counts_the_true_events_streamed_through_the_pipeline(spark, tmp_path: Path) -> None:
    from streaming.io.layout import DataLayout
    from streaming.operations.stream import stream

    layout = DataLayout(tmp_path / "data")
    cdc = generate_cdc(seed=21, customers=30, start=GENERATOR_START, record_format="mixed",
                       duplicate_rate=0.1, ttl_delete_rate=0.1)
    land_cdc(layout.landing, cdc, records_per_file=60)
    # The customers' contract alone: the mart counts customers' events (the orders' and
    # the app's records are quarantined, where no raw table of theirs is planned).
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    shutil.copy(SAMPLE_CONTRACTS_DIR / "customers.yml", contracts)
    # Two micro-batches (nine files), so that re-deliveries also land in a later batch
    # than the original (the stream de-duplicates only within a batch).
    stream(layout, sink="parquet", spark=spark, max_files_per_trigger=5, contracts_dir=str(contracts),
           out=lambda _line: None)

    truth: dict[date, Counter[str]] = defaultdict(Counter)
    for event in cdc.true_events(CUSTOMERS):
        kind = ("ttl_deletes" if event.is_ttl_delete else "deletes") if event.event_name == "REMOVE" else \
            {"INSERT": "registrations", "MODIFY": "profile_updates"}[event.event_name]
        truth[event.event_time.astimezone(timezone.utc).date()][kind] += 1
    days = sorted(truth)
    assert len(days) >= 2 and sum(day["ttl_deletes"] for day in truth.values()) > 0

    changes = str(layout.raw / "customers_changes" / "*" / "*" / "*.parquet")
    with duckdb.connect() as con:
        deliveries, distinct = con.execute(
            "select count(*), count(distinct _event_id) from read_parquet(?)", [changes]).fetchall()[0]
    assert deliveries > distinct == sum(sum(day.values()) for day in truth.values()), \
        "the change log must hold cross-batch re-deliveries, and every true event"

    window = ["--event-time-start", days[0].isoformat(), "--event-time-end", (days[-1] + timedelta(days=1)).isoformat()]
    _assert_success(run_dbt(["build", "--select", "+agg_daily_customer_activity", "--indirect-selection", "cautious",
                             *window], layout.root))
    with duckdb.connect(str(layout.root / "lakehouse.duckdb"), read_only=True) as con:
        activity = con.sql(
            """select activity_date, registrations, profile_updates, deletes, ttl_deletes, net_customer_change
               from lakehouse_marts.agg_daily_customer_activity order by 1""").fetchall()
    expected = [
        (day, truth[day]["registrations"], truth[day]["profile_updates"], truth[day]["deletes"],
         truth[day]["ttl_deletes"], truth[day]["registrations"] - truth[day]["deletes"] - truth[day]["ttl_deletes"])
        for day in days
    ]
    assert activity == expected
