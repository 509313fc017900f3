"""The optional S3A jar set (streaming/runtime/jars.py) and the pieces of the s3a drill that
need no JVM (benchmarks/s3a_drill.py); the drill itself is `make drills`, not a test."""
from __future__ import annotations

from pathlib import Path

import pyspark
import pytest

from benchmarks.s3a_drill import CrashHook, key_area, request_kind, s3a_spark_conf, staged_file_pattern
from streaming.runtime import jars
from streaming.runtime.jars import AWS_SDK_BUNDLE, HADOOP_AWS, LOCAL_JARS, S3A_JARS, JarError, MavenJar


def test_hadoop_aws_is_the_hadoop_version_pyspark_ships() -> None:
    # S3AFileSystem is built against its own Hadoop's classes: a pyspark upgrade that moves
    # Hadoop must move this pin too.
    (client,) = (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar")
    assert HADOOP_AWS.version == client.name.removeprefix("hadoop-client-api-").removesuffix(".jar")


def test_the_s3a_set_is_pinned_and_not_fetched_by_make_venv() -> None:
    assert S3A_JARS == (HADOOP_AWS, AWS_SDK_BUNDLE)
    assert not set(S3A_JARS) & set(LOCAL_JARS)
    for jar in S3A_JARS:
        assert len(jar.sha256) == 64 and int(jar.sha256, 16) >= 0
    assert AWS_SDK_BUNDLE.file_name == "aws-java-sdk-bundle-1.12.262.jar"


def test_fetch_s3a_fetches_that_set_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fetched: list[MavenJar] = []

    def record(jar: MavenJar, folder: Path | None = None) -> Path:
        fetched.append(jar)
        return tmp_path / jar.file_name

    monkeypatch.setattr(jars, "fetch", record)
    assert jars.main(["fetch", "--s3a", "--into", str(tmp_path)]) == 0
    assert fetched == list(S3A_JARS)
    fetched.clear()
    assert jars.main(["fetch", "--into", str(tmp_path)]) == 0
    assert fetched == list(LOCAL_JARS)


def test_an_s3a_jar_that_cannot_be_fetched_says_what_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(jar: MavenJar, folder: Path | None = None) -> Path:
        raise JarError(f"could not fetch {jar.coordinate} from Maven Central (offline)")

    monkeypatch.setattr(jars, "fetch", refuse)
    assert jars.main(["fetch", "--s3a", "--into", str(tmp_path)]) == 1
    message = capsys.readouterr().err.strip()
    assert message.count("\n") == 0
    assert "org.apache.hadoop:hadoop-aws:3.3.4" in message and message.endswith("the s3a drill cannot run here")


def test_s3a_settings_hold_no_credentials_and_keep_the_hudi_bundle() -> None:
    conf = s3a_spark_conf("http://127.0.0.1:5000", [Path("/j/hudi.jar"), Path("/j/hadoop-aws.jar")])

    assert conf["spark.jars"] == "/j/hudi.jar,/j/hadoop-aws.jar"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:5000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("EnvironmentVariableCredentialsProvider")
    assert not [key for key in conf if "key" in key.lower() or "secret" in key.lower()]


def test_the_crash_hook_fires_on_the_rename_of_a_staged_file_only() -> None:
    staged = "/b/p/raw/_tmp/customers_changes/1/" + "a" * 32 + "/part-00000-x.snappy.parquet"
    spark_task_file = "/b/p/raw/_tmp/customers_changes/1/" + "a" * 32 + "/_temporary/0/task/part-00000-x.parquet"
    other_batch = staged.replace("/1/", "/2/")
    quarantine = "/b/p/_tmp/quarantine/1/" + "b" * 32 + "/part-00001-y.snappy.parquet"
    pattern = staged_file_pattern(1)
    assert pattern.search(staged)["table"] == "customers_changes"
    assert pattern.search(quarantine)["table"] == "quarantine"
    assert not pattern.search(spark_task_file) and not pattern.search(other_batch)
    assert not pattern.search(staged.rsplit("/", 1)[0] + "/")  # a directory marker

    deleted = CrashHook("copied_not_deleted", 1)
    assert deleted.matches("bulk_delete", ["/x", staged], "")
    assert not deleted.matches("bulk_delete", [spark_task_file], "")
    assert not deleted.matches("copy", [], staged)
    copied = CrashHook("mid_copy", 1)
    assert copied.matches("copy", [], quarantine)
    assert not copied.matches("copy", [], spark_task_file)


def test_requests_are_counted_by_kind_and_copies_by_area() -> None:
    assert request_kind({"REQUEST_METHOD": "PUT", "HTTP_X_AMZ_COPY_SOURCE": "/b/k"}) == "copy"
    assert request_kind({"REQUEST_METHOD": "POST", "QUERY_STRING": "delete"}) == "bulk_delete"
    assert request_kind({"REQUEST_METHOD": "GET", "PATH_INFO": "/bucket"}) == "list"
    assert request_kind({"REQUEST_METHOD": "GET", "PATH_INFO": "/bucket/key"}) == "get"
    assert key_area("/b/p/raw/customers_changes/_ingest_hour=h/_batch_id=1/part-0") == "raw"
    assert key_area("/b/p/raw/_tmp/customers_changes/1/u/part-0") == "scratch"
    assert key_area("/b/p/quarantine/_batch_id=1/part-0") == "quarantine"
    assert key_area("/b/p/checkpoints/landing_to_raw/commits/0") == "checkpoint"
