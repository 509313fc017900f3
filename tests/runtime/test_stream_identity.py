"""A lost checkpoint, a replaced checkpoint, a moved data directory or a deleted raw
folder is refused at start with what to do, never run into reused batch ids."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hudi_samples import SAMPLES, sample_table, set_marker

from streaming.cli import main
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.io.layout import STREAM_IDENTITY_FILE, DataLayout
from streaming.operations.status import status
from streaming.operations.stream import stream
from streaming.runtime.stream_identity import (
    StreamIdentityError,
    checkpoint_stream_id,
    claim_stream_identity,
)
from streaming.samples.generator import write_landing_files

CHECKPOINT = Path("checkpoints") / "landing_to_raw"


def contracts_of(folder: Path, *tables: str) -> str:
    """A contracts folder holding the packaged contracts of `tables`: the streams here land
    the generator's plain tables, and each further contract only adds Spark planning."""
    folder.mkdir()
    for table in tables:
        shutil.copy(SAMPLE_CONTRACTS_DIR / f"{table}.yml", folder)
    return str(folder)


@pytest.fixture(scope="module")
def two_tables(tmp_path_factory) -> str:
    return contracts_of(tmp_path_factory.mktemp("identity-contracts") / "contracts", "customers", "orders")


@pytest.fixture(scope="module")
def streamed(spark, tmp_path_factory, two_tables) -> DataLayout:
    """A data directory the real stream ran on once."""
    layout = DataLayout(tmp_path_factory.mktemp("identity") / "data")
    write_landing_files(layout.landing, seed=21, customers=4, orders_per_customer=1, records_per_file=30)
    stream(layout, sink="parquet", contracts_dir=two_tables, spark=spark, out=lambda _: None)
    return layout


def copy_of(layout: DataLayout, tmp_path: Path) -> DataLayout:
    copy = DataLayout(tmp_path / "data")
    shutil.copytree(layout.root, copy.root)
    return copy


def refusal(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.spark
def test_the_first_run_records_the_checkpoint_spark_uses(streamed):
    identity = json.loads((streamed.raw / STREAM_IDENTITY_FILE).read_text())
    # Spark adopted the query id written before its start instead of making another.
    assert identity["stream_id"] == checkpoint_stream_id(streamed.root / CHECKPOINT)
    assert identity["landing"] == str(streamed.landing.resolve())


@pytest.mark.spark
def test_a_restart_on_the_same_checkpoint_resumes(spark, streamed, two_tables, tmp_path):
    layout = copy_of(streamed, tmp_path)
    # The copy is a moved directory: put it back where the record says it was.
    record = layout.raw / STREAM_IDENTITY_FILE
    identity = json.loads(record.read_text())
    identity.update(landing=str(layout.landing.resolve()), checkpoint=str((layout.root / CHECKPOINT).resolve()))
    record.write_text(json.dumps(identity))
    before = status(layout)
    write_landing_files(layout.landing / "later", seed=22, customers=2, orders_per_customer=1, records_per_file=30)

    stream(layout, sink="parquet", contracts_dir=two_tables, spark=spark, out=lambda _: None)

    after = status(layout)
    written = [table for table, rows in before.change_rows.items() if rows]
    assert {"customers", "orders"} <= set(written)
    assert all(after.change_rows[t] > before.change_rows[t] for t in written)


@pytest.mark.spark
def test_a_deleted_checkpoint_is_refused_and_nothing_is_overwritten(spark, streamed, tmp_path, capsys):
    layout = streamed
    shutil.move(layout.root / "checkpoints", tmp_path / "checkpoints-aside")
    raw_files = sorted(path.relative_to(layout.raw) for path in layout.raw.rglob("*.parquet"))
    try:
        err = refusal(["stream", "--data-dir", str(layout.root)], capsys)
    finally:
        shutil.move(tmp_path / "checkpoints-aside", layout.root / "checkpoints")

    assert "checkpoint" in err and "is gone" in err
    # Refused before Spark starts: the session the caller runs is untouched.
    assert spark.range(3).count() == 3
    assert "Restore the checkpoint folder" in err and "lakehouse reprocess" in err
    assert sorted(path.relative_to(layout.raw) for path in layout.raw.rglob("*.parquet")) == raw_files
    assert not (layout.root / "checkpoints-new").exists()


@pytest.mark.spark
def test_a_moved_data_directory_is_refused(streamed, tmp_path, capsys):
    moved = copy_of(streamed, tmp_path)

    err = refusal(["stream", "--data-dir", str(moved.root)], capsys)

    assert "this data directory was moved" in err
    assert str(streamed.landing.resolve()) in err and str(moved.landing.resolve()) in err
    assert "lakehouse reprocess" in err


@pytest.mark.spark
def test_a_checkpoint_of_another_stream_is_refused(streamed, tmp_path, capsys):
    layout = streamed
    metadata = layout.root / CHECKPOINT / "metadata"
    original = metadata.read_text()
    metadata.write_text('{"id":"00000000-0000-0000-0000-000000000000"}\n')
    try:
        err = refusal(["stream", "--data-dir", str(layout.root)], capsys)
    finally:
        metadata.write_text(original)
    assert "belongs to stream 00000000-0000-0000-0000-000000000000" in err


@pytest.mark.spark
def test_raw_deleted_under_a_live_checkpoint_is_refused(streamed, tmp_path, capsys):
    layout = streamed
    had_quarantine = layout.quarantine.exists()
    shutil.move(layout.raw, tmp_path / "raw-aside")
    if had_quarantine:
        shutil.move(layout.quarantine, tmp_path / "quarantine-aside")
    try:
        err = refusal(["stream", "--data-dir", str(layout.root)], capsys)
    finally:
        shutil.rmtree(layout.raw, ignore_errors=True)
        shutil.move(tmp_path / "raw-aside", layout.raw)
        if had_quarantine:
            shutil.move(tmp_path / "quarantine-aside", layout.quarantine)
    assert "committed batches 0" in err and "raw was deleted or replaced" in err


@pytest.mark.spark
def test_one_change_log_deleted_under_a_live_checkpoint_is_refused(streamed, tmp_path, capsys):
    layout = streamed
    orders = layout.raw / "orders_changes"
    shutil.move(orders, tmp_path / "orders-aside")
    try:
        err = refusal(["stream", "--data-dir", str(layout.root)], capsys)
    finally:
        shutil.move(tmp_path / "orders-aside", orders)
    assert f"these change logs held and no longer hold: {orders} (batch 0)" in err
    assert "lakehouse reprocess" in err


def stream_batch_folder(root: Path, table: str, batch_id: int) -> Path:
    folder = root / "raw" / f"{table}_changes" / "_ingest_hour=2026-11-23-10" / f"_batch_id={batch_id}"
    folder.mkdir(parents=True)
    (folder / "part-0.parquet").write_bytes(b"")
    return folder


def committed(checkpoint: Path, *batch_ids: int) -> None:
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    for batch_id in batch_ids:
        (checkpoint / "commits" / str(batch_id)).write_text("v1\n{}")


def test_a_table_that_never_had_a_batch_does_not_block_a_start_but_a_lost_one_does(tmp_path):
    checkpoint, landing, contracts = tmp_path / "cp", tmp_path / "landing", load_contracts()
    stream_id = claim_stream_identity(tmp_path, checkpoint, landing, contracts)
    stream_batch_folder(tmp_path, "customers", 0)
    committed(checkpoint, 0)
    # Orders has had no change yet: a quiet table, not a deleted one.
    assert claim_stream_identity(tmp_path, checkpoint, landing, contracts) == stream_id
    orders = stream_batch_folder(tmp_path, "orders", 1)
    committed(checkpoint, 1)
    assert claim_stream_identity(tmp_path, checkpoint, landing, contracts) == stream_id
    assert json.loads((tmp_path / "raw" / STREAM_IDENTITY_FILE).read_text())["table_batches"] == {
        "customers_changes": 0, "orders_changes": 1}

    shutil.rmtree(orders.parent.parent)

    with pytest.raises(StreamIdentityError, match=r"no longer hold: .*orders_changes \(batch 1\)"):
        claim_stream_identity(tmp_path, checkpoint, landing, contracts)


def test_raw_batches_without_any_record_or_checkpoint_are_refused(tmp_path):
    """Raw written by an earlier version (no identity record), whose checkpoint is gone."""
    folder = tmp_path / "raw" / "customers_changes" / "_ingest_hour=2026-11-23-10" / "_batch_id=0"
    folder.mkdir(parents=True)
    (folder / "part-0.parquet").write_bytes(b"")

    with pytest.raises(StreamIdentityError, match="holds stream batches 0 but there is no checkpoint"):
        claim_stream_identity(tmp_path, tmp_path / "checkpoints" / "q", tmp_path / "landing", load_contracts())
    assert not (tmp_path / "raw" / STREAM_IDENTITY_FILE).exists()


def test_backfill_batches_alone_do_not_need_a_checkpoint(tmp_path):
    folder = tmp_path / "raw" / "orders_changes" / "_ingest_hour=2026-11-23-10" / "_batch_id=-42"
    folder.mkdir(parents=True)

    stream_id = claim_stream_identity(tmp_path, tmp_path / "cp", tmp_path / "landing", load_contracts())

    assert checkpoint_stream_id(tmp_path / "cp") == stream_id
    assert claim_stream_identity(tmp_path, tmp_path / "cp", tmp_path / "landing", load_contracts()) == stream_id


@pytest.mark.spark
def test_a_committed_batch_that_wrote_nothing_does_not_block_a_restart(spark, tmp_path):
    layout = DataLayout(tmp_path / "data")
    empty = layout.landing / "2026" / "11" / "23" / "10" / "blank.jsonl"
    empty.parent.mkdir(parents=True)
    empty.write_text("\n  \n")
    customers = contracts_of(tmp_path / "contracts", "customers")
    stream(layout, sink="parquet", contracts_dir=customers, spark=spark, out=lambda _: None)
    assert (layout.root / CHECKPOINT / "commits" / "0").is_file() and not list(layout.raw.rglob("*.parquet"))

    write_landing_files(layout.landing, seed=23, customers=2, orders_per_customer=1, records_per_file=30)
    stream(layout, sink="parquet", contracts_dir=customers, spark=spark, out=lambda _: None)

    assert status(layout).change_rows["customers"] > 0


@pytest.mark.parametrize(("marker", "refused"), [("stream-a:3", True), ("backfill:-42", False)])
def test_a_hudi_change_log_without_record_or_checkpoint_is_refused(tmp_path, marker, refused):
    """Hudi commits carry their batch as `<stream id>:<batch id>`: a new stream id would not
    recognise them and would insert every change again, so a lost checkpoint is refused
    as it is for batch folders. One-off batches (negative ids) need no checkpoint."""
    if not SAMPLES.is_dir():
        pytest.skip(f"real Hudi sample tables not found at {SAMPLES} (shared/ beside the checkout)")
    table = sample_table("cow_v6_nonpartitioned", tmp_path / "unzip")
    (tmp_path / "raw").mkdir()
    table = table.rename(tmp_path / "raw" / "customers_changes")
    set_marker(table, "20240418173551906.commit", marker)

    claim = lambda: claim_stream_identity(tmp_path, tmp_path / "cp", tmp_path / "landing", load_contracts())  # noqa: E731
    if refused:
        with pytest.raises(StreamIdentityError, match="holds stream batches 3 but there is no checkpoint"):
            claim()
    else:
        assert claim() == checkpoint_stream_id(tmp_path / "cp")
