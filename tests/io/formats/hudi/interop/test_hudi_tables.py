"""HudiSink on real Hudi tables: Spark with the Hudi 1.0.2 bundle writes them here, and the
tests read back what Hudi put on disk (hoodie.properties, the timeline, the data files)
through Spark's Hudi reader, hudi-rs and the timeline reader.

Every Spark Hudi write costs seconds, so each module fixture runs one whole scenario
once, records what the tables looked like after each step, and the tests assert on
those records and on the final tables.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiReadOptions, HudiTableBuilder
from pyspark.sql import functions as F

from streaming.contracts.loader import load_contracts
from streaming.contracts.spark_schema import change_log_schema
from streaming.io.formats.hudi.options import BLOOM_FILTER_KEY
from streaming.io.formats.hudi.sink import HudiSink, save_with_hudi
from streaming.io.formats.hudi.timeline import LocalFiles, read_timeline_head, table_commits

pytestmark = pytest.mark.spark

CONTRACTS = load_contracts()
CUSTOMERS = CONTRACTS["customers"]
SCHEMA = change_log_schema(CUSTOMERS)
STREAM = "stream-a"


def ordering(step: int) -> str:
    """A fixed-width ordering value (DESIGN.md: Hudi compares strings byte-wise)."""
    return f"{step:020d}" + "0" * 64


def change(key, email, step, *, event_id=None, removed=False, batch_id=1, schema=SCHEMA, **values):
    row = {name: None for name in schema.fieldNames()}
    row.update(
        id=key, cust_name="Ana", email=None if removed else email, id_suffix=key[-1],
        _event_name="REMOVE" if removed else "MODIFY", _is_deleted=removed, _is_ttl_delete=False,
        _ordering_value=ordering(step), _event_id=event_id, _source_table="customers",
        _ingested_at=datetime(2026, 4, 4, 8, tzinfo=timezone.utc), _batch_id=batch_id,
        _ingest_hour="2026-04-04-08", **values,
    )
    return tuple(row[name] for name in schema.fieldNames())


def commits(base: Path, table: str):
    return table_commits(LocalFiles(), str(base / table))


def hoodie_properties(table: Path) -> dict[str, str]:
    lines = (table / ".hoodie" / "hoodie.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def hudi_rs_batches(table: Path) -> list[pa.RecordBatch]:
    return HudiTableBuilder.from_base_uri(str(table)).build().read(HudiReadOptions())


def data_files(table: Path) -> list[Path]:
    return sorted(path for path in table.rglob("*.parquet") if ".hoodie" not in path.parts)


class FailsOnceOn:
    """The real Hudi write, except that the first write to `table` raises before Hudi runs:
    the crash between the change log's commit and the current state's."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.failed = False
        self.written: list[str] = []

    def __call__(self, df, options, path) -> None:
        name = Path(path).name
        if name == self.table and not self.failed:
            self.failed = True
            raise RuntimeError(f"crash before writing {name}")
        save_with_hudi(df, options, path)
        self.written.append(name)


def pending_instant_files(table: Path) -> list[str]:
    """The timeline files of instants that never completed."""
    completed = tuple(commit.instant for commit in commits(table.parent, table.name))
    return sorted(path.name for path in (table / ".hoodie").iterdir()
                  if path.is_file() and path.name[0].isdigit() and not path.name.startswith(completed))


def forge_pending_commit(table: Path, instant: str) -> Path:
    """Leave `instant` requested and inflight, with a data file holding a ghost row, as a
    writer killed inside its commit does: the instant files are copies of the newest
    commit's own requested/inflight files, the data file a copy of one of its files."""
    hoodie = table / ".hoodie"
    source = commits(table.parent, table.name)[-1].instant
    for suffix in (".commit.requested", ".inflight"):
        shutil.copy(hoodie / f"{source}{suffix}", hoodie / f"{instant}{suffix}")
    original = next(path for path in data_files(table) if path.stem.endswith(source))
    ghost = pq.read_table(original)
    ghost = ghost.set_column(ghost.schema.get_field_index("email"), "email", pa.array(["ghost@x"] * ghost.num_rows))
    forged = original.with_name(original.name.replace(source, instant))
    pq.write_table(ghost, forged)
    # The writer's marker for the file (direct marker layout), which rollback reads.
    marker = hoodie / ".temp" / instant / forged.parent.name / f"{forged.name}.marker.CREATE"
    marker.parent.mkdir(parents=True)
    marker.touch()
    return forged


@pytest.fixture(scope="module")
def landed(hudi_spark, tmp_path_factory):
    """One stream's batches through one sink, with a crash between the two tables, a
    replay, a late and a tied change, a failed write and a writer killed inside a commit.
    Returns the base path and what each step left behind."""
    base = tmp_path_factory.mktemp("landed")
    writer = FailsOnceOn("customers")
    sink = HudiSink(str(base), "raw", CONTRACTS, sync_mode="none", stream_id=STREAM, writer=writer)
    steps: dict[str, dict] = {}

    def record(step: str, **more) -> None:
        steps[step] = dict(
            changes=commits(base, "customers_changes"), current=commits(base, "customers"),
            written=list(writer.written), **more,
        )

    batch_1 = hudi_spark.createDataFrame([
        change("c1", "old@x", 100, event_id="e1"),
        change("c1", "new@x", 200, event_id="e2"),
        change("c2", "a@x", 100),
        change("c3", None, 100, removed=True),
    ], SCHEMA)
    with pytest.raises(RuntimeError, match="crash before writing customers"):
        sink.write(batch_1, CUSTOMERS, 1)
    record("crashed between tables")
    sink.write(batch_1, CUSTOMERS, 1)
    record("replayed after crash")
    sink.write(batch_1, CUSTOMERS, 1)
    record("replayed again")

    # c1: an older change arriving late; c2: another change with the stored ordering value.
    batch_2 = hudi_spark.createDataFrame([
        change("c1", "late@x", 150, batch_id=2), change("c2", "tie@x", 100, batch_id=2)], SCHEMA)
    sink.write(batch_2, CUSTOMERS, 2)
    record("late and tied")

    # A write failing inside Hudi: a task of the change log's insert raises.
    @F.udf("string")
    def crash_on_boom(email):
        if email == "boom@x":
            raise ValueError("executor lost inside the commit")
        return email

    batch_3 = hudi_spark.createDataFrame([change("c4", "d@x", 300, batch_id=3)], SCHEMA)
    failing = hudi_spark.createDataFrame([change("c9", "boom@x", 300, batch_id=3)], SCHEMA).unionByName(batch_3)
    with pytest.raises(Exception, match="executor lost inside the commit"):
        sink.write(failing.withColumn("email", crash_on_boom("email")), CUSTOMERS, 3)
    pending_instant = str(int(steps["late and tied"]["current"][-1].instant) + 1)
    forged = forge_pending_commit(base / "customers", pending_instant)
    pending = {table: pending_instant_files(base / table) for table in ("customers_changes", "customers")}
    emails_while_pending = {row.email for row in hudi_spark.read.format("hudi").load(str(base / "customers")).collect()}
    emails_while_pending |= set(pa.Table.from_batches(hudi_rs_batches(base / "customers")).column("email").to_pylist())
    record("crashed inside a commit", pending=pending, forged=forged, pending_instant=pending_instant,
           emails_while_pending=emails_while_pending)
    sink.write(batch_3, CUSTOMERS, 3)
    record("next batch")
    return base, steps


def test_table_properties_pin_version_6_and_the_configured_keys(hudi_spark, landed):
    base, _ = landed
    change_log = hoodie_properties(base / "customers_changes")
    current = hoodie_properties(base / "customers")
    for properties in (change_log, current):
        assert properties["hoodie.table.version"] == "6"
        assert properties["hoodie.timeline.layout.version"] == "1"
        assert properties["hoodie.table.type"] == "COPY_ON_WRITE"
        assert properties["hoodie.datasource.write.hive_style_partitioning"] == "true"
    # Keyless change log: Hudi generates the keys, so no record key field is stored.
    assert change_log["hoodie.table.keygenerator.type"] == "SIMPLE"
    assert "hoodie.table.recordkey.fields" not in change_log
    assert "hoodie.table.precombine.field" not in change_log
    assert change_log["hoodie.table.partition.fields"] == "_ingest_hour"
    # (id, custName) is a two-field key: ComplexKeyGenerator, stored as its type.
    assert current["hoodie.table.keygenerator.type"] == "COMPLEX"
    assert current["hoodie.table.recordkey.fields"] == "id,cust_name"
    assert current["hoodie.table.precombine.field"] == "_ordering_value"
    assert current["hoodie.compaction.payload.class"] == "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
    assert current["hoodie.table.partition.fields"] == "id_suffix"
    assert current["hoodie.datasource.write.partitionpath.urlencode"] == "true"
    assert change_log["hoodie.datasource.write.partitionpath.urlencode"] == "false"
    # Unlike the version-6 tables Hudi 0.14 wrote (../shared/hudi-samples), Hudi 1.0.2
    # stores the key generator only as its 1.x type and names the archive folder with
    # its 1.x name: a 0.x writer looks for hoodie.table.keygenerator.class.
    for properties in (change_log, current):
        assert "hoodie.table.keygenerator.class" not in properties
        assert properties["hoodie.archivelog.folder"] == "history"


def test_the_bucket_index_names_file_groups_by_bucket(hudi_spark, landed):
    base, _ = landed
    # Bucket index (SIMPLE engine) on table version 6: a file group id starts with its
    # bucket number, 8 digits, below hoodie.bucket.index.num.buckets (1 by default: bucket 0).
    current_groups = {path.name.split("_")[0] for path in data_files(base / "customers")}
    assert current_groups and all(name[:8] == "00000000" and name[8] == "-" for name in current_groups)
    # The change log has no bucket index: its file groups are plain UUIDs.
    change_log_groups = {path.name.split("_")[0] for path in data_files(base / "customers_changes")}
    assert not any(name.startswith("0000000") for name in change_log_groups)


def test_base_files_carry_no_bloom_filter(hudi_spark, landed):
    """HoodieStorageConfig.PARQUET_WITH_BLOOM_FILTER_ENABLED, as the bundle defines it: on by
    default, so the sink turns it off. A Hudi bloom filter at the default 60,000 entries is
    431 KB of footer per file; neither raw table's index reads one."""
    loader = hudi_spark.sparkContext._jvm.java.lang.Thread.currentThread().getContextClassLoader()
    storage_config = loader.loadClass("org.apache.hudi.common.config.HoodieStorageConfig")
    bloom_filter = storage_config.getField("PARQUET_WITH_BLOOM_FILTER_ENABLED").get(None)
    assert (bloom_filter.key(), bloom_filter.defaultValue()) == (BLOOM_FILTER_KEY, True)
    base, _ = landed
    for table in ("customers", "customers_changes"):
        files = data_files(base / table)
        assert files, table
        for path in files:
            footer = pq.ParquetFile(path).metadata.metadata
            assert b"org.apache.hudi.bloomfilter" not in footer, path
            assert path.stat().st_size < 64 * 1024, path


def test_commits_are_json_files_with_the_batch_marker(hudi_spark, landed):
    base, _ = landed
    for table, operation in (("customers_changes", "INSERT"), ("customers", "UPSERT")):
        instant_files = sorted(path for path in (base / table / ".hoodie").glob("*.commit"))
        metadata = [json.loads(path.read_text()) for path in instant_files]
        assert [m["operationType"] for m in metadata] == [operation] * 3
        assert [m["extraMetadata"]["lakehouse.batch"] for m in metadata] == [f"{STREAM}:{n}" for n in (1, 2, 3)]
        assert read_timeline_head(LocalFiles(), str(base / table)).batch_marker == f"{STREAM}:3"


def test_a_replay_writes_only_the_table_that_missed_the_batch(hudi_spark, landed):
    _, steps = landed
    crashed = steps["crashed between tables"]
    assert [c.batch_marker for c in crashed["changes"]] == [f"{STREAM}:1"]
    assert crashed["current"] == []
    replayed = steps["replayed after crash"]
    assert replayed["written"] == ["customers_changes", "customers"]
    assert replayed["changes"] == crashed["changes"]
    assert [c.batch_marker for c in replayed["current"]] == [f"{STREAM}:1"]
    # Both tables hold the batch now: the next replay writes nothing and adds no commit.
    again = steps["replayed again"]
    assert again["written"] == replayed["written"]
    assert (again["changes"], again["current"]) == (replayed["changes"], replayed["current"])


def test_a_commit_left_pending_is_rolled_back_by_the_next_write(hudi_spark, landed):
    base, steps = landed
    crashed = steps["crashed inside a commit"]
    failed = crashed["pending"]["customers_changes"]
    # Observed: the failed insert left only its .commit.requested (Hudi writes .inflight
    # after the workload profile, which the failing task never finished) and no data.
    assert len(failed) == 1 and failed[0].endswith(".commit.requested")
    assert crashed["pending"]["customers"] == [f"{crashed['pending_instant']}.commit.requested",
                                               f"{crashed['pending_instant']}.inflight"]
    # Readers (Spark and hudi-rs) see only completed commits, not the pending file.
    assert "ghost@x" not in crashed["emails_while_pending"]
    assert len(crashed["changes"]) == len(crashed["current"]) == 2

    done = steps["next batch"]
    rolled_back = {"customers_changes": failed[0].split(".")[0], "customers": crashed["pending_instant"]}
    for table, instant in rolled_back.items():
        names = {path.name for path in (base / table / ".hoodie").iterdir()}
        # The next write rolled the pending instant back (Hudi's eager rollback of failed
        # writes): its instant files are gone and a completed rollback instant records it.
        assert not any(name.startswith(instant) for name in names), table
        assert any(name.endswith(".rollback") for name in names), table
    # The rollback deleted the file its marker named.
    assert not crashed["forged"].exists()
    assert [c.batch_marker for c in done["current"]] == [f"{STREAM}:{n}" for n in (1, 2, 3)]
    emails = {row.email for row in hudi_spark.read.format("hudi").load(str(base / "customers")).collect()}
    assert "ghost@x" not in emails and "boom@x" not in emails


def test_ordering_late_change_tie_and_tombstone(hudi_spark, landed):
    base, _ = landed
    current = hudi_spark.read.format("hudi").load(str(base / "customers"))
    rows = {row.id: row for row in current.collect()}
    assert sorted(rows) == ["c1", "c2", "c3", "c4"]
    # The stored row (200) outranks the late change (150); an equal value (100) lets
    # the incoming row win the tie.
    assert (rows["c1"].email, rows["c1"]._ordering_value) == ("new@x", ordering(200))
    assert rows["c2"].email == "tie@x"
    # A REMOVE is kept as a tombstone row: DefaultHoodieRecordPayload deletes only on
    # _hoodie_is_deleted, which the raw tables do not use.
    assert (rows["c3"]._is_deleted, rows["c3"]._event_name, rows["c3"].email) == (True, "REMOVE", None)
    change_log = hudi_spark.read.format("hudi").load(str(base / "customers_changes")).collect()
    assert len(change_log) == 7
    keys = [row._hoodie_record_key for row in change_log]
    assert len(set(keys)) == len(keys) and all(keys)


OLD_CUSTOMERS = dataclasses.replace(
    CUSTOMERS, attributes=tuple(spec for spec in CUSTOMERS.attributes if spec.column != "registration_date"))


@pytest.fixture(scope="module")
def evolved(hudi_spark, tmp_path_factory):
    """Four batches under the smallest archival limits Hudi accepts, cleaning by commits so
    that every update makes the cleaner and archival run; the first two batches predate
    the contract's registration_date, the last two carry it. Batch 4 is replayed."""
    base = tmp_path_factory.mktemp("evolved")
    limits = {
        "hoodie.clean.policy": "KEEP_LATEST_COMMITS",
        "hoodie.clean.commits.retained": "1",
        "hoodie.clean.trigger.max.commits": "1",
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3",
    }
    sink = HudiSink(str(base), "raw", CONTRACTS, sync_mode="none", stream_id=STREAM, extra_options=limits)
    old_schema = change_log_schema(OLD_CUSTOMERS)

    def batch(batch_id):
        if batch_id <= 2:
            rows = [change(key, f"{key}-{batch_id}@x", batch_id, batch_id=batch_id, schema=old_schema)
                    for key in ("c1", "c2")]
            return hudi_spark.createDataFrame(rows, old_schema), OLD_CUSTOMERS
        rows = [change(key, f"{key}-{batch_id}@x", batch_id, batch_id=batch_id, registration_date=f"2026-0{batch_id}")
                for key in ("c1", "c2")]
        return hudi_spark.createDataFrame(rows, SCHEMA), CUSTOMERS

    for batch_id in range(1, 5):
        sink.write(*batch(batch_id), batch_id)
    before_replay = {table: commits(base, table) for table in ("customers_changes", "customers")}
    sink.write(*batch(4), 4)
    return base, before_replay


def test_cleaning_and_archival_keep_the_marker_of_the_last_batch(hudi_spark, evolved):
    base, before_replay = evolved
    for table in ("customers_changes", "customers"):
        hoodie = base / table / ".hoodie"
        active = before_replay[table]
        # Archival moved the oldest commits out of the active timeline (at most keep.max
        # stay), into the archive folder hoodie.properties names.
        assert 2 <= len(active) <= 3, table
        archive = hoodie / hoodie_properties(base / table)["hoodie.archivelog.folder"]
        assert any(archive.iterdir()), table
        assert active[-1].batch_marker == f"{STREAM}:4"
        assert read_timeline_head(LocalFiles(), str(base / table)).batch_marker == f"{STREAM}:4"
        # The replay of batch 4 added no commit.
        assert commits(base, table) == active
    # The cleaner (KEEP_LATEST_COMMITS, 1 retained) left each file group of the current
    # state the versions of the last two commits, of the four each group was given.
    assert list((base / "customers" / ".hoodie").glob("*.clean"))
    versions: dict[str, set[str]] = {}
    for path in data_files(base / "customers"):
        versions.setdefault(path.name.split("_")[0], set()).add(path.stem.rsplit("_", 1)[1])
    last_two = {commit.instant for commit in before_replay["customers"][-2:]}
    assert len(versions) == 2 and all(instants == last_two for instants in versions.values())
    rows = hudi_spark.read.format("hudi").load(str(base / "customers")).collect()
    assert sorted((row.id, row.email) for row in rows) == [("c1", "c1-4@x"), ("c2", "c2-4@x")]


def test_an_added_contract_column_is_read_back_by_spark_and_hudi_rs(hudi_spark, evolved):
    base, _ = evolved
    for table in ("customers_changes", "customers"):
        assert read_timeline_head(LocalFiles(), str(base / table)).columns[-1] == "registration_date"
    change_log = hudi_spark.read.format("hudi").load(str(base / "customers_changes"))
    # Spark's file source lists the partition column after the data columns.
    assert change_log.columns[-2:] == ["registration_date", "_ingest_hour"]
    expected = sorted([(batch_id, None) for batch_id in (1, 2) for _ in range(2)]
                      + [(batch_id, f"2026-0{batch_id}") for batch_id in (3, 4) for _ in range(2)])
    assert sorted((row._batch_id, row.registration_date) for row in change_log.collect()) == expected

    # hudi-rs 0.5 returns one record batch per file, each already in the table's latest
    # schema (observed: the files of batches 1 and 2 come back with a null column), so
    # the batches concatenate as they are.
    batches = hudi_rs_batches(base / "customers_changes")
    assert len(batches) == 4 and all(b.schema.names[-1] == "registration_date" for b in batches)
    unified = pa.Table.from_batches(batches)
    assert sorted(zip(unified.column("_batch_id").to_pylist(), unified.column("registration_date").to_pylist())) \
        == expected
    current = pa.Table.from_batches(hudi_rs_batches(base / "customers"))
    assert sorted(zip(current.column("id").to_pylist(), current.column("registration_date").to_pylist())) == [
        ("c1", "2026-04"), ("c2", "2026-04")]


ODD_KEYS = ("c/", "c%", "c=", "c ", "c1")


@pytest.fixture(scope="module")
def synced(hudi_spark, tmp_path_factory):
    """Catalog sync through HiveSyncTool (sync_mode "hms") into an embedded Derby metastore.

    Hive reads its settings from JVM system properties (HiveConf.applySystemProperties),
    which is the one way to point the sync at a private metastore from the shared session
    (Hudi syncs with the cached FileSystem's configuration, not the session's). The first
    write runs while the metastore is unreachable: the change log commits, its sync
    fails, the current state is never written. The replay runs with the metastore back.
    """
    folder = tmp_path_factory.mktemp("metastore")
    system = hudi_spark.sparkContext._jvm.java.lang.System
    settings = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={folder / 'db'};create=true",
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "hive.metastore.warehouse.dir": str(folder / "warehouse"),
        "derby.stream.error.file": str(folder / "derby.log"),
        "hive.metastore.connect.retries": "1",
    }
    for key, value in settings.items():
        system.setProperty(key, value)
    base = tmp_path_factory.mktemp("synced")
    sink = HudiSink(str(base), "raw", CONTRACTS, sync_mode="hms", stream_id=STREAM)
    rows = [change(key, f"{key}@x", 1) for key in ODD_KEYS]
    batch = hudi_spark.createDataFrame(rows, SCHEMA)
    try:
        system.setProperty("hive.metastore.uris", "thrift://127.0.0.1:1")
        with pytest.raises(Exception, match="HiveSyncTool"):
            sink.write(batch, CUSTOMERS, 1)
        system.clearProperty("hive.metastore.uris")
        after_failure = {table: commits(base, table) for table in ("customers_changes", "customers")}
        sink.write(batch, CUSTOMERS, 1)
        hive = hudi_spark.sparkContext._jvm.org.apache.hadoop.hive
        client = hive.metastore.HiveMetaStoreClient(hive.conf.HiveConf())
        try:
            catalog = {
                table: {
                    "partitions": sorted((tuple(partition.getValues()), partition.getSd().getLocation())
                                         for partition in client.listPartitions("raw", table, -1)),
                    "last_synced": client.getTable("raw", table).getParameters().get("last_commit_time_sync"),
                }
                for table in client.getAllTables("raw")
            }
        finally:
            client.close()
    finally:
        for key in (*settings, "hive.metastore.uris"):
            system.clearProperty(key)
    return base, after_failure, catalog


def test_a_sync_that_failed_after_the_commit_is_run_again_on_replay(hudi_spark, synced):
    base, after_failure, catalog = synced
    assert [c.batch_marker for c in after_failure["customers_changes"]] == [f"{STREAM}:1"]
    assert after_failure["customers"] == []
    # The replay skipped the change log's write (no second commit) but synced it.
    assert commits(base, "customers_changes") == after_failure["customers_changes"]
    assert sorted(catalog) == ["customers", "customers_changes"]
    for table in catalog:
        assert catalog[table]["last_synced"] == commits(base, table)[-1].instant
    assert catalog["customers_changes"]["partitions"] == [
        (("2026-04-04-08",), f"file:{base}/customers_changes/_ingest_hour=2026-04-04-08")]


def test_partition_values_are_url_encoded_in_folder_names(hudi_spark, synced):
    base, _, catalog = synced
    table = base / "customers"
    folders = sorted(path.name for path in table.iterdir() if path.name != ".hoodie")
    assert folders == ["id_suffix= ", "id_suffix=%25", "id_suffix=%2F", "id_suffix=%3D", "id_suffix=1"]
    # The data column keeps the raw character.
    for path in data_files(table):
        ids = pq.ParquetFile(path).read(columns=["id", "id_suffix"]).to_pylist()
        assert all(row["id_suffix"] == row["id"][-1] for row in ids)
    # Spark decodes the folder name back into the partition value, and prunes on it.
    current = hudi_spark.read.format("hudi").load(str(table))
    assert sorted((row.id, row.id_suffix) for row in current.collect()) == sorted((k, k[-1]) for k in ODD_KEYS)
    assert [row.id for row in current.where("id_suffix = '/'").collect()] == ["c/"]
    read_by_rs = pa.Table.from_batches(hudi_rs_batches(table))
    assert sorted(zip(read_by_rs.column("id").to_pylist(), read_by_rs.column("id_suffix").to_pylist())) == sorted(
        (k, k[-1]) for k in ODD_KEYS)
    # HiveSyncTool (hms mode) registers each folder with the folder's encoded value as
    # the partition value: hoodie.meta.sync.decode_partition is read only by the
    # JDBC/HiveQL executors and partition drops (HivePartitionUtil), not by
    # HMSDDLExecutor. A catalog query sees id_suffix '%2F' for the key 'c/'.
    assert catalog["customers"]["partitions"] == sorted(
        ((value,), f"file:{table}/id_suffix={value}") for value in ("%2F", "%25", "%3D", " ", "1"))
