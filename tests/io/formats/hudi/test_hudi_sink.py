"""HudiSink: timeline reading on real Hudi tables, replay skipping, and (with the bundle) real writes.

The tables come from ../shared/hudi-samples (written by Spark with Apache Hudi, from the
apache/hudi-rs test data): table version 6 keeps completed commits as JSON files
`.hoodie/<instant>.commit`, version 8 moved them to `.hoodie/timeline/` in Avro.
"""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hudi_samples import SAMPLES, sample_table, set_marker

from streaming.contracts.loader import load_contracts
from streaming.contracts.spark_schema import change_log_schema
from streaming.io.formats.hudi.options import BATCH_MARKER_KEY, BUCKETS_RECORD_KEY, NUM_BUCKETS_KEY
from streaming.io.formats.hudi.sink import HudiSchemaError, HudiSink, save_with_hudi, table_column_order
from streaming.io.formats.hudi.timeline import (
    HudiTimelineError,
    LocalFiles,
    TimelineHead,
    commit_metadata,
    completed_instants,
    read_timeline_head,
    table_commits,
)
from streaming.io.storage import HadoopFiles

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"real Hudi sample tables not found at {SAMPLES}"),
]


def change_log_from_sample(tmp_path: Path, columns: list[str], marker: str | None) -> Path:
    """A real version-6 table at <tmp>/customers_changes whose newest commit has the
    customers change log's writer schema (as Hudi records it) and the given batch marker."""
    table = tmp_path / "customers_changes"
    sample_table("cow_v6_nonpartitioned", tmp_path / "unzip").rename(table)
    commit = table / ".hoodie" / "20240418173551906.commit"
    metadata = json.loads(commit.read_text())
    metadata["extraMetadata"]["schema"] = json.dumps(
        {"type": "record", "name": "customers_changes_record", "fields": [{"name": name} for name in columns]}
    )
    commit.write_text(json.dumps(metadata))
    if marker is not None:
        set_marker(table, commit.name, marker)
    return table


@pytest.fixture
def files(spark):
    return HadoopFiles(spark)


def test_completed_instants_of_real_version_6_tables(files, tmp_path):
    cow = sample_table("cow_v6_complexkeygen_hivestyle", tmp_path / "cow")
    mor = sample_table("mor_avro_v6_trips_8i1u", tmp_path / "mor")
    empty = sample_table("cow_v6_empty", tmp_path / "empty")

    # .commit.requested and .inflight files of the same instants are not completed commits.
    assert completed_instants(files, str(cow)) == ["20240418173213674.commit", "20240418173235694.commit"]
    assert completed_instants(files, str(mor)) == ["20250331030642808.deltacommit", "20250331030645735.deltacommit"]
    assert completed_instants(files, str(empty)) == []
    assert completed_instants(files, str(tmp_path / "not_created_yet")) == []
    metadata = commit_metadata(files, str(cow), "20240418173235694.commit")
    assert metadata["operationType"] == "UPSERT"
    assert "schema" in metadata["extraMetadata"]


def test_real_commits_carry_no_batch_marker_but_their_schema(files, tmp_path):
    cow = sample_table("cow_v6_nonpartitioned", tmp_path / "cow")
    # The writer schema Hudi keeps in every commit's extraMetadata, in the table's order.
    assert read_timeline_head(files, str(cow)).columns == (
        "id", "name", "isActive", "byteField", "shortField", "intField", "longField", "floatField", "doubleField",
        "decimalField", "dateField", "timestampField", "binaryField", "arrayField", "mapField", "structField",
    )
    assert read_timeline_head(files, str(cow)).batch_marker is None
    assert read_timeline_head(files, str(tmp_path / "absent")) == TimelineHead(None, None)


def test_version_8_timeline_is_refused_not_read_as_empty(files, tmp_path):
    v8 = sample_table("cow_v8_complexkeygen_hivestyle", tmp_path / "v8")
    with pytest.raises(HudiTimelineError, match="hoodie.table.version is 8"):
        read_timeline_head(files, str(v8))


def test_a_properties_file_still_being_written_reads_as_a_table_not_there_until_it_has_commits(files, tmp_path):
    """HoodieTableConfig.create opens hoodie.properties and then writes it: a reader racing
    a table's first write finds the file empty (the freshness bench's watcher did). With no
    completed commit that is a table being created; beside one it is a broken table."""
    being_created = tmp_path / "being_created"
    (being_created / ".hoodie").mkdir(parents=True)
    (being_created / ".hoodie" / "hoodie.properties").write_text("")
    assert completed_instants(files, str(being_created)) == []
    assert read_timeline_head(files, str(being_created)) == TimelineHead(None, None)

    broken = sample_table("cow_v6_complexkeygen_hivestyle", tmp_path / "broken")
    (broken / ".hoodie" / "hoodie.properties").write_text("")
    with pytest.raises(HudiTimelineError, match="hoodie.table.version is None"):
        completed_instants(files, str(broken))


def test_latest_marker_is_read_from_the_newest_commit_that_has_one(files, tmp_path):
    table = sample_table("cow_v6_complexkeygen_hivestyle", tmp_path / "cow")
    set_marker(table, "20240418173213674.commit", "stream-a:2")
    set_marker(table, "20240418173235694.commit", "stream-a:3")
    assert read_timeline_head(files, str(table)).batch_marker == "stream-a:3"

    # A later commit without a marker (a table service, say) is passed over, and a later
    # instant that is only requested/inflight is not a commit at all.
    hoodie = table / ".hoodie"
    shutil.copy(hoodie / "20240418173213674.commit", hoodie / "20240418180000000.commit")
    set_marker(table, "20240418180000000.commit", None)
    shutil.copy(hoodie / "20240418173235694.inflight", hoodie / "20240418190000000.inflight")
    (hoodie / "20240418190000000.commit.requested").touch()
    assert read_timeline_head(files, str(table)).batch_marker == "stream-a:3"


def test_unreadable_commit_metadata_fails_loudly(files, tmp_path):
    table = sample_table("cow_v6_nonpartitioned", tmp_path / "cow")
    (table / ".hoodie" / "20240418173551906.commit").write_text("{not json")
    with pytest.raises(HudiTimelineError, match="not JSON commit metadata"):
        read_timeline_head(files, str(table))


def test_new_columns_go_after_the_table_columns():
    assert table_column_order(["a", "b", "c"], None) == ["a", "b", "c"]
    # A contract attribute added later sits before the metadata columns in the batch.
    assert table_column_order(["a", "new", "b", "_meta"], ("a", "b", "_meta")) == ["a", "b", "_meta", "new"]
    with pytest.raises(HudiSchemaError, match=r"\['b'\]"):
        table_column_order(["a", "_meta"], ("a", "b", "_meta"))


class RecordingWriter:
    """Stands in for the Hudi datasource where the bundle is absent: keeps what it was given."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, dict[str, str], list]] = []

    def __call__(self, df, options, path) -> None:
        self.writes.append((path, dict(options), df.collect()))


def change(schema, cust_id, email, ordering, event_id, batch_id=7):
    values = {name: None for name in schema.fieldNames()}
    values.update(
        id=cust_id, cust_name="Ana", email=email, id_suffix=cust_id[-1], _event_name="MODIFY",
        _is_deleted=False, _is_ttl_delete=False, _ordering_value=ordering, _event_id=event_id,
        _source_table="customers", _ingested_at=datetime(2026, 4, 4, 8, tzinfo=timezone.utc),
        _batch_id=batch_id, _ingest_hour="2026-04-04-08",
    )
    return tuple(values[name] for name in schema.fieldNames())


@pytest.fixture
def customers_batch(spark):
    contract = load_contracts()["customers"]
    schema = change_log_schema(contract)
    rows = [
        change(schema, "c1", "old@x", "20260404075900000000" + "0" * 64, "e1"),
        change(schema, "c1", "new@x", "20260404080000000000" + "0" * 64, "e2"),
        change(schema, "c2", "a@x", "20260404080100000000" + "0" * 64, None),
    ]
    return contract, spark.createDataFrame(rows, schema)


def test_sink_writes_the_change_log_and_the_winner_per_key(tmp_path, customers_batch):
    contract, changes = customers_batch
    writer = RecordingWriter()
    sink = HudiSink(str(tmp_path), "raw", load_contracts(), sync_mode="none", stream_id="stream-a", writer=writer)

    sink.write(changes, contract, 7, rows=3)

    (log_path, log_options, log_rows), (state_path, state_options, state_rows) = writer.writes
    assert log_path == str(tmp_path / "customers_changes")
    assert log_options["hoodie.datasource.write.operation"] == "insert"
    assert sorted(row.email for row in log_rows) == ["a@x", "new@x", "old@x"]
    assert state_path == str(tmp_path / "customers")
    assert state_options["hoodie.datasource.write.operation"] == "upsert"
    assert sorted((row.id, row.email) for row in state_rows) == [("c1", "new@x"), ("c2", "a@x")]
    assert "_ingest_hour" not in state_rows[0].asDict()
    assert log_options[BATCH_MARKER_KEY] == state_options[BATCH_MARKER_KEY] == "stream-a:7"


def test_replayed_batch_is_not_written_again(spark, tmp_path, customers_batch):
    contract, changes = customers_batch
    # The change log already holds batch 7 of this stream (a crash after its commit).
    change_log = change_log_from_sample(tmp_path, changes.columns, "stream-a:7")
    writer = RecordingWriter()
    sink = HudiSink(str(tmp_path), "raw", load_contracts(), sync_mode="none", stream_id="stream-a", writer=writer)

    sink.write(changes, contract, 7, rows=3)
    assert [path for path, _, _ in writer.writes] == [str(tmp_path / "customers")]

    sink.write(changes, contract, 8, rows=3)
    assert [path for path, _, _ in writer.writes[1:]] == [str(change_log), str(tmp_path / "customers")]
    # Another stream (a new checkpoint) restarts at batch 7: not the committed one.
    other = HudiSink(str(tmp_path), "raw", load_contracts(), sync_mode="none", stream_id="stream-b", writer=writer)
    other.write(changes, contract, 7, rows=3)
    assert writer.writes[-2][0] == str(change_log)


def test_a_one_off_batch_under_later_stream_commits_is_not_written_again(spark, tmp_path, customers_batch):
    contract, changes = customers_batch
    # A backfill (batch -5) committed its change log, then died before recording that it
    # succeeded; a stream batch committed after it. The retry must find it below the head.
    change_log = change_log_from_sample(tmp_path, changes.columns, "backfill:-5")
    backfill_commit = change_log / ".hoodie" / "20240418173551906.commit"
    later_commit = change_log / ".hoodie" / "20240418183551906.commit"
    later_commit.write_text(backfill_commit.read_text())
    set_marker(change_log, later_commit.name, "stream-a:0")
    writer = RecordingWriter()
    backfill = HudiSink(str(tmp_path), "raw", load_contracts(), sync_mode="none", stream_id="backfill", writer=writer)

    backfill.write(changes, contract, -5, rows=3)
    assert [path for path, _, _ in writer.writes] == [str(tmp_path / "customers")]
    # Another one-off batch is written.
    backfill.write(changes, contract, -6, rows=3)
    assert writer.writes[1][0] == str(change_log)


def test_a_column_added_to_the_contract_is_written_last(tmp_path, customers_batch):
    contract, changes = customers_batch
    # The change log was written before the contract had registration_date: its newest
    # commit (a real one, with the schema it would have had) lacks the column.
    earlier = [name for name in changes.columns if name != "registration_date"]
    change_log_from_sample(tmp_path, earlier, None)
    writer = RecordingWriter()
    sink = HudiSink(str(tmp_path), "raw", load_contracts(), sync_mode="none", stream_id="s", writer=writer)

    sink.write(changes, contract, 1, rows=3)

    log_rows = writer.writes[0][2]
    assert list(log_rows[0].asDict()) == [*earlier, "registration_date"]
    # The current state has no table yet: the batch keeps the contract's order.
    assert list(writer.writes[1][2][0].asDict()) == [name for name in changes.columns if name != "_ingest_hour"]


def test_empty_batch_writes_nothing(tmp_path, customers_batch):
    contract, changes = customers_batch
    writer = RecordingWriter()
    sink = HudiSink(str(tmp_path), "raw", load_contracts(), sync_mode="none", stream_id="s", writer=writer)
    sink.write(changes, contract, 1, rows=0)
    sink.write(changes.limit(0), contract, 2)
    assert writer.writes == []


def test_without_stream_id_the_sink_warns_and_writes_unmarked(tmp_path, customers_batch, caplog):
    contract, changes = customers_batch
    writer = RecordingWriter()
    with caplog.at_level("WARNING", logger="streaming.io.formats.hudi.sink"):
        sink = HudiSink(str(tmp_path), "raw", load_contracts(), sync_mode="none", writer=writer)
    assert "without stream_id" in caplog.text
    sink.write(changes, contract, 1, rows=3)
    assert len(writer.writes) == 2
    assert all(BATCH_MARKER_KEY not in options for _, options, _ in writer.writes)


def test_unknown_contract_is_refused(tmp_path, customers_batch):
    contract, changes = customers_batch
    orders_only = {"orders": load_contracts()["orders"]}
    sink = HudiSink(str(tmp_path), "raw", orders_only, sync_mode="none", stream_id="s", writer=RecordingWriter())
    with pytest.raises(KeyError, match="customers"):
        sink.write(changes, contract, 1, rows=3)


def test_hudi_sink_writes_real_hudi_tables(hudi_spark, tmp_path, customers_batch):
    spark = hudi_spark
    contract, changes = customers_batch
    sink = HudiSink(str(tmp_path), "raw", load_contracts(), sync_mode="none", stream_id="stream-a")
    sink.write(changes, contract, 7)
    sink.write(changes, contract, 7)  # a replay: the change log must not grow
    late = changes.where("_event_id = 'e1'").withColumn("_batch_id", changes["_batch_id"] + 1)
    sink.write(late, contract, 8)  # an older change of c1 arriving late

    change_log = spark.read.format("hudi").load(str(tmp_path / "customers_changes"))
    assert sorted(row.email for row in change_log.collect()) == ["a@x", "new@x", "old@x", "old@x"]
    current = spark.read.format("hudi").load(str(tmp_path / "customers"))
    assert sorted((row.id, row.email) for row in current.collect()) == [("c1", "new@x"), ("c2", "a@x")]
    files = HadoopFiles(spark)
    for table in ("customers_changes", "customers"):
        properties = (tmp_path / table / ".hoodie" / "hoodie.properties").read_text()
        assert "hoodie.table.version=6" in properties
        assert read_timeline_head(files, str(tmp_path / table)).batch_marker == "stream-a:8"


def test_commits_of_a_real_table_with_their_rows(tmp_path):
    cow = sample_table("cow_v6_complexkeygen_hivestyle", tmp_path / "cow")
    commits = table_commits(LocalFiles(), str(cow))
    assert [(commit.instant, commit.operation) for commit in commits] == [
        ("20240418173213674", "UPSERT"), ("20240418173235694", "UPSERT")]
    # Its write stats: three rows inserted into two partitions, then one updated and one
    # inserted into a third partition (the four rows of the snapshot).
    assert [(c.inserted, c.updated, c.files_written) for c in commits] == [(3, 0, 2), (1, 1, 2)]
    assert commits[1].batch_marker is None


def test_a_replayed_batch_syncs_the_catalog_again(spark, tmp_path, customers_batch):
    """Hudi syncs after its commit, so a crash in the sync leaves the batch committed but
    not in the catalog; the replay that skips the write runs the sync again.
    (tests/io/formats/hudi/interop/test_hudi_tables.py runs the real HiveSyncTool against a Derby metastore.)"""
    contract, changes = customers_batch
    change_log = change_log_from_sample(tmp_path, changes.columns, "stream-a:7")
    synced: list[tuple[str, str]] = []

    def meta_sync(session, options, path):
        synced.append((path, options["hoodie.datasource.hive_sync.table"]))

    for mode in ("none", "hms"):
        writer = RecordingWriter()
        sink = HudiSink(str(tmp_path), "raw", load_contracts(), sync_mode=mode, stream_id="stream-a",
                        writer=writer, meta_sync=meta_sync)
        sink.write(changes, contract, 7, rows=3)
        # The current state, without the marker, is written (and Hudi syncs it itself).
        assert [path for path, _, _ in writer.writes] == [str(tmp_path / "customers")]
    assert synced == [(str(change_log), "customers_changes")]


def _many_customers(spark, contract, email: str, ordering_prefix: str):
    """40 customers in 10 partitions (the id's last digit): enough keys for every one of 4
    buckets of a partition to hold some."""
    schema = change_log_schema(contract)
    rows = [change(schema, f"c{number}", email, ordering_prefix + "0" * (84 - len(ordering_prefix)), f"{email}{number}")
            for number in range(40)]
    return spark.createDataFrame(rows, schema)


def _buckets_written(table: Path) -> set[int]:
    return {int(path.name[:8]) for path in table.rglob("*.parquet")}


def test_a_table_created_with_4_buckets_before_counts_were_recorded_keeps_them(hudi_spark, tmp_path, caplog):
    """The default count went from 4 to 1. A table written with 4 and no recorded count is
    still written with 4: with 1, keys of buckets 1-3 would be written again into bucket 0
    and the current state would hold them twice."""
    spark = hudi_spark
    contract = load_contracts()["customers"]

    def unrecorded_4_buckets(df, options, path):
        old = {key: value for key, value in options.items() if key != BUCKETS_RECORD_KEY}
        save_with_hudi(df, {**old, NUM_BUCKETS_KEY: "4"}, path)

    before = HudiSink(str(tmp_path), "raw", load_contracts(), sync_mode="none", stream_id="s",
                      writer=unrecorded_4_buckets)
    before.write(_many_customers(spark, contract, "old@x", "2026040408"), contract, 1)
    assert _buckets_written(tmp_path / "customers") == {0, 1, 2, 3}
    assert read_timeline_head(HadoopFiles(spark), str(tmp_path / "customers")).buckets_per_partition is None

    after = HudiSink(str(tmp_path), "raw", load_contracts(), sync_mode="none", stream_id="s")
    after.write(_many_customers(spark, contract, "new@x", "2026040409"), contract, 2)

    current = spark.read.format("hudi").load(str(tmp_path / "customers"))
    assert current.count() == 40
    assert {row.email for row in current.collect()} == {"new@x"}
    assert read_timeline_head(HadoopFiles(spark), str(tmp_path / "customers")).buckets_per_partition == 4


def test_a_new_table_gets_one_bucket_and_keeps_it_when_the_count_changes(hudi_spark, tmp_path, caplog):
    spark = hudi_spark
    contract = load_contracts()["customers"]
    HudiSink(str(tmp_path), "raw", load_contracts(), sync_mode="none", stream_id="s").write(
        _many_customers(spark, contract, "old@x", "2026040408"), contract, 1)
    assert _buckets_written(tmp_path / "customers") == {0}
    assert read_timeline_head(HadoopFiles(spark), str(tmp_path / "customers")).buckets_per_partition == 1

    wider = HudiSink(str(tmp_path), "raw", load_contracts(), sync_mode="none", stream_id="s",
                     extra_options={NUM_BUCKETS_KEY: "4"})
    with caplog.at_level("WARNING", logger="streaming.io.formats.hudi.sink"):
        wider.write(_many_customers(spark, contract, "new@x", "2026040409"), contract, 2)
    assert "keeps the 1 bucket(s) per partition it was created with, not the 4 configured" in caplog.text

    current = spark.read.format("hudi").load(str(tmp_path / "customers"))
    assert current.count() == 40
    assert {row.email for row in current.collect()} == {"new@x"}
    assert _buckets_written(tmp_path / "customers") == {0}
