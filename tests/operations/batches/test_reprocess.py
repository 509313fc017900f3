"""Reprocess into a new location, switch readers to it and back (local pointer and Glue)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaged_contracts import packaged_contracts_dir

from streaming.cli import main
from streaming.contracts.loader import load_contracts
from streaming.io.layout import POINTER_FILE, DataLayout, dbt_env, read_pointer
from streaming.operations.reconcile import reconcile
from streaming.operations.batches.reprocess import plan_reprocess, reprocess, run_reprocess
from streaming.operations.batches.switch import (
    PREVIOUS_LOCATION_PARAMETER,
    SwitchError,
    rollback_glue_table,
    switch_glue_table,
)
from streaming.operations.status import status
from streaming.operations.stream import stream
from streaming.pipeline.batch import Pipeline
from streaming.runtime.startup import LandingFiles, StartedStream, StreamOptions
from streaming.samples.generator import write_landing_files


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")} \
        if root.exists() else {}


@pytest.fixture(scope="module")
def live(spark, tmp_path_factory):
    """A data directory whose raw tables were streamed from its landing files, and the
    contracts folder of its two tables (the sample data's: app's contracts would only add
    their raw tables to each batch's plan)."""
    root = tmp_path_factory.mktemp("live")
    layout = DataLayout(root / "data")
    contracts_dir = packaged_contracts_dir(root / "contracts", "customers", "orders")
    write_landing_files(layout.landing, seed=52, customers=10, orders_per_customer=2, records_per_file=40)
    stream(layout, sink="parquet", contracts_dir=contracts_dir, spark=spark, out=lambda _: None)
    return layout, contracts_dir


@pytest.mark.spark
def test_reprocess_rebuilds_elsewhere_then_switch_and_rollback(spark, live, tmp_path, capsys):
    live, contracts_dir = live
    live_raw_before = tree(live.raw)
    target = tmp_path / "v2"

    rebuilt = reprocess(live, target, sink="parquet", contracts_dir=contracts_dir, spark=spark, out=lambda _: None)

    assert tree(live.raw) == live_raw_before, "the live raw tables are untouched"
    assert not (live.root / POINTER_FILE).exists(), "readers move only on switch"
    assert (target / "checkpoints" / "landing_to_raw" / "commits").is_dir(), "a fresh checkpoint of its own"
    # Every packaged table: app's have no rows on either side.
    report = reconcile(str(live.raw), str(target / "raw"), load_contracts())
    assert report.ok, "\n".join(report.lines())
    assert rebuilt is not None and rebuilt.change_rows == status(live, contracts_dir=contracts_dir).change_rows
    assert rebuilt.current_rows == status(live, contracts_dir=contracts_dir).current_rows

    assert main(["switch", "--data-dir", str(live.root), "--to", str(target), "--contracts-dir", contracts_dir]) == 0
    assert read_pointer(live.root).data_root == target.resolve()
    assert dbt_env(live.root) == {"LAKEHOUSE_DATA_DIR": str(live.root.resolve()),
                                  "LAKEHOUSE_RAW_DIR": str(target.resolve() / "raw")}
    assert main(["status", "--data-dir", str(live.root)]) == 0
    assert f"active data root: {target.resolve()}" in capsys.readouterr().out

    # After the switch the stream writes to the new root, resuming from its checkpoint.
    write_landing_files(live.landing, seed=53, customers=3, records_per_file=500)
    stream(live, sink="parquet", contracts_dir=contracts_dir, spark=spark, out=lambda _: None)
    assert tree(live.raw) == live_raw_before
    batches = {p.name for p in (target / "raw" / "orders_changes").glob("*/_batch_id=*")}
    assert len(batches) == 2, f"one reprocess batch plus one new batch, got {batches}"

    assert main(["switch", "--data-dir", str(live.root), "--rollback"]) == 0
    assert read_pointer(live.root).data_root == live.root.resolve()
    assert read_pointer(live.root).previous == target.resolve()
    # The sample data holds no change of the other packaged tables (app's): they count 0.
    assert status(live).change_rows == {t: _rows(live.raw).get(t, 0) for t in load_contracts()}


INVENTORY_CONTRACT = """
table: inventory
raw_table: inventory
description: Stock per SKU; no change has arrived for it yet.
key:
  partition_key: sku
attributes:
  sku: {column: sku, type: S}
  quantity: {column: quantity, type: N, cast: bigint}
partitioning:
  column: sku_suffix
  expression: "substring(sku, -1, 1)"
"""


@pytest.mark.spark
def test_a_table_without_rows_on_either_side_reconciles_and_switches(spark, tmp_path, capsys):
    # A table with rows (orders; the customers records go to the quarantine) and the new
    # one: further raw tables would only add planning time to each batch, and the test is
    # about a table without rows.
    contracts_dir = Path(packaged_contracts_dir(tmp_path / "contracts", "orders"))
    (contracts_dir / "inventory.yml").write_text(INVENTORY_CONTRACT)
    layout = DataLayout(tmp_path / "data")
    write_landing_files(layout.landing, seed=61, customers=3, orders_per_customer=1, records_per_file=40)
    stream(layout, sink="parquet", contracts_dir=str(contracts_dir), spark=spark, out=lambda _: None)
    target = tmp_path / "v2"
    reprocess(layout, target, sink="parquet", contracts_dir=str(contracts_dir), spark=spark, out=lambda _: None)
    capsys.readouterr()

    assert main(["reconcile", "--source", str(layout.raw), "--target", str(target / "raw"),
                 "--contracts-dir", str(contracts_dir)]) == 0
    assert "inventory: OK  rows source=0 target=0" in capsys.readouterr().out
    assert main(["switch", "--data-dir", str(layout.root), "--to", str(target),
                 "--contracts-dir", str(contracts_dir)]) == 0
    assert read_pointer(layout.root).data_root == target.resolve()


def _rows(raw: Path) -> dict[str, int]:
    import duckdb

    with duckdb.connect() as con:
        return {t: con.execute(f"select count(*) from read_parquet('{raw}/{t}_changes/*/*/*.parquet')").fetchone()[0]
                for t in ("customers", "orders")}


def test_reprocess_dry_run_writes_nothing(tmp_path, capsys):
    data_dir = tmp_path / "data"
    write_landing_files(data_dir / "landing", seed=3, customers=2, records_per_file=10)
    before = tree(data_dir)
    target = tmp_path / "v2"

    assert main(["reprocess", "--data-dir", str(data_dir), "--to", str(target), "--dry-run"]) == 0

    out = capsys.readouterr().out
    assert tree(data_dir) == before and not target.exists()
    files = len(list((data_dir / "landing").rglob("*.jsonl")))
    assert f"read  {files} landing files" in out and str(target / "raw") in out
    assert "dry run: nothing was written" in out


def test_reprocess_refuses_the_live_location_and_foreign_folders(tmp_path):
    data_dir = tmp_path / "data"
    write_landing_files(data_dir / "landing", seed=3, customers=2, records_per_file=50)
    with pytest.raises(SwitchError, match="live data root"):
        plan_reprocess(data_dir, data_dir)
    with pytest.raises(SwitchError, match="live data root"):
        plan_reprocess(data_dir, tmp_path)
    foreign = tmp_path / "foreign"
    (foreign / "raw").mkdir(parents=True)
    with pytest.raises(SwitchError, match="not made by `lakehouse reprocess`"):
        plan_reprocess(data_dir, foreign)
    # An interrupted reprocess of the same landing files may be resumed.
    resumable = tmp_path / "resumable"
    resumable.mkdir()
    (resumable / "reprocess.json").write_text(json.dumps({"landing": str((data_dir / "landing").resolve())}))
    assert plan_reprocess(data_dir, resumable).target == resumable.resolve()
    with pytest.raises(SwitchError, match="no landing files"):
        plan_reprocess(tmp_path / "empty", tmp_path / "v3")


def test_switch_needs_the_tables_and_rollback_needs_a_switch(tmp_path, capsys):
    data_dir = tmp_path / "data"
    assert main(["switch", "--data-dir", str(data_dir), "--rollback"]) == 2
    assert "no earlier switch" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "reprocess.json").write_text(json.dumps({"from_data_dir": str(data_dir.resolve()),
                                                      "finished_at": "2026-11-01T00:00:00+00:00"}))
    assert main(["switch", "--data-dir", str(data_dir), "--to", str(empty)]) == 2
    assert "reprocess into it before switching" in capsys.readouterr().err
    (data_dir / POINTER_FILE).parent.mkdir(parents=True)
    (data_dir / POINTER_FILE).write_text("{not json")
    assert main(["status", "--data-dir", str(data_dir)]) == 2
    assert "not a valid raw pointer" in capsys.readouterr().err


def raw_tables_in(root: Path) -> Path:
    for contract in load_contracts().values():
        (root / "raw" / contract.changes_table).mkdir(parents=True)
    return root


def test_switch_refuses_a_folder_reprocess_did_not_make_or_finish(tmp_path, capsys):
    data_dir = tmp_path / "data"
    data_dir.mkdir()

    def refused(target: Path) -> str:
        assert main(["switch", "--data-dir", str(data_dir), "--to", str(target)]) == 2
        assert not (data_dir / POINTER_FILE).exists(), "readers stay where they were"
        return capsys.readouterr().err

    # Raw tables in place, but nobody knows what they hold.
    foreign = raw_tables_in(tmp_path / "copied-by-hand")
    err = refused(foreign)
    assert "was not made by `lakehouse reprocess`" in err and "lakehouse reprocess --to <new folder>" in err

    marker = {"landing": str(data_dir / "landing"), "from_data_dir": str(data_dir.resolve())}
    unfinished = raw_tables_in(tmp_path / "interrupted")
    (unfinished / "reprocess.json").write_text(json.dumps(marker))
    assert f"has not finished; run the same `lakehouse reprocess --to {unfinished.resolve()}`" in refused(unfinished)

    elsewhere = raw_tables_in(tmp_path / "other-dirs-rebuild")
    (elsewhere / "reprocess.json").write_text(json.dumps({**marker, "from_data_dir": "/somewhere/else",
                                                          "finished_at": "2026-11-01T00:00:00+00:00"}))
    assert "is a reprocess of data directory /somewhere/else" in refused(elsewhere)

    finished = raw_tables_in(tmp_path / "rebuilt")
    (finished / "reprocess.json").write_text(json.dumps({**marker, "finished_at": "2026-11-01T00:00:00+00:00"}))
    assert main(["switch", "--data-dir", str(data_dir), "--to", str(finished)]) == 0
    assert read_pointer(data_dir).data_root == finished.resolve()
    # Back to the data directory itself needs no marker.
    raw_tables_in(data_dir)
    assert main(["switch", "--data-dir", str(data_dir), "--to", str(data_dir)]) == 0
    assert read_pointer(data_dir).data_root == data_dir.resolve()


def test_reprocess_refuses_a_location_inside_the_live_data(tmp_path, capsys):
    data_dir = tmp_path / "data"
    write_landing_files(data_dir / "landing", seed=3, customers=2, records_per_file=50)
    before = tree(data_dir)

    assert main(["reprocess", "--data-dir", str(data_dir), "--to", str(data_dir / "v2"), "--dry-run"]) == 2

    err = capsys.readouterr().err
    assert f"--to {(data_dir / 'v2').resolve()} is inside the live data root {data_dir.resolve()}" in err
    assert f"e.g. {data_dir.resolve().parent / 'data-reprocessed'}" in err
    assert tree(data_dir) == before
    # A landing folder of its own (--from-landing) is protected too: the rebuild's
    # stream would read its own output.
    landing = tmp_path / "landing-elsewhere"
    write_landing_files(landing, seed=3, customers=2, records_per_file=50)
    with pytest.raises(SwitchError, match="is inside the landing folder"):
        plan_reprocess(data_dir, landing / "rebuilt", from_landing=landing)
    # After a switch the live data root is elsewhere, and protected the same way.
    live = raw_tables_in(tmp_path / "rebuilt")
    (live / "reprocess.json").write_text(json.dumps({"landing": str((data_dir / "landing").resolve()),
                                                     "from_data_dir": str(data_dir.resolve()),
                                                     "finished_at": "2026-11-01T00:00:00+00:00"}))
    assert main(["switch", "--data-dir", str(data_dir), "--to", str(live)]) == 0
    with pytest.raises(SwitchError, match="is inside the live data root"):
        plan_reprocess(data_dir, live / "raw" / "v3")


# --------------------------------------------------------------------------- Glue (moto)


@pytest.fixture()
def glue(mocked_aws):
    import boto3

    client = boto3.client("glue", region_name="eu-west-1")
    client.create_database(DatabaseInput={"Name": "dynamodb_raw"})
    for table in load_contracts():
        location = f"s3://lake/raw/{table}"
        client.create_table(DatabaseName="dynamodb_raw", TableInput={
            "Name": table,
            "TableType": "EXTERNAL_TABLE",
            "Parameters": {"spark.sql.sources.provider": "hudi"},
            "PartitionKeys": [{"Name": "customer_suffix", "Type": "string"}],
            "StorageDescriptor": {
                "Columns": [{"Name": "order_id", "Type": "string"}],
                "Location": location,
                "SerdeInfo": {"Parameters": {"path": location}},
            },
        })
        client.batch_create_partition(DatabaseName="dynamodb_raw", TableName=table, PartitionInputList=[
            {"Values": [suffix], "StorageDescriptor": {"Location": f"{location}/customer_suffix={suffix}"}}
            for suffix in "0123456789"
        ])
    yield client


def _locations(glue, table: str) -> tuple[str, str, set[str]]:
    described = glue.get_table(DatabaseName="dynamodb_raw", Name=table)["Table"]
    partitions = glue.get_partitions(DatabaseName="dynamodb_raw", TableName=table)["Partitions"]
    return (described["StorageDescriptor"]["Location"], described["StorageDescriptor"]["SerdeInfo"]["Parameters"]["path"],
            {p["StorageDescriptor"]["Location"] for p in partitions})


def test_glue_switch_moves_table_and_partitions_and_rolls_back(glue):
    moved = switch_glue_table(glue, "dynamodb_raw", "orders", "s3://lake/raw_v2/orders")

    assert moved.partitions_moved == 10 and moved.previous_location == "s3://lake/raw/orders"
    location, path, partitions = _locations(glue, "orders")
    assert location == path == "s3://lake/raw_v2/orders"
    assert partitions == {f"s3://lake/raw_v2/orders/customer_suffix={s}" for s in "0123456789"}
    table = glue.get_table(DatabaseName="dynamodb_raw", Name="orders")["Table"]
    assert table["Parameters"][PREVIOUS_LOCATION_PARAMETER] == "s3://lake/raw/orders"
    assert table["Parameters"]["spark.sql.sources.provider"] == "hudi"
    assert _locations(glue, "customers")[0] == "s3://lake/raw/customers", "other tables untouched"

    rollback_glue_table(glue, "dynamodb_raw", "orders")

    location, path, partitions = _locations(glue, "orders")
    assert location == path == "s3://lake/raw/orders"
    assert partitions == {f"s3://lake/raw/orders/customer_suffix={s}" for s in "0123456789"}
    with pytest.raises(SwitchError, match="already points"):
        switch_glue_table(glue, "dynamodb_raw", "orders", "s3://lake/raw/orders/")


def test_switch_cli_moves_every_contracted_glue_table(glue, capsys):
    from streaming.operations.batches.switch import switch

    switch(DataLayout(Path("unused")), "s3://lake/raw_v2", glue_database="dynamodb_raw", glue_client=glue)

    assert _locations(glue, "customers")[0] == "s3://lake/raw_v2/customers"
    assert _locations(glue, "orders")[0] == "s3://lake/raw_v2/orders"
    assert "glue dynamodb_raw.orders: s3://lake/raw/orders -> s3://lake/raw_v2/orders (10 partitions)" \
        in capsys.readouterr().out
    switch(DataLayout(Path("unused")), None, rollback=True, glue_database="dynamodb_raw", table="orders",
           glue_client=glue)
    assert _locations(glue, "orders")[0] == "s3://lake/raw/orders"
    assert _locations(glue, "customers")[0] == "s3://lake/raw_v2/customers"


def test_reprocess_starts_its_stream_through_start_stream_on_the_target_with_the_backfills_first(
        tmp_path, monkeypatch):
    import streaming.operations.batches.reprocess as reprocess_module

    data_dir = tmp_path / "data"
    write_landing_files(data_dir / "landing", seed=3, customers=2, records_per_file=10)
    plan = plan_reprocess(data_dir, tmp_path / "v2")
    contracts = load_contracts()
    options = StreamOptions(query_name="reprocess")
    started: list[tuple] = []
    printed: list[str] = []

    def start_stream(spark, ends, contracts, report, **keywords):
        started.append((ends, contracts, keywords))
        pipeline = Pipeline(contracts, sink=None, quarantine=None)
        keywords["before_stream"](pipeline)
        return StartedStream(query=None, pipeline=pipeline, source=None)

    monkeypatch.setattr(reprocess_module, "start_stream", start_stream)

    run_reprocess(None, plan, contracts, options, out=printed.append)

    ((ends, given, keywords),) = started
    assert ends == LandingFiles(DataLayout(plan.target), plan.landing, options)
    assert given is contracts and "stream_id" not in keywords, "start_stream claims the target's stream itself"
    assert printed == [f"{len(plan.landing_files)} landing files into {DataLayout(plan.target).raw} (available-now)"]
    assert json.loads(DataLayout(plan.target).reprocess_marker.read_text())["finished_at"]
