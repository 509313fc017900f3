"""Glue job parameters and Kinesis source options, without awsglue."""
from __future__ import annotations

import sys
import types

import pytest

import streaming.runtime.glue_job
from streaming.contracts.loader import load_contracts
from streaming.io.formats.hudi.options import GLUE_SYNC_TOOL
from streaming.io.storage import jvm_class_loadable
from streaming.runtime.glue_job import (
    GLUE_CATALOG_CLIENT_FACTORY,
    METASTORE_CLIENT_FACTORY_KEYS,
    OPTIONAL_ARGS,
    REQUIRED_ARGS,
    CatalogAccessError,
    JobArgumentError,
    KinesisToRaw,
    catalog_access_problem,
    checkpoint_query_id,
    job_settings,
    kinesis_source_options,
    require_catalog_access,
    resolvable_args,
    session_catalog_conf,
)

STREAM_ARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/ddb-cdc"
REQUIRED = {
    "JOB_NAME": "ddb-cdc-to-raw",
    "stream_arn": STREAM_ARN,
    "raw_base_path": "s3://lake/raw",
    "database": "raw",
    "quarantine_root": "s3://lake/ops",
    "checkpoint_location": "s3://lake/checkpoints/ddb-cdc-to-raw/",
}


def argv_of(values: dict[str, str]) -> list[str]:
    argv = ["script.py"]
    for name, value in values.items():
        argv += [f"--{name}", value]
    return argv


def test_optional_args_are_resolved_only_when_given():
    bare = resolvable_args(argv_of(REQUIRED))
    assert bare == list(REQUIRED_ARGS)
    given = resolvable_args(argv_of({**REQUIRED, "window_size": "60 seconds"}) + ["--sync_mode=glue"])
    assert set(given) == {*REQUIRED_ARGS, "window_size", "sync_mode"}
    assert "starting_position" not in given and "contracts_path" not in given


def test_defaults():
    settings = job_settings(REQUIRED)
    assert settings.window_size == "100 seconds"
    assert settings.starting_position == "trim_horizon"
    assert settings.sync_mode == "hms"
    assert settings.retain_hours == 24
    assert settings.window_seconds == 100
    assert settings.contracts_path is None
    assert settings.stream_arn == STREAM_ARN
    assert settings.checkpoint_location == REQUIRED["checkpoint_location"]
    assert set(OPTIONAL_ARGS) == {"starting_position", "window_size", "contracts_path", "sync_mode", "retain_hours"}


def test_explicit_values():
    settings = job_settings(
        {**REQUIRED, "starting_position": "LATEST", "window_size": "2 minutes", "contracts_path": "contracts",
         "sync_mode": "none", "retain_hours": "72"}
    )
    assert settings.starting_position == "latest"
    assert settings.window_size == "2 minutes"
    assert settings.window_seconds == 120
    assert settings.retain_hours == 72
    assert settings.contracts_path == "contracts"
    assert settings.sync_mode == "none"


@pytest.mark.parametrize(
    "timestamp", ["2023-04-04T08:00:00-04:00", "2026-01-31T23:59:59+00:00", "2026-06-01T00:00:00+05:30"]
)
def test_starting_position_timestamps_glue_documents(timestamp):
    """Glue's Kinesis startingPosition: yyyy-mm-ddTHH:MM:SS with a +/-HH:MM offset, e.g.
    "2023-04-04T08:00:00-04:00" (Glue API reference, KinesisStreamingSourceOptions.StartingPosition;
    https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-etl-connect-kinesis-home.html)."""
    assert job_settings({**REQUIRED, "starting_position": timestamp}).starting_position == timestamp


@pytest.mark.parametrize(
    "timestamp",
    [
        "2026-01-31T08:00:00Z",  # Z is not the documented offset form
        "2026-01-31T08:00:00.123+00:00",  # no fractions in the documented pattern
        "2026-01-31T08:00:00",  # offset missing
        "2026-01-31 08:00:00+00:00",
        "2026-13-01T08:00:00+00:00",  # no such month
        "2026-01-31T08:00:00+25:00",  # no such offset
    ],
)
def test_starting_position_timestamps_glue_does_not_document(timestamp):
    with pytest.raises(JobArgumentError, match="UTC offset"):
        job_settings({**REQUIRED, "starting_position": timestamp})


def test_missing_required_parameters_are_named():
    incomplete = {name: value for name, value in REQUIRED.items() if name not in ("database", "stream_arn")}
    with pytest.raises(JobArgumentError, match="--stream_arn, --database"):
        job_settings(incomplete)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("stream_arn", "arn:aws:dynamodb:eu-west-1:123456789012:table/customers", "Kinesis data stream ARN"),
        ("starting_position", "yesterday", "starting_position"),
        ("window_size", "100", "window_size"),
        ("window_size", "0 seconds", "window_size"),
        ("retain_hours", "0", "retain_hours"),
        ("retain_hours", "1.5", "retain_hours"),
        ("retain_hours", "a day", "retain_hours"),
        ("sync_mode", "jdbc", "sync_mode"),
        ("raw_base_path", "/tmp/raw", "s3://"),
        ("checkpoint_location", "file:///tmp/cp", "s3://"),
    ],
)
def test_malformed_parameters(name, value, message):
    with pytest.raises(JobArgumentError, match=message):
        job_settings({**REQUIRED, name: value})


def test_kinesis_source_options():
    options = kinesis_source_options(job_settings({**REQUIRED, "starting_position": "earliest"}))
    assert options == {
        "streamARN": STREAM_ARN,
        "startingPosition": "earliest",
        "classification": "json",
        "inferSchema": "true",
        "addRecordTimestamp": "true",
        "emitConsumerLagMetrics": "true",
    }


def test_module_imports_without_awsglue():
    import importlib.util

    assert importlib.util.find_spec("awsglue") is None
    with pytest.raises(ModuleNotFoundError, match="awsglue"):
        from streaming.runtime.glue_job import main

        main(argv_of(REQUIRED))


@pytest.mark.parametrize(
    "conf",
    [
        {"spark.hadoop.hive.metastore.client.factory.class": GLUE_CATALOG_CLIENT_FACTORY},
        {"hive.metastore.client.factory.class": GLUE_CATALOG_CLIENT_FACTORY},
    ],
)
def test_hms_sync_reaches_the_glue_catalog_with_enable_glue_datacatalog(conf):
    """--enable-glue-datacatalog makes Spark's Hive client the Glue Data Catalog (AWS Glue job
    parameters; https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-etl-format-hudi.html)."""
    assert catalog_access_problem("hms", conf, lambda name: False) is None
    require_catalog_access("hms", conf, lambda name: False)


@pytest.mark.parametrize(
    "conf", [{}, {"spark.hadoop.hive.metastore.client.factory.class": "org.example.OtherFactory"}]
)
def test_hms_sync_without_the_glue_catalog_stops_the_job_at_start(conf):
    problem = catalog_access_problem("hms", conf, lambda name: True)
    assert problem is not None and "--enable-glue-datacatalog" in problem
    with pytest.raises(CatalogAccessError, match="enable-glue-datacatalog"):
        require_catalog_access("hms", conf, lambda name: True)


def test_glue_sync_needs_the_glue_sync_tool_class():
    asked: list[str] = []

    def loadable(name: str) -> bool:
        asked.append(name)
        return name == GLUE_SYNC_TOOL

    assert catalog_access_problem("glue", {}, loadable) is None
    assert asked == [GLUE_SYNC_TOOL]
    with pytest.raises(CatalogAccessError, match="AwsGlueCatalogSyncTool"):
        require_catalog_access("glue", {}, lambda name: False)
    assert catalog_access_problem("none", {}, lambda name: False) is None


def test_docstring_lists_every_job_parameter_and_the_glue_settings():
    doc = streaming.runtime.glue_job.__doc__
    for name in (*REQUIRED_ARGS, *OPTIONAL_ARGS):
        assert f"--{name}" in doc, name
    for setting in ("--datalake-formats hudi", "--enable-glue-datacatalog", "KryoSerializer", "MICROSECOND"):
        assert setting in doc, setting


@pytest.mark.spark
def test_catalog_check_inputs_come_from_the_session(spark):
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    assert "hive.metastore.client.factory.class" not in session_catalog_conf(spark)
    hadoop_conf.set("hive.metastore.client.factory.class", GLUE_CATALOG_CLIENT_FACTORY)
    try:
        conf = session_catalog_conf(spark)
        assert catalog_access_problem("hms", conf, lambda name: False) is None
        assert conf["spark.app.name"] == spark.sparkContext.appName
    finally:
        hadoop_conf.unset("hive.metastore.client.factory.class")
    assert jvm_class_loadable(spark, "org.apache.spark.sql.SparkSession")
    assert not jvm_class_loadable(spark, "org.example.lakehouse.NoSuchClass")


@pytest.mark.spark
def test_checkpoint_query_id_is_the_id_spark_gives_the_query(spark, tmp_path):
    """Spark reads <checkpoint>/metadata (StreamMetadata) at query start and keeps its id,
    so the id the sink records is the query's own, and stable across restarts."""
    from streaming.io.storage import HadoopFiles

    files = HadoopFiles(spark)
    checkpoint = str(tmp_path / "checkpoint")
    stream_id = checkpoint_query_id(files, checkpoint)
    assert checkpoint_query_id(files, checkpoint) == stream_id
    query = (
        spark.readStream.format("rate").option("rowsPerSecond", 1).load()
        .writeStream.format("noop").option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    )
    query.awaitTermination(60)
    assert query.id == stream_id
    assert checkpoint_query_id(files, str(tmp_path / "another")) != stream_id


@pytest.mark.spark
def test_checkpoint_metadata_that_is_not_sparks_is_refused(spark, tmp_path):
    from streaming.io.storage import HadoopFiles

    (tmp_path / "metadata").write_text("not json")
    with pytest.raises(JobArgumentError, match="checkpoint"):
        checkpoint_query_id(HadoopFiles(spark), str(tmp_path))


# --------------------------------------------------------------------------- start-up


def fake_awsglue(monkeypatch, glue_context, job) -> None:
    """awsglue as main() uses it, which exists only inside Glue: getResolvedOptions reads
    `--name value` pairs, GlueContext is `glue_context`, Job is `job`."""
    modules = {name: types.ModuleType(name) for name in ("awsglue", "awsglue.context", "awsglue.job", "awsglue.utils")}
    modules["awsglue.context"].GlueContext = lambda spark_context: glue_context
    modules["awsglue.job"].Job = lambda context: job
    modules["awsglue.utils"].getResolvedOptions = lambda argv, names: {
        name: argv[argv.index(f"--{name}") + 1] for name in names}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


def test_the_job_starts_through_start_stream_with_its_kinesis_and_hudi_ends_and_commits_when_the_stream_ends(
        monkeypatch, mocked_aws):
    from pyspark.context import SparkContext

    import streaming.io.formats.hudi.sink
    import streaming.runtime.jvm_lookups
    import streaming.runtime.startup
    import streaming.runtime.stream_loop
    from streaming.io.metrics import CloudWatchMetricsPublisher

    events: list[str] = []
    session = types.SimpleNamespace(name="the job's SparkSession")
    glue_context = types.SimpleNamespace(spark_session=session)
    job = types.SimpleNamespace(init=lambda name, resolved: events.append(f"job {name} initialised"),
                                commit=lambda: events.append("job committed"))
    fake_awsglue(monkeypatch, glue_context, job)
    monkeypatch.setattr(SparkContext, "getOrCreate", lambda: "the SparkContext")
    monkeypatch.setattr(streaming.io.formats.hudi.sink, "hudi_bundle_available", lambda spark: spark is session)
    monkeypatch.setattr(streaming.runtime.jvm_lookups, "remember_jvm_classes",
                        lambda spark: events.append("JVM classes remembered" if spark is session else "other session"))
    monkeypatch.setattr(streaming.runtime.glue_job, "session_catalog_conf",
                        lambda spark: {METASTORE_CLIENT_FACTORY_KEYS[0]: GLUE_CATALOG_CLIENT_FACTORY})

    def assembled_by_the_job(step):
        def refuse(*args, **kwargs):
            raise AssertionError(f"the job ran {step} itself instead of through start_stream")
        return refuse

    for step in ("claim_stream", "check_contract_changes", "checked_pipeline", "local_pipeline"):
        monkeypatch.setattr(streaming.runtime.startup, step, assembled_by_the_job(step))
    monkeypatch.setattr(streaming.runtime.stream_loop, "run_stream", assembled_by_the_job("run_stream"))
    started: list[tuple] = []

    def start_stream(spark, ends, contracts, report, **keywords):
        started.append((spark, ends, contracts, keywords))
        events.append("stream started")
        query = types.SimpleNamespace(awaitTermination=lambda: events.append("stream ended"))
        return types.SimpleNamespace(query=query)

    monkeypatch.setattr(streaming.runtime.startup, "start_stream", start_stream)

    streaming.runtime.glue_job.main(argv_of({**REQUIRED, "window_size": "2 minutes"}))

    ((spark, ends, contracts, keywords),) = started
    assert spark is session and isinstance(ends, KinesisToRaw) and ends.glue_context is glue_context
    assert (ends.raw_root, ends.checkpoint_dir, ends.trigger, ends.interval, ends.query_name) == (
        "s3://lake/raw", "s3://lake/checkpoints/ddb-cdc-to-raw/", "processing-time", "2 minutes", "ddb-cdc-to-raw")
    assert contracts == load_contracts()
    assert isinstance(keywords["metrics"], CloudWatchMetricsPublisher)
    assert keywords["metrics"].job_name == "ddb-cdc-to-raw"
    assert events == ["JVM classes remembered", "job ddb-cdc-to-raw initialised", "stream started", "stream ended",
                      "job committed"]


def test_a_job_glue_gave_no_hudi_stops_at_start_naming_the_job_parameter(monkeypatch, mocked_aws):
    """The check and its words are the format's (RawFormat.require_jars); on Glue they
    name the job parameter that loads Glue's own Hudi, not `make venv`."""
    from pyspark.context import SparkContext

    import streaming.io.formats.hudi.sink
    import streaming.runtime.jvm_lookups
    import streaming.runtime.startup
    from streaming.io.formats.raw_format import MissingFormatJars

    session = types.SimpleNamespace(name="the job's SparkSession")
    fake_awsglue(monkeypatch, types.SimpleNamespace(spark_session=session),
                 types.SimpleNamespace(init=lambda name, resolved: None, commit=lambda: None))
    monkeypatch.setattr(SparkContext, "getOrCreate", lambda: "the SparkContext")
    monkeypatch.setattr(streaming.runtime.jvm_lookups, "remember_jvm_classes", lambda spark: None)
    monkeypatch.setattr(streaming.io.formats.hudi.sink, "hudi_bundle_available", lambda spark: False)

    def start_stream(*args, **kwargs):
        raise AssertionError("the stream started on a session without Hudi")

    monkeypatch.setattr(streaming.runtime.startup, "start_stream", start_stream)

    with pytest.raises(MissingFormatJars) as refused:
        streaming.runtime.glue_job.main(argv_of(REQUIRED))
    message = str(refused.value)
    assert "org.apache.hudi.DefaultSource" in message and message.endswith("add the job parameter --datalake-formats hudi")
    assert "make venv" not in message


def test_the_jobs_ends_write_hudi_tables_marked_with_the_stream_id_and_quarantine_under_its_root():
    settings = job_settings({**REQUIRED, "sync_mode": "glue", "retain_hours": "6"})
    contracts = load_contracts()

    hudi, quarantine = KinesisToRaw(settings, glue_context=None).sinks(None, contracts, "stream-7")

    assert (hudi.base_path, hudi.database, hudi.stream_id) == ("s3://lake/raw", "raw", "stream-7")
    # The job's parameters reach the writes of the sink the format built.
    (change_log_options, current_state_options) = (
        options["customers"] for options in (hudi._change_log_options, hudi._current_state_options))
    for options in (change_log_options, current_state_options):
        assert options["hoodie.meta.sync.client.tool.class"] == GLUE_SYNC_TOOL
        assert options["hoodie.clean.hours.retained"] == "6"
    assert quarantine.path == "s3://lake/ops/quarantine"
