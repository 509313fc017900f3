"""Backfill from DynamoDB exports: bootstrap + overlapping stream converge, retries are idempotent."""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
import logging
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest
from app_items import (
    app_contracts,
    audit,
    invoice,
    keys_of,
    tenant,
    user,
    write_app_full_export,
    write_app_incremental_export,
)
from packaged_contracts import packaged_contracts_dir

from streaming.cli import main
from streaming.contracts.loader import load_contracts
from streaming.io import layout as raw_layout
from streaming.io.dynamodb_export import read_export_manifest
from streaming.io.layout import DataLayout
from streaming.io.formats.parquet.sink import LocalParquetSink
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.operations.batches.backfill import (
    BackfillError,
    backfill,
    backfill_run_id,
    plan_backfill,
    run_backfill,
    run_log_path,
)
from streaming.operations.reconcile import reconcile
from streaming.operations.batches.recorded_batch import BACKFILLS
from streaming.operations.stream import stream
from streaming.pipeline.batch import Pipeline
from streaming.pipeline.sink_capabilities import SinkCapabilities
from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.export_writer import IncrementalChange, write_full_export
from streaming.samples.generator import CUSTOMERS, ORDERS, generate_cdc

UTC = timezone.utc
EXPORT_TIME = datetime(2026, 11, 1, 2, 0, 0, 250000, tzinfo=UTC)
# The stream starts this long before the export time, so both hold the same events.
OVERLAP = timedelta(hours=1)


def land(landing: Path, records: list[str]) -> None:
    folder = landing / "2026" / "11" / "01" / "00"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cdc-000001.jsonl").write_text("\n".join(records) + "\n", encoding="utf-8")


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")} \
        if root.exists() else {}


def batch_rows(folder: Path) -> list[tuple]:
    """The rows of one batch folder, `_ingested_at` aside (it is the time of the attempt)."""
    with duckdb.connect() as con:
        return con.execute(
            f"select * exclude (_ingested_at) from read_parquet('{folder}/*.parquet') order by _event_id"
        ).fetchall()


@pytest.fixture(scope="module")
def cdc():
    return generate_cdc(seed=31, customers=12, orders_per_customer=2, malformed_rate=0.02)


@pytest.fixture(scope="module")
def exports(cdc, tmp_path_factory):
    out = tmp_path_factory.mktemp("exports")
    return {table: write_full_export(out, table, cdc.state_at(table, EXPORT_TIME).values(), EXPORT_TIME)
            for table in (CUSTOMERS, ORDERS)}


@pytest.fixture(scope="module")
def lakes(spark, cdc, exports, tmp_path_factory):
    """`bootstrap`: both exports backfilled, then a stream from an hour before the export;
    `cdc_only`: the whole CDC history streamed, no export."""
    root = tmp_path_factory.mktemp("lakes")
    bootstrap, cdc_only = DataLayout(root / "bootstrap"), DataLayout(root / "cdc_only")
    # The two tables of the sample data: app's contracts would only add their raw tables
    # to each stream batch's plan. app's tables are still reconciled below, with 0 rows.
    contracts_dir = packaged_contracts_dir(root / "contracts", CUSTOMERS, ORDERS)
    printed: list[str] = []
    results = {table: backfill(bootstrap, path, sink="parquet", contracts_dir=contracts_dir, spark=spark,
                               out=printed.append)
               for table, path in exports.items()}
    cutoff_us = int((EXPORT_TIME - OVERLAP).timestamp() * 1_000_000)
    overlapping = [record for record, event_us in zip(cdc.records, cdc.arrival_times_us) if event_us >= cutoff_us]
    land(bootstrap.landing, overlapping)
    stream(bootstrap, sink="parquet", contracts_dir=contracts_dir, spark=spark, out=printed.append)
    land(cdc_only.landing, cdc.records)
    stream(cdc_only, sink="parquet", contracts_dir=contracts_dir, spark=spark, out=printed.append)
    export_us = int(EXPORT_TIME.timestamp() * 1_000_000)
    overlap_events = [t for t in cdc.arrival_times_us if t >= cutoff_us]
    return {"bootstrap": bootstrap, "cdc_only": cdc_only, "results": results, "printed": printed,
            "contracts_dir": contracts_dir,
            "before_export": sum(t < export_us for t in overlap_events),
            "after_export": sum(t > export_us for t in overlap_events)}


pytestmark = pytest.mark.spark


def test_export_bootstrap_plus_overlapping_stream_equals_cdc_alone(lakes, cdc, exports):
    assert lakes["before_export"] > 0 and lakes["after_export"] > 0, "the stream must overlap the export time"
    contracts = load_contracts()
    report = reconcile(str(lakes["bootstrap"].raw), str(lakes["cdc_only"].raw), contracts)
    assert report.ok, "\n".join(report.lines())
    live_keys = {table: sum(item is not None for item in state.values()) for table, state in cdc.expected_state.items()}
    # Tables the sample data holds no change of (app's) are compared too, with 0 rows.
    assert {t.table: t.target_rows for t in report.tables} == {t: live_keys.get(t, 0) for t in contracts}
    # Not vacuous: the export alone is stale, the stream's later events changed the state.
    for table, export_dir in exports.items():
        assert not reconcile(str(export_dir), str(lakes["cdc_only"].raw), contracts).ok, table


def test_backfill_lands_every_item_under_a_negative_run_id(lakes, exports):
    for table, result in lakes["results"].items():
        manifest = read_export_manifest(exports[table])
        assert result.batch_id == backfill_run_id(manifest.export_id) < 0
        assert result.items == manifest.item_count == result.landed + result.quarantined
        assert result.quarantined == 0
        assert list((lakes["bootstrap"].raw / f"{table}_changes").glob(f"*/_batch_id={result.batch_id}"))
    assert lakes["results"][CUSTOMERS].batch_id != lakes["results"][ORDERS].batch_id
    printed = lakes["printed"]
    assert any(line.startswith("  [1/2] ") for line in printed), "progress per data file"
    assert any(line.startswith(f"backfill {read_export_manifest(exports[ORDERS]).export_id}") for line in printed)
    runs = BACKFILLS.succeeded(lakes["bootstrap"].root)
    assert {run["table"] for run in runs} == {CUSTOMERS, ORDERS}
    assert all(run["status"] == "succeeded" and run["landed"] > 0 for run in runs)
    assert not (lakes["bootstrap"].root / "backfills" / "_staging").exists() or \
        not any((lakes["bootstrap"].root / "backfills" / "_staging").iterdir())


def test_a_succeeded_backfill_run_again_writes_nothing_and_says_so(spark, lakes, exports):
    # Its batch may lie under later stream commits, where an append-only change log (the
    # Hudi sink's) would take its rows twice; the run log says it landed (the Hudi case runs
    # in tests/operations/batches/test_initial_load.py, a drill).
    layout = lakes["bootstrap"]
    first = lakes["results"][ORDERS]
    (folder,) = (layout.raw / f"{ORDERS}_changes").glob(f"*/_batch_id={first.batch_id}")
    folders_before = sorted(p.name for p in (layout.raw / f"{ORDERS}_changes").glob("*/*"))
    rows_before = batch_rows(folder)
    said: list[str] = []

    again = backfill(layout, exports[ORDERS], sink="parquet", contracts_dir=lakes["contracts_dir"], spark=spark,
                     out=said.append)

    assert again is None
    assert "already succeeded" in said[0] and f"landed={first.landed}" in said[0], said
    assert "lakehouse reprocess" in said[1]
    assert sorted(p.name for p in (layout.raw / f"{ORDERS}_changes").glob("*/*")) == folders_before
    assert batch_rows(folder) == rows_before
    assert len(rows_before) == first.landed
    assert reconcile(str(layout.raw), str(lakes["cdc_only"].raw), load_contracts()).ok


def test_backfill_dry_run_writes_nothing(exports, tmp_path, capsys):
    data_dir = tmp_path / "data"
    (data_dir / "raw").mkdir(parents=True)
    before = tree(data_dir)

    code = main(["backfill", "--data-dir", str(data_dir), "--export", str(exports[ORDERS]), "--dry-run"])

    out = capsys.readouterr().out
    manifest = read_export_manifest(exports[ORDERS])
    assert code == 0
    assert tree(data_dir) == before
    assert f"{manifest.item_count} items" in out and "export time 2026-11-01T02:00:00.250000" in out
    assert f"_batch_id={backfill_run_id(manifest.export_id)}" in out
    assert all(str(data_file.path) in out for data_file in manifest.data_files)
    assert "dry run: nothing was written" in out


def test_backfill_refuses_a_corrupt_export_or_the_wrong_table(exports, tmp_path, capsys):
    assert main(["backfill", "--data-dir", str(tmp_path), "--export", str(exports[ORDERS]),
                 "--table", CUSTOMERS, "--dry-run"]) == 2
    assert "not 'customers'" in capsys.readouterr().err
    summary = exports[CUSTOMERS] / "manifest-summary.json"
    original = summary.read_text()
    try:
        summary.write_text(json.dumps({**json.loads(original), "itemCount": 1}))
        assert main(["backfill", "--data-dir", str(tmp_path), "--export", str(exports[CUSTOMERS])]) == 2
        err = capsys.readouterr().err
        assert "md5 does not match" in err and "Traceback" not in err
    finally:
        summary.write_text(original)
    assert not (tmp_path / "raw").exists()


def test_run_id_is_deterministic_and_distinct_per_export():
    ids = {backfill_run_id(f"0179349840000{n}-abcdef0{n}") for n in range(10)}
    assert len(ids) == 10 and all(-(2**63) <= run_id < 0 for run_id in ids)
    assert backfill_run_id("01793498400000-0dbdece3") == backfill_run_id("01793498400000-0dbdece3")


class RowLosingParquetSink(LocalParquetSink):
    """The local sink with a bug: a data file of every table it stages goes missing. The
    pipeline counts the rows it hands over, so only the backfill's own check of what
    landed can notice."""

    def stage(self, changes, contract, batch_id, ingest_hour):
        staged = super().stage(changes, contract, batch_id, ingest_hour)
        if staged.folder is not None:
            next(Path(staged.folder).glob("part-*.parquet")).unlink()
        return staged


def readable_parquet_files(data_root: Path) -> list[str]:
    """What readers see: the change-log pattern of dbt's DuckDB raw views
    (macros/raw/register_raw_sources.sql) and the quarantine batches `status` lists."""
    patterns = [f"{data_root}/raw/*/_ingest_hour=*/_batch_id=*/*.parquet",
                f"{data_root}/quarantine/_batch_id=*/*.parquet"]
    with duckdb.connect() as con:
        return [row[0] for pattern in patterns for row in con.execute(f"select * from glob('{pattern}')").fetchall()]


def orders_only() -> dict:
    """The orders contract alone: an orders export lands nowhere else, and each further
    contract only adds planning time to the batch."""
    return {ORDERS: load_contracts()[ORDERS]}


def test_a_backfill_failing_its_check_leaves_nothing_for_readers(spark, exports, tmp_path):
    root = tmp_path / "data"
    contracts = orders_only()
    plan = plan_backfill(exports[ORDERS], contracts, root)
    pipeline = Pipeline(contracts, RowLosingParquetSink(str(root)), QuarantineWriter(str(root)))

    with pytest.raises(BackfillError, match="nothing was published"):
        run_backfill(spark, plan, pipeline, out=lambda _: None)

    assert readable_parquet_files(root) == []
    assert not list(root.rglob("*.parquet")), "the staged output is removed too"
    run = json.loads(run_log_path(root, plan.manifest.export_id).read_text())
    assert run["status"] == "failed" and "nothing was published" in run["error"]
    assert BACKFILLS.succeeded(root) == [], "reprocess must not replay a failed backfill"


def test_a_retried_backfill_replaces_the_published_batch_and_keeps_other_batches(spark, exports, tmp_path):
    root = tmp_path / "data"
    contracts = orders_only()
    plan = plan_backfill(exports[ORDERS], contracts, root)
    pipeline = Pipeline(contracts, LocalParquetSink(str(root)), QuarantineWriter(str(root)))
    other_batch = root / "raw" / "orders_changes" / "_ingest_hour=2026-11-01-00" / "_batch_id=0"
    other_batch.mkdir(parents=True)
    (other_batch / "part-0.parquet").write_bytes(b"stands for a stream batch")

    first = run_backfill(spark, plan, pipeline, out=lambda _: None)
    again = run_backfill(spark, plan, pipeline, out=lambda _: None)

    table_dir = raw_layout.change_log_dir(root / "raw", plan.contracts[ORDERS])
    (published,) = table_dir.glob(f"*/_batch_id={plan.batch_id}")
    assert batch_rows(published) and len(batch_rows(published)) == again.landed == first.landed == plan.manifest.item_count
    assert (other_batch / "part-0.parquet").is_file(), "a retry replaces only its own batch"
    assert not (root / "backfills" / "_staging").exists() or not any((root / "backfills" / "_staging").iterdir())


def damage_first_data_file(export_dir: Path) -> Path:
    """Replace the export's first data file with a non-JSON line and a keyless item,
    keeping every checksum and count consistent: only the lines are wrong."""
    manifest = read_export_manifest(export_dir)
    data_file = manifest.data_files[0].path
    rows = [json.loads(line) for line in gzip.decompress(data_file.read_bytes()).splitlines()]
    del rows[1]["Item"]["orderId"]
    lines = [json.dumps(row).encode() for row in rows]
    lines[0] = lines[0][:-7]  # cut short: not JSON
    data_file.write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines), mtime=0))
    files_manifest = export_dir / "manifest-files.json"
    entries = [json.loads(line) for line in files_manifest.read_text().splitlines()]
    digest = hashlib.md5(data_file.read_bytes()).digest()
    entries[0].update(md5Checksum=base64.b64encode(digest).decode(), etag=digest.hex())
    content = "".join(json.dumps(entry) + "\n" for entry in entries).encode()
    files_manifest.write_bytes(content)
    (export_dir / "manifest-files.checksum").write_text(hashlib.md5(content).hexdigest())
    return data_file


def test_dry_run_refuses_the_lines_the_real_run_would_refuse(exports, tmp_path, capsys):
    export_dir = shutil.copytree(exports[ORDERS].parent.parent, tmp_path / "export") / "AWSDynamoDB" / exports[ORDERS].name
    data_file = damage_first_data_file(export_dir)
    data_dir = tmp_path / "data"
    expected = [
        f"2 of {read_export_manifest(export_dir).item_count} export lines cannot be replayed:",
        f"  1 missing key attribute, first: {data_file} line 2: missing key attribute (Item lacks ['orderId'])",
        f"  1 not JSON, first: {data_file} line 1: not JSON (",
    ]

    for dry_run in (["--dry-run"], []):
        code = main(["backfill", "--data-dir", str(data_dir), "--export", str(export_dir), "--sink", "parquet", *dry_run])
        captured = capsys.readouterr()
        assert code == 2, dry_run
        assert "is valid" not in captured.out and "Traceback" not in captured.err
        assert captured.err.startswith(f"lakehouse backfill: {export_dir}: the backfill refuses this export\n")
        lines = captured.err.splitlines()[1:]
        assert lines[:2] == expected[:2] and lines[2].startswith(expected[2]), captured.err
    assert not data_dir.exists(), "the real run refused before Spark or any write"


INVENTORY_CONTRACT = """
table: inventory
raw_table: inventory
key:
  partition_key: sku
attributes:
  sku: {type: S}
  onHand: {type: N, cast: bigint}
partitioning:
  column: sku_initial
  expression: "substring(sku, 1, 1)"
"""


def test_backfill_reads_the_export_with_the_given_contracts_dir(spark, tmp_path, caplog):
    # A folder holding only the new contract: the packaged ones would only add planning time.
    contracts_dir = tmp_path / "contracts"
    contracts_dir.mkdir()
    (contracts_dir / "inventory.yml").write_text(INVENTORY_CONTRACT)
    contracts = load_contracts(contracts_dir)
    items = [{"sku": {"S": f"sku-{n}"}, "onHand": {"N": str(n)}} for n in range(7)]
    export_dir = write_full_export(tmp_path / "exports", "inventory", items, EXPORT_TIME, contracts=contracts)
    layout = DataLayout(tmp_path / "data")

    printed: list[str] = []
    with caplog.at_level(logging.INFO, logger="streaming"):
        result = backfill(layout, export_dir, sink="parquet", contracts_dir=str(contracts_dir), spark=spark,
                          out=printed.append)

    assert result.landed == len(items) and result.quarantined == 0
    # Issue 30, item 17: it was printed and logged, and the CLI shows both.
    assert [*printed, *caplog.messages].count(result.summary()) == 1
    (folder,) = (layout.raw / "inventory_changes").glob(f"*/_batch_id={result.batch_id}")
    with duckdb.connect() as con:
        landed = con.execute(f"select sku, on_hand from read_parquet('{folder}/*.parquet') order by sku").fetchall()
    assert landed == [(f"sku-{n}", str(n)) for n in range(7)]


class FolderlessSink:
    """A raw sink whose output cannot be renamed into place (as Hudi's commits cannot):
    it writes through the local sink and records each write it was asked for."""

    capabilities = SinkCapabilities()

    def __init__(self, root: Path) -> None:
        self.parquet = LocalParquetSink(str(root))
        self.writes: list[tuple[str, int]] = []

    def write(self, changes, contract, batch_id, rows=None):
        self.writes.append((contract.raw_table, batch_id))
        self.parquet.write(changes, contract, batch_id, rows)


def test_a_sink_without_folders_gets_the_writes_only_after_the_counts_passed(spark, exports, tmp_path):
    import dataclasses

    root = tmp_path / "data"
    # Two tables: customers gets no row of the orders export, and is still written (empty).
    contracts = {table: load_contracts()[table] for table in (CUSTOMERS, ORDERS)}
    plan = plan_backfill(exports[ORDERS], contracts, root)
    # The pipeline's contracts changed since the plan: orders now land as another raw
    # table, so the plan's table receives none of the export's items.
    renamed = {**contracts, ORDERS: dataclasses.replace(contracts[ORDERS], raw_table="orders_renamed")}
    sink = FolderlessSink(root)

    with pytest.raises(BackfillError, match=r"landed 0 \(moves between entities: 0\) and quarantined 0"):
        run_backfill(spark, plan, Pipeline(renamed, sink, QuarantineWriter(str(root))), out=lambda _: None)
    assert sink.writes == [] and readable_parquet_files(root) == []

    result = run_backfill(spark, plan, Pipeline(contracts, sink, QuarantineWriter(str(root))), out=lambda _: None)

    assert sorted(sink.writes) == sorted((raw_table, plan.batch_id) for raw_table in contracts)
    (folder,) = (root / "raw" / "orders_changes").glob(f"*/_batch_id={plan.batch_id}")
    assert len(batch_rows(folder)) == result.landed == plan.manifest.item_count


def _marts(data_dir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(DataLayout(data_dir).dbt_database), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_the_marts_read_backfilled_rows_as_snapshots_not_events(lakes):
    """Issue 21 item 16, end to end: a full export backfilled under an overlapping stream
    adds no registrations and no history version that repeats the one before it, and
    the current versions equal those of the stream alone."""
    pii_key = {"LAKEHOUSE_PII_KEY": "backfill-snapshot-test-key-" + "0123456789" * 4}
    window = ["--event-time-start", "2026-10-31", "--event-time-end", "2026-11-03"]
    # The two marts compared below, what they read and their tests; not every node.
    marts = ["--select", "+agg_daily_customer_activity +dim_customers_history", "--indirect-selection", "cautious"]
    for lake in ("bootstrap", "cdc_only"):
        result = run_dbt(["build", *marts, *window],
                         lakes[lake].root, extra_env=pii_key)
        assert result.success, result.exception
    bootstrap, cdc_only = lakes["bootstrap"].root, lakes["cdc_only"].root
    ((snapshots, stream_inserts),) = _marts(
        bootstrap,
        "select count(distinct _event_id) filter (where _event_id like 'export:%'), "
        "count(distinct _event_id) filter (where _event_id not like 'export:%' and _event_name = 'INSERT') "
        "from raw.customers_changes")
    ((registrations,),) = _marts(bootstrap, "select sum(registrations) from lakehouse_marts.agg_daily_customer_activity")
    assert snapshots > 0
    assert registrations == stream_inserts

    repeated = _marts(bootstrap, """
        select version_event_id from (
            select *, lag(email) over (partition by customer_key order by version_number) as previous_email,
                lag(registration_date) over (partition by customer_key order by version_number) as previous_date,
                lag(is_deleted) over (partition by customer_key order by version_number) as previous_deleted
            from lakehouse_marts.dim_customers_history)
        where version_event_name = 'SNAPSHOT' and version_number > 1 and not previous_deleted
            and email is not distinct from previous_email and registration_date is not distinct from previous_date""")
    assert repeated == []
    current = "select customer_key, email, registration_date from lakehouse_marts.dim_customers_history " \
              "where is_current order by 1"
    assert _marts(bootstrap, current) == _marts(cdc_only, current)


# --------------------------------------------------------------------------- a single-table design

APP_FULL = [tenant("t1"), user("t1", "u1"), user("t1", "u2"), invoice("t1", "i1"), audit("t1", "a1")]
INCREMENT_END = EXPORT_TIME + timedelta(hours=1)


def _micros(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


APP_INCREMENT = [
    # u1 promoted, i1 deleted, a user and an AUDIT# item created after the full export.
    IncrementalChange(keys_of(user("t1", "u1")), user("t1", "u1", role="ADMIN"), user("t1", "u1"),
                      _micros(EXPORT_TIME + timedelta(minutes=5))),
    IncrementalChange(keys_of(invoice("t1", "i1")), None, invoice("t1", "i1"), _micros(EXPORT_TIME + timedelta(minutes=6))),
    IncrementalChange(keys_of(user("t1", "u3")), user("t1", "u3"), None, _micros(EXPORT_TIME + timedelta(minutes=7))),
    IncrementalChange(keys_of(audit("t1", "a2")), audit("t1", "a2", "EXPORT"), None,
                      _micros(EXPORT_TIME + timedelta(minutes=8))),
]


def current_state(raw: Path, raw_table: str, columns: str) -> list[tuple]:
    """The live items of one raw table: per key the greatest ordering value, tombstones dropped."""
    with duckdb.connect() as con:
        return con.execute(
            f"select {columns} from read_parquet('{raw}/{raw_table}_changes/*/*/*.parquet', hive_partitioning = false) "
            "qualify row_number() over (partition by pk, sk order by _ordering_value desc) = 1 "
            "and not _is_deleted order by all").fetchall()


@pytest.fixture(scope="module")
def app_backfills(spark, tmp_path_factory):
    """`app`'s full export, then an incremental one, backfilled into one data directory."""
    root = tmp_path_factory.mktemp("app")
    full = write_app_full_export(root / "exports", APP_FULL, EXPORT_TIME)
    incremental = write_app_incremental_export(root / "exports", APP_INCREMENT, EXPORT_TIME, INCREMENT_END)
    layout = DataLayout(root / "data")
    results = [backfill(layout, export, table="app", sink="parquet", spark=spark, out=lambda _: None)
               for export in (full, incremental)]
    return layout, results


def test_a_single_table_export_fills_each_entity_and_the_unrouted_table(app_backfills):
    layout, (full, incremental) = app_backfills
    assert sorted(full.raw_tables) == sorted(app_contracts()) == sorted(incremental.raw_tables)
    assert full.landed_per_table == {"app_invoices": 1, "app_tenants": 1, "app_unrouted": 1, "app_users": 2}
    assert incremental.landed_per_table == {"app_invoices": 1, "app_tenants": 0, "app_unrouted": 1, "app_users": 2}
    assert (full.landed, full.quarantined, incremental.landed, incremental.quarantined) == (5, 0, 4, 0)
    raw = layout.raw
    assert current_state(raw, "app_tenants", "pk, sk, name, plan") == [("TENANT#t1", "TENANT#t1", "Acme", "TEAM")]
    assert current_state(raw, "app_users", "sk, email, role") == [
        ("USER#u1", "u1@example.com", "ADMIN"), ("USER#u2", "u2@example.com", "MEMBER"),
        ("USER#u3", "u3@example.com", "MEMBER")]
    assert current_state(raw, "app_invoices", "sk") == [], "the incremental export deleted the invoice"
    with duckdb.connect() as con:
        ((amount, lines),) = con.execute(
            f"select amount, lines from read_parquet('{raw}/app_invoices_changes/*/*/*.parquet', "
            "hive_partitioning = false) where not _is_deleted").fetchall()
    assert (amount, lines) == ("12.50", [{"sku": "SKU-1", "qty": "2"}]), "typed by the invoices entity"
    unrouted = current_state(raw, "app_unrouted", "sk, _change_record")
    assert [sk for sk, _ in unrouted] == ["AUDIT#a1", "AUDIT#a2"]
    # The unrouted rows keep their whole change record, to be routed again later.
    assert [json.loads(record)["dynamodb"]["NewImage"]["action"] for _, record in unrouted] == [
        {"S": "LOGIN"}, {"S": "EXPORT"}]
    runs = BACKFILLS.succeeded(layout.root)
    assert [sorted(run["raw_tables"]) for run in runs] == [sorted(app_contracts())] * 2


def test_a_backfill_dry_run_of_a_single_table_export_names_every_raw_table(tmp_path, capsys):
    export_dir = write_app_full_export(tmp_path / "exports", APP_FULL, EXPORT_TIME)

    code = main(["backfill", "--data-dir", str(tmp_path / "data"), "--export", str(export_dir), "--table", "app",
                 "--dry-run"])

    out = capsys.readouterr().out
    assert code == 0
    written = sorted(line.split()[3] for line in out.splitlines() if line.startswith("write raw table "))
    assert written == sorted(app_contracts())
