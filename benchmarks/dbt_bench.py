"""dbt incremental efficiency: raw change rows written straight into the raw layout
with DuckDB SQL (millions of rows through Spark would take far longer than the dbt
runs being measured), then an incremental `dbt build` after +1% new events timed
against `dbt build --full-refresh` over the same final data.

The measured builds run in the steady state of a scheduled deployment: the history,
its build, one earlier +1% batch and its incremental build, then +1% batches. The
look-back window (raw_lookback_hours before the newest processed row) of each then
holds the increment before it and the new one, as a scheduled run's window holds the
batches since the run before, not a slice of the whole history. One increment's build
counts the raw bytes it reads (DuckDB's file log, which slows a large build down);
the next one, with the log off, is the one timed against the full refresh.

Both timed builds run as a scheduled production build does: with
`--exclude-resource-type unit_test`, the same flag for both so the ratio stays fair.
Unit tests check the SQL logic against fixed inputs, not the data: dbt recommends
running them in development and CI (`make test` runs them: tests/dbt builds without
the flag), not in every scheduled build. The data tests do run in both builds; the
incremental one checks only the rows it could have written, the full refresh every
row (macros/tests/changed_rows_only.sql).
"""
from __future__ import annotations

import json
import shutil
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb

from streaming.contracts.evolution import contract_version
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.contracts.model import INGEST_HOUR_COLUMN
from streaming.io import layout as raw_layout
from streaming.io.layout import DataLayout

CUSTOMER_SHARE = 0.3
EVENTS_PER_KEY = 3
STAGING_MODELS = ("stg_dynamodb__customers", "stg_dynamodb__orders")
# Every incremental table the comparison of an incremental build with a full refresh
# covers: the staging merges and the merges downstream of them.
COMPARED_TABLES = (
    *(f"lakehouse_staging.{model}" for model in STAGING_MODELS),
    "lakehouse_staging.stg_dynamodb__customers_changes",
    "lakehouse_intermediate.int_orders__lines_unnested",
    "lakehouse_marts.fct_orders",
    "lakehouse_marts.fct_order_lines",
    "lakehouse_marts.dim_customers",
    "lakehouse_marts.dim_customers_history",
)
_FIRST_INGEST = datetime(2026, 1, 10, tzinfo=timezone.utc)
# The history arrives as this many raw batches, one a day, as a stream's history
# does: an incremental run re-reads the batches of its look-back window (the
# project's raw_lookback_hours before the newest processed row), and with the whole
# history in one batch that window would be the whole history.
HISTORY_BATCHES = 20
# Further apart than the project's raw_lookback_hours, so the measured incremental
# run reads only the new batch plus the earlier increment (its look-back window).
_INGEST_GAP = timedelta(days=1)
# As a scheduled production build runs (see the module docstring).
PRODUCTION_BUILD = ["build", "--exclude-resource-type", "unit_test"]

_EVENT_COLUMNS = """
    case when {event_no} = 0 then 'INSERT' when i % 20 = 0 then 'REMOVE' else 'MODIFY' end as _event_name,
    {event_no} > 0 and i % 20 = 0 as _is_deleted,
    false as _is_ttl_delete,
    timestamptz '2026-01-01 00:00:00+00' + to_seconds(i::bigint) as _event_ts,
    lpad(i::varchar, 64, '0') as _sequence_number,
    strftime(timestamptz '2026-01-01 00:00:00+00' + to_seconds(i::bigint), '%Y%m%d%H%M%S%f')
        || lpad(i::varchar, 64, '0') as _ordering_value,
    'evt-' || i as _event_id,
    i as _event_no,
    '{table}' as _source_table,
    null::varchar as _extra_attributes,
    timestamptz '{ingested_at}' as _ingested_at
"""


def _key_expression(first: int, keys: int, new_batch: bool) -> str:
    # A new batch touches existing keys and about 10% more new ones, spread evenly.
    if new_batch:
        return f"(i * 7919) % {int(keys * 1.1) + 1}"
    return f"(i - {first}) % {keys}"


def _customers_sql(first: int, rows: int, keys: int, new_batch: bool, ingested_at: datetime) -> str:
    key = _key_expression(first, keys, new_batch)
    event_no = "1" if new_batch else f"(i - {first}) // {keys}"
    deleted = f"({event_no} > 0 and i % 20 = 0)"
    return f"""
        select
            'cust-' || lpad(({key})::varchar, 8, '0') as id,
            'Name ' || (({key}) % 97) as cust_name,
            case when not {deleted} then 'user' || i || '@example.com' end as email,
            case when not {deleted} then '2025-06-01T10:00:00Z' end as registration_date,
            right(lpad(({key})::varchar, 8, '0'), 1) as id_suffix,
            {_EVENT_COLUMNS.format(event_no=event_no, table='customers', ingested_at=ingested_at.isoformat())}
        from range({first}, {first + rows}) as r(i)
    """


def _orders_sql(first: int, rows: int, keys: int, new_batch: bool, ingested_at: datetime) -> str:
    key = _key_expression(first, keys, new_batch)
    event_no = "1" if new_batch else f"(i - {first}) // {keys}"
    deleted = f"({event_no} > 0 and i % 20 = 0)"
    statuses = "['PLACED', 'PAID', 'SHIPPED', 'DELIVERED', 'CANCELLED']"
    return f"""
        select
            'cust-' || lpad((({key}) // 3)::varchar, 8, '0') as customer_id,
            'ord-' || lpad(({key})::varchar, 10, '0') as order_id,
            case when not {deleted} then '2026-01-01T00:00:00Z' end as created_at,
            case when not {deleted} then {statuses}[1 + i % 5] end as status,
            case when not {deleted} then ((i % 100000) / 100.0)::decimal(18, 2)::varchar end as amount,
            case when not {deleted} then ['EUR', 'USD', 'GBP'][1 + i % 3] end as currency,
            case when not {deleted} then i % 7 = 0 end as is_gift,
            null::varchar as gift_message,
            case when not {deleted} then ['web', 'promo'] end as tags,
            case when not {deleted} then ['1.25', '0.40'] end as package_weights_kg,
            case when not {deleted} then '\\x00\\xff\\x10'::blob end as receipt_digest,
            null::blob[] as attachment_checksums,
            case when not {deleted} then [
                {{'sku': 'SKU-' || (i % 50), 'quantity': '2', 'unit_price': '10.50'}},
                {{'sku': 'SKU-' || (i % 31), 'quantity': '1', 'unit_price': '3.99'}}
            ] end as line_items,
            case when not {deleted} then
                {{'street': i || ' Main St', 'city': 'Berlin', 'postcode': '10115', 'country': 'DE'}}
            end as shipping_address,
            right(lpad((({key}) // 3)::varchar, 8, '0'), 1) as customer_suffix,
            {_EVENT_COLUMNS.format(event_no=event_no, table='orders', ingested_at=ingested_at.isoformat())}
        from range({first}, {first + rows}) as r(i)
    """


def write_raw_changes(data_dir: Path, batch_id: int, first_event: int, rows: int, key_space: int,
                      ingested_at: datetime, *, new_batch: bool, batches: int = 1) -> dict[str, int]:
    """`rows` change rows of both tables as raw batch `batch_id` (event numbers from `first_event`).

    With `batches` > 1 the rows of each table are split in event order into that many
    raw batches `batch_id`, `batch_id` + 1, ..., ingested one day apart from `ingested_at`.
    Each batch lands where the local sink puts it (`streaming.io.layout`):
    `raw/<raw_table>_changes/_ingest_hour=<hour of its _ingested_at>/_batch_id=<n>/`, and,
    like the sink's files, its files hold `_batch_id` as a column but not `_ingest_hour`.
    """
    customer_rows = int(rows * CUSTOMER_SHARE)
    plan = {
        "customers": (_customers_sql, first_event, customer_rows, max(1, int(key_space * CUSTOMER_SHARE))),
        "orders": (_orders_sql, first_event + customer_rows, rows - customer_rows,
                   max(1, key_space - int(key_space * CUSTOMER_SHARE))),
    }
    raw_root = DataLayout(data_dir).raw
    contracts = load_contracts(SAMPLE_CONTRACTS_DIR)
    written = {}
    with duckdb.connect() as con:
        con.execute("set TimeZone = 'UTC'")
        for table, (builder, first, count, keys) in plan.items():
            contract = contracts[table]
            sql = builder(first, count, keys, new_batch, ingested_at)
            chunk = f"((_event_no - {first}) * {batches} // {max(1, count)})"
            split = (f"select * exclude (_event_no) replace (_ingested_at + to_days({chunk}::integer) as _ingested_at), "
                     f"({batch_id} + {chunk})::bigint as _batch_id, "
                     f"'{contract_version(contract)}' as _contract_version from ({sql})")
            # One pass writes every batch folder (with `_batch_id` kept in the files) into
            # scratch; each is then moved under the ingest hour its rows carry.
            scratch = raw_root / raw_layout.TEMPORARY_FOLDER / f"bench-{contract.changes_table}"
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.parent.mkdir(parents=True, exist_ok=True)
            con.execute(f"copy ({split}) to '{scratch}' (format parquet, partition_by (_batch_id), "
                        "write_partition_columns true, filename_pattern 'part-{i}')")
            for folder in sorted(scratch.glob(f"{raw_layout.BATCH_COLUMN}=*")):
                times = con.execute(f"select distinct _ingested_at from read_parquet('{folder}/*.parquet')").fetchall()
                if len(times) != 1:
                    raise RuntimeError(f"{folder} holds rows of {len(times)} ingestion times; a batch has one")
                batch_ingested_at = times[0][0]
                change_log = raw_layout.change_log_dir(raw_root, contract)
                # As the sink replays a batch: whatever an earlier write of it left goes first.
                for earlier in change_log.glob(f"*/{folder.name}"):
                    shutil.rmtree(earlier)
                target = change_log / raw_layout.hour_folder_of(batch_ingested_at) / folder.name
                target.parent.mkdir(parents=True, exist_ok=True)
                folder.rename(target)
            shutil.rmtree(scratch)
            written[table] = count
    return written


def _timed_build(data_dir: Path, args: list[str]) -> dict[str, Any]:
    from streaming.runtime.dbt_runner import run_dbt

    started = time.monotonic()
    result = run_dbt(args, data_dir)
    seconds = time.monotonic() - started
    # A test of severity warn reports "warn": the build still succeeded.
    failed = [str(node.node.unique_id) for node in (result.result or [])
              if str(node.status) not in {"success", "pass", "warn"}]
    if not result.success or failed:
        raise RuntimeError(f"dbt {' '.join(args)} failed: {result.exception or failed}")
    nodes = {str(node.node.name): float(node.execution_time) for node in result.result}
    return {"seconds": seconds, "staging_seconds": sum(nodes.get(model, 0.0) for model in STAGING_MODELS),
            "nodes": nodes}


def batch_bytes(data_dir: Path, batch_id: int) -> int:
    """Bytes of the raw files of batch `batch_id`, over every change log."""
    return sum(path.stat().st_size for path in (DataLayout(data_dir).raw).glob(
        f"*/{INGEST_HOUR_COLUMN}=*/{raw_layout.batch_folder(batch_id)}/*.parquet"))


def raw_reads_during(data_dir: Path, args: list[str]) -> tuple[dict[str, Any], dict[str, int]]:
    """Run a timed build and count what it read of the raw change logs.

    dbt-duckdb runs in this process, and DuckDB gives every connection to one database
    file the same instance: a connection opened here turns on that instance's
    FileSystem log (one entry per read, with its path and byte count) for the build.
    """
    raw = (DataLayout(data_dir).raw).resolve()
    with duckdb.connect(str(DataLayout(data_dir).dbt_database)) as con:
        con.execute("call enable_logging('FileSystem')")
        build = _timed_build(data_dir, args)
        entries = con.execute(
            "select message from duckdb_logs where type = 'FileSystem' and message like '%\"op\":\"READ\"%'"
        ).fetchall()
        con.execute("call disable_logging()")
    reads = [json.loads(message) for (message,) in entries]
    raw_reads = [read for read in reads if str(Path(read["path"]).resolve()).startswith(f"{raw}/")]
    files = [path for path in raw.glob(f"*/{raw_layout.CHANGE_LOG_FILE_GLOB}")]
    return build, {
        "bytes_read": sum(int(read["bytes"]) for read in raw_reads),
        "files_read": len({read["path"] for read in raw_reads}),
        "raw_bytes": sum(path.stat().st_size for path in files),
        "raw_files": len(files),
    }


def table_fingerprint(data_dir: Path) -> dict[str, list[int]]:
    """Row count and an order-independent hash sum of each compared table."""
    with duckdb.connect(str(DataLayout(data_dir).dbt_database), read_only=True) as con:
        return {
            table: [int(value) for value in con.execute(
                f"select count(*), coalesce(sum(hash(t)::hugeint), 0) from {table} as t"
            ).fetchone()]
            for table in COMPARED_TABLES
        }


def incremental_vs_full_refresh(data_dir: Path, rows: int, new_rows: int | None = None) -> dict[str, Any]:
    """`rows` raw change rows of history, then increments of `new_rows` each (default
    1% of `rows`); a fixed `new_rows` over several `rows` shows whether what an
    incremental build reads grows with the table or with the new data."""
    key_space = max(1, rows // EVENTS_PER_KEY)
    started = time.monotonic()
    write_raw_changes(data_dir, 0, 0, rows, key_space, _FIRST_INGEST, new_batch=False, batches=HISTORY_BATCHES)
    generate_seconds = time.monotonic() - started
    initial = _timed_build(data_dir, PRODUCTION_BUILD)
    new_rows = new_rows or max(1, rows // 100)
    last_history_ingest = _FIRST_INGEST + timedelta(days=HISTORY_BATCHES - 1)
    # The earlier increment: built untimed, it leaves the tables as a scheduled run does.
    write_raw_changes(data_dir, HISTORY_BATCHES, rows, new_rows, key_space, last_history_ingest + _INGEST_GAP,
                      new_batch=True)
    _timed_build(data_dir, PRODUCTION_BUILD)
    counted_batch, timed_batch = HISTORY_BATCHES + 1, HISTORY_BATCHES + 2
    write_raw_changes(data_dir, counted_batch, rows + new_rows, new_rows, key_space,
                      last_history_ingest + 2 * _INGEST_GAP, new_batch=True)
    counted, incremental_raw_reads = raw_reads_during(data_dir, PRODUCTION_BUILD)
    incremental_raw_reads["build_seconds_with_file_log"] = counted["seconds"]
    incremental_raw_reads["new_batch_bytes"] = batch_bytes(data_dir, counted_batch)
    incremental_raw_reads["window_bytes"] = (incremental_raw_reads["new_batch_bytes"]
                                             + batch_bytes(data_dir, HISTORY_BATCHES))
    write_raw_changes(data_dir, timed_batch, rows + 2 * new_rows, new_rows, key_space,
                      last_history_ingest + 3 * _INGEST_GAP, new_batch=True)
    incremental = _timed_build(data_dir, PRODUCTION_BUILD)
    after_incremental = table_fingerprint(data_dir)
    full_refresh = _timed_build(data_dir, [*PRODUCTION_BUILD, "--full-refresh"])
    after_full_refresh = table_fingerprint(data_dir)
    return {
        "rows": rows,
        "new_rows": new_rows,
        "history_batches": HISTORY_BATCHES,
        "generate_seconds": generate_seconds,
        "initial_build": initial,
        "incremental_build": incremental,
        "full_refresh_build": full_refresh,
        "ratio": incremental["seconds"] / full_refresh["seconds"],
        "staging_ratio": incremental["staging_seconds"] / full_refresh["staging_seconds"],
        "incremental_equals_full_refresh": after_incremental == after_full_refresh,
        # What the incremental build read of raw (every query: staging, marts, data
        # tests, the raw views' schema reads) against the raw change logs on disk, the
        # new batch, and the batches of its look-back window (the earlier increment
        # and the new one).
        "incremental_raw_reads": incremental_raw_reads,
    }
