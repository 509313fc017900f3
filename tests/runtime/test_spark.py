"""Session construction for local and cluster masters (streaming/runtime/spark_session.py), the `--master`
option of `lakehouse stream`, and the pieces of the standalone cluster the drill starts.

The cluster run itself (master + two worker JVMs, a worker killed mid-stream) takes
minutes on a 2-core machine, far over the test budget: it is `make drills`
(`python -m benchmarks.drills --only cluster`, benchmarks/cluster_drill.py).
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from jvm_options import BASE_JVM_OPTIONS, CLASS_ARCHIVE, TEST_JVM_OPTIONS

from benchmarks.standalone_cluster import ClusterStartError, free_port, scala_version, spark_home
from streaming import cli
from streaming.runtime.package_zip import build_package_zip
from streaming.runtime.spark_session import (
    DEFAULT_MASTER,
    LOCAL_DRIVER_JAVA_OPTIONS,
    JavaNotFoundError,
    is_local_master,
    resolve_master,
    ship_package_to_executors,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("master", "local"), [
    ("local", True), ("local[2]", True), ("local[*]", True), ("local[2,3]", True),
    # Separate executor JVMs (Spark's local-cluster test mode) or real clusters.
    ("local-cluster[2,1,512]", False), ("spark://127.0.0.1:7077", False), ("yarn", False),
])
def test_only_in_process_masters_count_as_local(master: str, local: bool) -> None:
    assert is_local_master(master) is local


def test_package_zip_holds_both_packages_and_imports_from_sys_path(tmp_path: Path) -> None:
    archive = build_package_zip(tmp_path / "streaming.zip")

    names = zipfile.ZipFile(archive).namelist()
    sources = {path.relative_to(root.parent).as_posix()
               for root in (REPO / "streaming", REPO / "dbt_project" / "lakehouse_dbt")
               for path in root.rglob("*")
               if path.is_file() and path.suffix in (".py", ".yml") and "__pycache__" not in path.parts}
    assert set(names) == sources
    assert "streaming/operations/reconcile.py" in names and "streaming/samples/contracts/orders.yml" in names
    assert "lakehouse_dbt/env.py" in names
    # First on sys.path, the zip wins over any installed copy (the shared venv's points elsewhere).
    imported = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(archive)!r}); "
                               "import streaming.io.layout as m, lakehouse_dbt.env as e; print(m.__file__, e.__file__)"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout.strip()
    assert imported == f"{archive / 'streaming' / 'io' / 'layout.py'} {archive / 'lakehouse_dbt' / 'env.py'}"


@pytest.mark.spark
def test_local_executors_run_this_interpreter(spark) -> None:
    # Without PYSPARK_PYTHON Spark would start `python3` from PATH, which need not be this venv's.
    prefixes = spark.sparkContext.parallelize(range(2), 2).map(lambda _: sys.prefix).distinct().collect()
    assert prefixes == [sys.prefix]


@pytest.mark.spark
def test_the_suites_jvm_runs_with_the_options_conftest_gives_it(spark) -> None:
    # tests/conftest.py passes them through PYSPARK_SUBMIT_ARGS; were they lost, the suite
    # would still pass, only slower (its time budget is the only other witness).
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert set(TEST_JVM_OPTIONS.split()) <= set(runtime.getInputArguments())
    # The session's own choice of collector gave way to them: both would stop the JVM's start.
    assert LOCAL_DRIVER_JAVA_OPTIONS not in set(runtime.getInputArguments())


@pytest.mark.spark
def test_a_driver_jvm_the_local_session_starts_collects_garbage_with_the_parallel_collector() -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT")}
    printed = subprocess.run(
        [sys.executable, "-c", "from streaming.runtime.spark_session import local_session\n"
                               "jvm = local_session()._jvm\n"
                               "print(*sorted(bean.getName() for bean in "
                               "jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()), sep=',')"],
        capture_output=True, text=True, check=True, env=env, cwd=REPO, timeout=300,
    ).stdout.splitlines()
    # HotSpot's names for the parallel collector's young and old generations.
    assert printed[-1] == "PS MarkSweep,PS Scavenge"


@pytest.mark.spark
def test_a_jvm_on_sparks_classpath_maps_sparks_classes_from_the_suites_class_archive() -> None:
    if not CLASS_ARCHIVE.is_file():
        pytest.skip(f"no class archive at {CLASS_ARCHIVE}: `make test` writes it (tests/jvm_class_archive.py)")
    home = spark_home()
    # The classpath spark-submit's launcher gives the driver JVM; -Xshare:on refuses to
    # start at all when the archive does not fit it.
    command = ["java", "-Xshare:on", *BASE_JVM_OPTIONS.split(), f"-XX:SharedArchiveFile={CLASS_ARCHIVE}",
               "-Xlog:class+load=info", "-cp", f"{home / 'conf'}/:{home / 'jars'}/*",
               "org.apache.spark.deploy.SparkSubmit", "--version"]
    loaded = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert "org.apache.spark.deploy.SparkSubmit source: shared objects file (top)" in loaded.stdout


@pytest.mark.spark
def test_the_session_remembers_the_classes_plans_read_so_reading_them_asks_the_jvm_nothing(spark, monkeypatch) -> None:
    from py4j import protocol
    from pyspark.sql import functions as F

    class_search = protocol.REFLECTION_COMMAND_NAME + protocol.REFL_GET_UNKNOWN_SUB_COMMAND_NAME
    view = spark.sparkContext._jvm
    client = view._gateway_client
    sent: list[str] = []
    send = client.send_command
    monkeypatch.setattr(client, "send_command", lambda command, *args, **kwargs: (sent.append(command),
                                                                                 send(command, *args, **kwargs))[1])
    functions, path = view.functions, view.org.apache.hadoop.fs.Path
    assert sent == []
    assert (functions._fqn, path._fqn) == ("org.apache.spark.sql.functions", "org.apache.hadoop.fs.Path")
    # What pyspark's F.col costs now: the member lookup and the call, no class search
    # (py4j's garbage collection of Java objects sends memory commands besides).
    F.col("x")
    asked = [command for command in sent if not command.startswith(protocol.MEMORY_COMMAND_NAME)]
    assert len(asked) == 2 and not any(command.startswith(class_search) for command in asked)


def test_shipped_package_is_what_executors_import(spark) -> None:
    archive = ship_package_to_executors(spark)

    def resolve_package(_: int) -> tuple[str, str]:
        # Where a fresh `import streaming` in this executor's Python would load from
        # (sys.path order; ignores modules an earlier task already imported). An
        # executor's own working directory comes first on its sys.path: on a cluster that
        # is its scratch folder, in local mode the driver's, so it is left out here.
        import importlib.machinery
        import os
        import sys as executor_sys

        search = [entry for entry in executor_sys.path if entry not in ("", os.getcwd())]
        spec = importlib.machinery.PathFinder.find_spec("streaming", search)
        return os.getcwd(), spec.origin if spec else "not importable"

    origins = set(spark.sparkContext.parallelize(range(2), 2).map(resolve_package).collect())
    assert len(origins) == 1
    ((_, origin),) = origins
    # Spark hands executors their own copy of the zip, under the same name; it comes
    # before the interpreter's site-packages, where an installed copy would be.
    assert origin.endswith(f"/{archive.name}/streaming/__init__.py"), origin


def test_stream_master_option_defaults_to_local_and_reaches_the_session(tmp_path: Path, monkeypatch, capsys) -> None:
    assert cli.build_parser().parse_args(["stream"]).master is None  # spark-submit's, else local
    assert cli.main(["generate", "--data-dir", str(tmp_path), "--customers", "2"]) == 0
    masters = []

    def no_java(*, master: str, **_: object) -> None:
        masters.append(master)
        raise JavaNotFoundError("stopped here: the test only follows --master")

    monkeypatch.setattr("streaming.runtime.spark_session.local_session", no_java)
    code = cli.main(["stream", "--data-dir", str(tmp_path), "--master", "spark://127.0.0.1:7077"])

    assert code == 2 and "stopped here" in capsys.readouterr().err
    assert masters == ["spark://127.0.0.1:7077"]


@pytest.mark.spark
def test_master_defaults_to_the_one_spark_submit_passed_else_local(spark) -> None:
    assert resolve_master("spark://127.0.0.1:7077") == "spark://127.0.0.1:7077"
    assert resolve_master(None) == DEFAULT_MASTER == "local[2]"
    # spark-submit hands its --master to the driver as this JVM system property.
    system = spark.sparkContext._jvm.java.lang.System
    system.setProperty("spark.master", "yarn")
    try:
        assert resolve_master(None) == "yarn"
    finally:
        system.clearProperty("spark.master")


def test_scala_version_is_read_from_sparks_own_jars(tmp_path: Path) -> None:
    home = spark_home()
    version = scala_version(home)
    # The Scala library shipped with the same pyspark must be of that binary version.
    assert list(home.glob(f"jars/scala-library-{version}.*.jar"))
    with pytest.raises(ClusterStartError, match="no spark-core jar"):
        scala_version(tmp_path)


def test_free_port_is_bindable_on_loopback() -> None:
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", port))
        assert listener.getsockname() == ("127.0.0.1", port)


@pytest.mark.parametrize(("submit_args", "master"), [(None, "local[2]"), ("--master local[3] pyspark-shell", "local[3]")])
def test_a_plain_python_process_starts_no_jvm_to_find_its_master(submit_args: str | None, master: str) -> None:
    """The session must start the JVM itself: the Hudi jars and settings can only be given
    at the JVM's start, and pyspark's launcher would have set local[*]."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT")}
    if submit_args:
        env["PYSPARK_SUBMIT_ARGS"] = submit_args
    printed = subprocess.run(
        [sys.executable, "-c", "from pyspark import SparkContext; from streaming.runtime.spark_session import "
                               "resolve_master; print(resolve_master(None), SparkContext._gateway is None)"],
        capture_output=True, text=True, check=True, env=env, cwd=REPO,
    ).stdout.split()
    assert printed == [master, "True"]


def test_the_local_session_sets_hudi_as_the_glue_job_does_without_its_sql_extension_and_catalog() -> None:
    """The Glue job passes Kryo alone (deploy/job_arguments.py, after Hudi's quick start);
    locally Hudi's registrator joins it. Hudi's SQL extension and catalog serve Spark SQL
    on Hudi tables, which the job does not use, and made each micro-batch 1/0.60 as long
    (docs/performance.md): neither may come back unnoticed."""
    from deploy.job_arguments import glue_system_arguments
    from streaming.io.formats.hudi.format import HUDI_SPARK_CONF

    glue_conf = glue_system_arguments("x.zip", "s3://t/", "s3://e/")["--conf"]
    key, value = glue_conf.split("=", 1)
    assert HUDI_SPARK_CONF[key] == value
    assert set(HUDI_SPARK_CONF) == {"spark.serializer", "spark.kryo.registrator"}
    assert not {"spark.sql.extensions", "spark.sql.catalog.spark_catalog"} & set(HUDI_SPARK_CONF)


def test_hudis_warning_that_it_ignores_version_8_settings_is_dropped_and_its_other_warnings_are_not(spark) -> None:
    # Asked of log4j for the logger Hudi writes it with, before the values are filled in,
    # as Hudi 1.0.2 logs it for each setting newer than the table that it drops.
    log4j = spark._jvm.org.apache.logging.log4j
    hudi_table_config = log4j.LogManager.getLogger("org.apache.hudi.common.table.HoodieTableConfig")
    warn = log4j.Level.WARN
    expected = "Table version {} is lower than or equal to config's first version {}. Config {} will be ignored."

    assert not hudi_table_config.isEnabled(warn, None, expected, "SIX")
    assert hudi_table_config.isEnabled(warn, None, expected.replace("ignored", "kept"), "SIX")
    assert hudi_table_config.isEnabled(warn, None, "Table version {} cannot be read", "SIX")


def test_hudis_retried_save_of_a_partition_folders_metadata_is_quiet_and_a_retry_that_gives_up_is_not(spark) -> None:
    # Hudi 1.0.2 logs the retry, with the FileAlreadyExistsException of the second task
    # that made a new partition folder, at WARN through RetryHelper's logger; a retry
    # that gives up is logged at ERROR (the format's jvm_log_levels say why).
    log4j = spark._jvm.org.apache.logging.log4j
    retry_helper = log4j.LogManager.getLogger("org.apache.hudi.common.util.RetryHelper")
    partition_metadata = log4j.LogManager.getLogger("org.apache.hudi.common.model.HoodiePartitionMetadata")

    assert not retry_helper.isEnabled(log4j.Level.WARN)
    assert retry_helper.isEnabled(log4j.Level.ERROR)
    # Only that one logger: the partition metadata's own warnings still show.
    assert partition_metadata.isEnabled(log4j.Level.WARN)
