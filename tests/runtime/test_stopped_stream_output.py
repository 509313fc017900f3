"""What `lakehouse stream` prints when a batch stops it: the cause on one line, not the
tracebacks of py4j, Spark and Hudi before it. A full disk is told apart however the JVM
wrapped it; after space is freed, the stream writes the stopped batch again, exactly. So
is a catalog sync whose Hive metastore stopped answering (`--catalog`)."""
from __future__ import annotations

import errno
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_processes import LakehouseProcess

from streaming.cli import main
from streaming.cli.exit_codes import REFUSED, exit_code_of, message_of
from streaming.io.hive_metastore import MetastoreUnreachable, is_metastore_unreachable
from streaming.io.layout import DataLayout
from streaming.operations.stream import stream
from streaming.runtime.disk_full import NO_SPACE_LEFT, is_disk_full
from streaming.runtime.stream_loop import refusal_of, run_stream

AWS_FIXTURES = Path(__file__).parents[1] / "fixtures" / "aws"


def _jvm_error(spark, deepest_message: str) -> Exception:
    """A real Py4JJavaError, as a failed Hudi write raises it: a Spark job's failure whose
    causes end in the JVM's java.io.IOException."""
    from py4j.protocol import Py4JJavaError

    jvm = spark._jvm
    io_error = jvm.java.io.IOException(deepest_message)
    unchecked = jvm.java.io.UncheckedIOException("writing a base file", io_error)
    job_failure = jvm.org.apache.spark.SparkException("Job aborted due to stage failure", unchecked)
    with pytest.raises(Py4JJavaError) as raised:
        jvm.java.util.concurrent.CompletableFuture.failedFuture(job_failure).get()
    return raised.value


def test_a_full_disk_is_told_apart_however_it_was_wrapped(spark) -> None:
    assert is_disk_full(_jvm_error(spark, NO_SPACE_LEFT))
    assert not is_disk_full(_jvm_error(spark, "Permission denied"))
    try:
        try:
            raise OSError(errno.ENOSPC, NO_SPACE_LEFT)
        except OSError as full:
            raise RuntimeError("the quarantine write failed") from full
    except RuntimeError as wrapped:
        assert is_disk_full(wrapped)
    assert not is_disk_full(RuntimeError("a bug"))


def test_a_full_disk_met_outside_a_stream_ends_the_command_in_one_line(spark) -> None:
    # A backfill's or a replay's Hudi write, whose Py4JJavaError reaches the command itself.
    jvm_write = _jvm_error(spark, NO_SPACE_LEFT)
    assert exit_code_of(jvm_write) == REFUSED
    assert message_of(jvm_write).splitlines() == [message_of(jvm_write)]
    assert message_of(jvm_write).startswith(NO_SPACE_LEFT)
    assert exit_code_of(_jvm_error(spark, "Permission denied")) is None, "a bug keeps its traceback"
    assert exit_code_of(OSError(errno.ENOSPC, NO_SPACE_LEFT)) == REFUSED


def _sync_error(spark, below_the_sync):
    """A real Py4JJavaError shaped as a Hudi 1.0.2 write raises it when its Hive sync after
    the commit fails (HoodieSparkSqlWriter.metaSync): `below_the_sync(jvm)` is what the
    sync tool met."""
    from py4j.protocol import Py4JJavaError

    jvm = spark._jvm
    hive_sync = jvm.org.apache.hudi.hive.HoodieHiveSyncException("Got runtime exception when hive syncing",
                                                                   below_the_sync(jvm))
    tool = jvm.org.apache.hudi.exception.HoodieException("Unable to instantiate class org.apache.hudi.hive.HiveSyncTool",
                                                          jvm.java.lang.reflect.InvocationTargetException(hive_sync))
    meta_sync = jvm.org.apache.hudi.exception.HoodieMetaSyncException(
        "Could not sync using the meta sync class org.apache.hudi.hive.HiveSyncTool", tool)
    with pytest.raises(Py4JJavaError) as raised:
        jvm.java.util.concurrent.CompletableFuture.failedFuture(meta_sync).get()
    return raised.value


def _no_metastore_at_the_client_start(jvm):
    # As seen with `lakehouse stream --catalog` to a port nothing listens on any more.
    refused = jvm.org.apache.hadoop.hive.metastore.api.MetaException(
        "Could not connect to meta store using any of the URIs provided. Most recent failure: "
        "org.apache.thrift.transport.TTransportException: java.net.ConnectException: Connection refused")
    client = jvm.java.lang.RuntimeException(
        "Unable to instantiate org.apache.hadoop.hive.ql.metadata.SessionHiveMetaStoreClient",
        jvm.java.lang.reflect.InvocationTargetException(refused))
    return jvm.org.apache.hudi.hive.HoodieHiveSyncException("Failed to create HiveMetaStoreClient", client)


def _metastore_gone_mid_sync(jvm):
    broken = jvm.org.apache.thrift.transport.TTransportException(jvm.java.net.SocketException("Broken pipe"))
    return jvm.org.apache.hudi.hive.HoodieHiveSyncException("Failed to sync partitions for table customers_changes",
                                                            broken)


def _metastore_refused_the_sync(jvm):
    return jvm.org.apache.hudi.hive.HoodieHiveSyncException(
        "Failed to create database raw", jvm.org.apache.hadoop.hive.metastore.api.MetaException("Permission denied"))


def test_a_sync_that_cannot_reach_its_metastore_is_told_apart_from_one_it_refused(hudi_spark) -> None:
    assert is_metastore_unreachable(_sync_error(hudi_spark, _no_metastore_at_the_client_start))
    assert is_metastore_unreachable(_sync_error(hudi_spark, _metastore_gone_mid_sync))
    assert not is_metastore_unreachable(_sync_error(hudi_spark, _metastore_refused_the_sync))
    # A connection refused outside a catalog sync (an object store, a timeline server) is
    # not the metastore's.
    assert not is_metastore_unreachable(_jvm_error(hudi_spark, "java.net.ConnectException: Connection refused"))
    assert not is_metastore_unreachable(RuntimeError("Could not connect to meta store"))


def test_a_batch_whose_sync_lost_the_metastore_stops_the_stream_on_one_line_naming_it(hudi_spark, tmp_path) -> None:
    """The stream's failure, as `lakehouse stream --catalog` reports it: the refusal alone,
    naming the metastore and what to do; without a catalog the error stays as it was."""
    from pyspark.errors import StreamingQueryException

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "one.json").write_text('{"a": 1}\n')

    class SyncLosesItsMetastore:
        def process_batch(self, df, batch_id):
            raise _sync_error(hudi_spark, _metastore_gone_mid_sync)

    for catalog, query_name in (("thrift://127.0.0.1:9083", "lost_metastore"), (None, "no_catalog")):
        source = hudi_spark.readStream.schema("a INT").json(str(tmp_path / "in"))
        with pytest.raises(StreamingQueryException):
            run_stream(hudi_spark, SyncLosesItsMetastore(), source,  # type: ignore[arg-type]
                       checkpoint_dir=str(tmp_path / query_name), query_name=query_name, catalog=catalog)
    refusal = refusal_of("lost_metastore")
    assert isinstance(refusal, MetastoreUnreachable) and exit_code_of(refusal) == REFUSED
    assert message_of(refusal).splitlines() == [
        "the Hive metastore at thrift://127.0.0.1:9083 stopped answering while batch 0 synced its commits to it: "
        "restart it (`make athena-local`), then run the stream again: the batch is replayed, a commit already "
        "written is synced, not written twice"]
    assert refusal_of("no_catalog") is None


def _stream(data_dir: Path, *args: str) -> tuple[int, str]:
    process = LakehouseProcess(["stream", "--data-dir", str(data_dir), *args], cwd=data_dir.parent)
    try:
        return process.wait(), process.err
    finally:
        process.stop()


def test_a_keys_only_refusal_is_printed_without_tracebacks(tmp_path: Path) -> None:
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    (contracts / "forum.yml").write_text(
        "table: Forum\nraw_table: forum\nkey: {partition_key: ForumName, sort_key: Subject}\n"
        "attributes: {ForumName: {type: S}, Subject: {type: S}}\n"
        'partitioning: {column: forum_initial, expression: "substring(forum_name, 1, 1)"}\n')
    # The API reference's GetRecords example, a KEYS_ONLY stream's records.
    arn = "arn:aws:dynamodb:us-west-2:111122223333:table/Forum/stream/2015-05-20T20:51:10.252"
    sample = json.loads((AWS_FIXTURES / "getrecords_api_example_output.json").read_text())
    hour = tmp_path / "data" / "landing" / "2026" / "11" / "23" / "11"
    hour.mkdir(parents=True)
    (hour / "keys-only.json").write_text("".join(json.dumps(record | {"eventSourceARN": arn}) + "\n"
                                                 for record in sample["Records"]))

    code, err = _stream(tmp_path / "data", "--contracts-dir", str(contracts), "--sink", "parquet")

    assert code == 2
    assert err.splitlines()[-1].startswith("lakehouse stream: batch 0 refused, nothing of it was written: table Forum")
    assert "Traceback" not in err and "Py4J" not in err, err


def _mount_tmpfs(folder: Path, size: str, *, remount: bool = False) -> None:
    options = f"remount,size={size}" if remount else f"size={size}"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"a small file system is needed to fill, and `mount -t tmpfs` was refused here: "
                    f"{done.stderr.strip() or done.returncode}")


def test_a_full_disk_under_a_hudi_write_is_one_line_and_the_restart_lands_the_batch_exactly(
        hudi_spark, tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    # Room for the landing files (about 170 KB) and the checkpoint, not for the batch's
    # Hudi tables (about 1.4 MB: files without bloom filters, hoodie.parquet.bloom.filter.enabled).
    _mount_tmpfs(small, "1m")
    try:
        data_dir = small / "data"
        assert main(["generate", "--data-dir", str(data_dir), "--customers", "5"]) == 0
        reference = tmp_path / "reference"
        shutil.copytree(data_dir / "landing", reference / "landing")

        code, err = _stream(data_dir)

        assert code == 2, err
        assert err.splitlines()[-1] == (
            f"lakehouse stream: {data_dir / 'raw'}: {NO_SPACE_LEFT} (batch 0 was not committed). Free space there "
            "and run the command again: it writes the batch again from its start, and nothing of it lands twice")
        # Was 1,367 lines: each layer's trace of the same failure. A trace the JVM prints
        # itself for a thread of Hudi's timeline server may remain (not a log4j line).
        assert "Traceback" not in err and len(err.splitlines()) < 60, err

        _mount_tmpfs(small, "256m", remount=True)
        assert _stream(data_dir)[0] == 0
        # The same landing files streamed where space never ran out.
        stream(DataLayout(reference), spark=hudi_spark, out=lambda line: None)
        assert main(["reconcile", "--source", str(reference / "raw"), "--target", str(data_dir / "raw")]) == 0
    finally:
        subprocess.run(["umount", str(small)], check=False)
