"""Reconciliation: equal data passes; a missing key, a changed value or a newer tombstone is caught."""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest
from app_items import audit, invoice, tenant, user, write_app_full_export

from streaming.cli import main
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.io.layout import DataLayout
from streaming.operations.batches.backfill import backfill
from streaming.operations.reconcile import ReconcileError, reconcile
from streaming.samples.export_writer import write_full_export, write_incremental_export
from streaming.samples.generator import CUSTOMERS, ORDERS, generate_cdc

UTC = timezone.utc
EXPORT_TIME = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)


def packaged_contract_dir(root: Path, name: str) -> str:
    """A contracts folder holding one packaged contract file: a backfill plans and writes
    every contract's raw tables, and the other tables only add planning time."""
    folder = root / f"contracts-{name}"
    folder.mkdir()
    shutil.copy(SAMPLE_CONTRACTS_DIR / f"{name}.yml", folder)
    return str(folder)


@pytest.fixture(scope="module")
def landed(spark, tmp_path_factory):
    """A full orders export and the raw table a backfill made of it."""
    cdc = generate_cdc(seed=44, customers=10, orders_per_customer=2, malformed_rate=0.0)
    root = tmp_path_factory.mktemp("reconcile")
    items = cdc.state_at(ORDERS, EXPORT_TIME)
    export_dir = write_full_export(root / "exports", ORDERS, items.values(), EXPORT_TIME)
    layout = DataLayout(root / "data")
    result = backfill(layout, export_dir, sink="parquet", contracts_dir=packaged_contract_dir(root, ORDERS),
                      spark=spark, out=lambda _: None)
    return {"export": export_dir, "raw": layout.raw, "items": items, "batch_id": result.batch_id}


def copy_raw(landed, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the raw root and the one Parquet folder of its orders batch."""
    copy = tmp_path / "raw"
    shutil.copytree(landed["raw"], copy)
    (folder,) = (copy / f"{ORDERS}_changes").glob(f"*/_batch_id={landed['batch_id']}")
    return copy, folder


def rewrite(folder: Path, select: str) -> None:
    """Replace the folder's rows with `select ... from rows`, keeping the Parquet types."""
    files = sorted(folder.glob("*.parquet"))
    with duckdb.connect() as con:
        con.execute(f"create table rows as select * from read_parquet('{folder}/*.parquet')")
        for path in files:
            path.unlink()
        con.execute(f"copy ({select}) to '{folder}/part-0.parquet' (format parquet)")


def first_order(landed) -> tuple[str, str]:
    return sorted(landed["items"])[0]


def run_cli(source: Path, target: Path | str, json_path: Path) -> tuple[int, dict]:
    code = main(["reconcile", "--source", str(source), "--target", str(target), "--json", str(json_path)])
    return code, json.loads(json_path.read_text())


pytestmark = pytest.mark.spark


def test_equal_data_passes(landed, tmp_path, capsys):
    code, report = run_cli(landed["export"], landed["raw"], tmp_path / "report.json")

    assert code == 0 and report["ok"] is True
    (orders,) = report["tables"]
    assert orders["table"] == ORDERS
    assert orders["source_rows"] == orders["target_rows"] == len(landed["items"]) > 0
    assert orders["source_checksum"] == orders["target_checksum"]
    assert orders["partitions_compared"] > 1
    assert "result: OK" in capsys.readouterr().out


def test_a_missing_key_is_caught(landed, tmp_path, capsys):
    raw, folder = copy_raw(landed, tmp_path)
    customer_id, order_id = first_order(landed)
    rewrite(folder, f"select * from rows where order_id <> '{order_id}'")

    code, report = run_cli(landed["export"], raw, tmp_path / "report.json")

    (orders,) = report["tables"]
    assert code == 1 and report["ok"] is False
    assert orders["missing_in_target"] == 1 and orders["missing_in_source"] == 0 and orders["changed"] == 0
    assert orders["sample_missing_in_target"] == [{"customer_id": customer_id, "order_id": order_id}]
    (partition,) = orders["partitions_differing"]
    assert partition["partition"] == customer_id[-1]
    assert partition["source_rows"] == partition["target_rows"] + 1
    assert "MISMATCH" in capsys.readouterr().out


def test_a_changed_value_is_caught(landed, tmp_path):
    raw, folder = copy_raw(landed, tmp_path)
    _, order_id = first_order(landed)
    rewrite(folder, f"select * replace (case when order_id = '{order_id}' then 'LOST' else status end as status) "
                    "from rows")

    code, report = run_cli(landed["export"], raw, tmp_path / "report.json")

    (orders,) = report["tables"]
    assert code == 1
    assert orders["changed"] == 1 and orders["missing_in_target"] == 0
    assert orders["sample_changed"][0]["key"]["order_id"] == order_id
    assert orders["sample_changed"][0]["columns"] == ["status"]
    assert orders["source_checksum"] != orders["target_checksum"]


def test_a_newer_tombstone_removes_the_key_from_the_current_state(landed, tmp_path):
    raw, folder = copy_raw(landed, tmp_path)
    _, order_id = first_order(landed)
    later = raw / f"{ORDERS}_changes" / "_ingest_hour=2999-01-01-00" / "_batch_id=7"
    later.mkdir(parents=True)
    with duckdb.connect() as con:
        con.execute(
            f"copy (select * replace (true as _is_deleted, 'REMOVE' as _event_name, "
            f"'99990101000000000000' || _sequence_number as _ordering_value, 7::bigint as _batch_id) "
            f"from read_parquet('{folder}/*.parquet') where order_id = '{order_id}') "
            f"to '{later}/part-0.parquet' (format parquet)"
        )

    report = reconcile(str(landed["export"]), str(raw), load_contracts())

    assert not report.ok
    assert report.tables[0].missing_in_target == 1
    assert report.tables[0].sample_missing_in_target[0]["order_id"] == order_id


def test_set_order_does_not_matter_and_a_duckdb_table_is_a_target(landed, tmp_path):
    raw, folder = copy_raw(landed, tmp_path)
    rewrite(folder, "select * replace (list_reverse(tags) as tags, list_reverse(package_weights_kg) "
                    "as package_weights_kg) from rows")
    assert reconcile(str(landed["export"]), str(raw), load_contracts()).ok
    database = tmp_path / "lake.duckdb"
    with duckdb.connect(str(database)) as con:
        con.execute("create schema raw")
        con.execute(f"create table raw.orders as select * from read_parquet('{folder}/*.parquet')")

    code = main(["reconcile", "--source", str(raw), "--target", f"{database}:raw.orders"])

    assert code == 0
    with duckdb.connect(str(database)) as con:
        con.execute("update raw.orders set amount = '0.01' where order_id = (select min(order_id) from raw.orders)")
    assert main(["reconcile", "--source", str(raw), "--target", f"{database}:raw.orders"]) == 1


def test_unusable_sides_are_friendly_errors(landed, tmp_path, capsys):
    incremental = write_incremental_export(tmp_path, ORDERS, [], EXPORT_TIME, datetime(2026, 11, 1, 4, tzinfo=UTC))
    assert main(["reconcile", "--source", str(incremental), "--target", str(landed["raw"])]) == 2
    assert "reconcile against a full export" in capsys.readouterr().err
    assert main(["reconcile", "--source", str(tmp_path / "nothing"), "--target", str(landed["raw"])]) == 2
    with pytest.raises(ReconcileError, match="share no table"):
        reconcile(str(landed["export"]), str(landed["raw"]), load_contracts(), table="customers")


# --------------------------------------------------------------------------- PII in the report

PII_KEY = "reconcile-test-key-0123456789abcdef0123456789"


def marts_pseudonym(key: str, label: str, text: str) -> str:
    """The DuckDB form of macros/pii/pseudonymize.sql (HMAC as two sha256 over the key's
    pads), evaluated by DuckDB: an oracle independent of the Python HMAC under test."""
    from lakehouse_dbt.pii_key import hmac_pads

    inner, outer = hmac_pads(key.encode())
    with duckdb.connect() as con:
        return con.execute("select sha256($outer || unhex(sha256($inner || encode($text))))",
                           {"outer": outer, "inner": inner, "text": f"{label}:{text}"}).fetchone()[0]


@pytest.fixture()
def customers_exports(tmp_path):
    """A customers export and one missing its first item and with another's e-mail changed."""
    items = generate_cdc(seed=45, customers=6, malformed_rate=0.0).state_at(CUSTOMERS, EXPORT_TIME)
    (dropped, changed, *_) = sorted(items)
    edited = {key: item for key, item in items.items() if key != dropped}
    edited[changed] = {**edited[changed], "email": {"S": "someone.else@example.com"}}
    source = write_full_export(tmp_path / "truth", CUSTOMERS, items.values(), EXPORT_TIME)
    target = write_full_export(tmp_path / "result", CUSTOMERS, edited.values(), EXPORT_TIME)
    return source, target, dropped, changed


def test_reconcile_shows_pii_key_columns_only_as_the_marts_pseudonym(customers_exports, tmp_path, monkeypatch, capsys):
    source, target, (dropped_id, dropped_name), (changed_id, changed_name) = customers_exports
    monkeypatch.setenv("LAKEHOUSE_PII_KEY", PII_KEY)
    json_path = tmp_path / "report.json"

    code = main(["reconcile", "--source", str(source), "--target", str(target), "--json", str(json_path),
                 "--data-dir", str(tmp_path / "data")])

    out, written = capsys.readouterr().out, json_path.read_text()
    (table,) = json.loads(written)["tables"]
    assert code == 1
    assert table["sample_missing_in_target"] == [
        {"id": dropped_id, "cust_name": "pseudonym:" + marts_pseudonym(PII_KEY, "cust_name", dropped_name)}]
    assert table["sample_changed"] == [
        {"key": {"id": changed_id, "cust_name": "pseudonym:" + marts_pseudonym(PII_KEY, "cust_name", changed_name)},
         "columns": ["email"]}]
    for name in (dropped_name, changed_name):
        assert name not in out and name not in written
    assert dropped_id in out and changed_id in out, "the non-PII key column stays readable"


def test_reconcile_withholds_pii_key_columns_without_a_pii_key(customers_exports, tmp_path, monkeypatch, capsys):
    source, target, (dropped_id, dropped_name), _ = customers_exports
    monkeypatch.delenv("LAKEHOUSE_PII_KEY", raising=False)
    data_dir = tmp_path / "data"

    code = main(["reconcile", "--source", str(source), "--target", str(target), "--data-dir", str(data_dir)])

    out = capsys.readouterr().out
    assert code == 1
    assert f"missing in target: {{'id': '{dropped_id}', 'cust_name': '<pii withheld>'}}" in out
    assert dropped_name not in out
    assert not data_dir.exists(), "reconcile never creates a PII key (or anything else)"


def test_reconcile_json_into_a_missing_folder_is_an_error(customers_exports, tmp_path, capsys):
    source, target, _, _ = customers_exports
    json_path = tmp_path / "reports" / "2026-11" / "report.json"

    code = main(["reconcile", "--source", str(source), "--target", str(target), "--json", str(json_path)])

    err = capsys.readouterr().err
    assert code == 2
    assert f"folder {json_path.parent} does not exist" in err
    assert not (tmp_path / "reports").exists()


# --------------------------------------------------------------------------- a single-table design

APP_ITEMS = [tenant("t1"), tenant("t2", "Globex"), user("t1", "u1"), user("t2", "u2"), invoice("t1", "i1"),
             audit("t1", "a1")]


@pytest.fixture(scope="module")
def app_landed(spark, tmp_path_factory):
    """A full export of `app` (one invoice whose amount is no number) and its backfill."""
    root = tmp_path_factory.mktemp("reconcile_app")
    bad_invoice = {**invoice("t2", "i2"), "amount": {"S": "twelve"}}
    export_dir = write_app_full_export(root / "exports", [*APP_ITEMS, bad_invoice], EXPORT_TIME)
    layout = DataLayout(root / "data")
    backfill(layout, export_dir, table="app", sink="parquet", contracts_dir=packaged_contract_dir(root, "app"),
             spark=spark, out=lambda _: None)
    return {"export": export_dir, "raw": layout.raw}


def test_reconcile_compares_a_single_table_export_with_each_entity(spark, app_landed, tmp_path):
    report = reconcile(str(app_landed["export"]), str(app_landed["raw"]), load_contracts(), table="app", spark=spark)

    rows = {table.table: (table.source_rows, table.target_rows, table.ok) for table in report.tables}
    assert rows == {"app_tenants": (2, 2, True), "app_users": (2, 2, True), "app_invoices": (1, 1, True),
                    "app_unrouted": (1, 1, True)}
    # The decoder quarantines the invoice as the backfill did: in no raw table, so named.
    assert report.export_items_quarantined == {"type_mismatch:amount:N": 1}
    assert not report.ok and "1 export items the decoder quarantines:" in report.lines()

    raw = tmp_path / "raw"
    shutil.copytree(app_landed["raw"], raw)
    (folder,) = (raw / "app_users_changes").glob("*/_batch_id=*")
    rewrite(folder, "select * replace (case when sk = 'USER#u2' then 'ADMIN' else role end as role) from rows")

    changed = {table.table: table for table in
               reconcile(str(app_landed["export"]), str(raw), load_contracts(), table="app", spark=spark).tables}

    assert [name for name, table in changed.items() if not table.ok] == ["app_users"]
    assert changed["app_users"].sample_changed == [{"key": {"pk": "TENANT#t2", "sk": "USER#u2"}, "columns": ["role"]}]


def test_reconcile_decodes_a_single_table_export_once_and_keeps_nothing(spark, app_landed, monkeypatch):
    # The quarantine count and each of the four raw tables' writes read the decoded export.
    # Every decode starts by splitting the records file in a Python worker, so counting the
    # records split tells how often the export was decoded: once (five times when each
    # read decoded it again).
    from streaming.io import landing_reader

    split = landing_reader.split_landing_files
    records_split = spark.sparkContext.accumulator(0)

    def counted_split(batches):
        for batch in split(batches):
            records_split.add(batch.num_rows)
            yield batch

    monkeypatch.setattr(landing_reader, "split_landing_files", counted_split)
    stored = spark.sparkContext._jsc.getPersistentRDDs().size()

    report = reconcile(str(app_landed["export"]), str(app_landed["raw"]), load_contracts(), table="app", spark=spark)

    assert len(report.tables) == 4 and report.export_items_quarantined == {"type_mismatch:amount:N": 1}
    assert records_split.value == len(APP_ITEMS) + 1, "each export record is split and decoded once"
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == stored, "the decoded rows are released"
